"""Zero-shot retention in the paper's Table 10 layout, with its published row and our difference."""

import pytest

from hf_hardpos.evaluation.group_means import group_means
from hf_hardpos.evaluation.retention_table import RETENTION_COLUMNS, retention_table, retention_values
from hf_hardpos.evaluation.section import Section
from hf_hardpos.evaluation.suite_entry import SuiteEntry
from hf_hardpos.evaluation.tasks import ZEROSHOT_CLASSIFICATION, ZEROSHOT_RETRIEVAL
from hf_hardpos.published import model_row


def _section(task, source, **metrics):
    """A zero-shot section as the runner saves it: its rows and its unit's data identity (a Hub id at a commit)."""
    identity = {"hub_id": source, "split": "test", "revision": "0" * 40}
    return Section(task, source, results={"all": metrics}, provenance={"all": {"dataset": identity}})


@pytest.fixture
def suite_sections():
    sections = {
        "imagenet1k": _section(ZEROSHOT_CLASSIFICATION, "clip-benchmark/wds_imagenet1k", acc1=0.6, acc5=0.85),
        "vtab/cifar10": _section(
            ZEROSHOT_CLASSIFICATION, "clip-benchmark/wds_vtab-cifar10", acc1=0.8, acc5=0.99
        ),
        "vtab/dtd": _section(ZEROSHOT_CLASSIFICATION, "clip-benchmark/wds_vtab-dtd", acc1=0.4, acc5=0.7),
        "mscoco_captions": _section(
            ZEROSHOT_RETRIEVAL,
            "clip-benchmark/wds_mscoco_captions",
            **{"image_retrieval_recall@1": 0.3, "text_retrieval_recall@1": 0.5},
        ),  # fmt: skip
    }
    entries = [SuiteEntry(name, s.source, s.task, group="vtab" if name.startswith("vtab/") else None)
               for name, s in sections.items()]  # fmt: skip
    return sections, group_means(sections, entries)


def test_vtab_mean_of_acc1_and_acc5(suite_sections):
    sections, means = suite_sections
    assert means["vtab"]["values"] == {"acc1": pytest.approx(0.6), "acc5": pytest.approx(0.845)}
    assert means["vtab"]["value"] == means["vtab"]["values"]["acc1"]
    values = retention_values(sections, means)
    assert values[("vtab", "acc5")] == pytest.approx(0.845)
    assert values[("mscoco_captions", "text_retrieval_recall@1")] == 0.5
    assert ("flickr30k", "image_retrieval_recall@1") not in values  # not run: left empty, never guessed


def test_table10_rows_ours_paper_and_difference(suite_sections):
    sections, means = suite_sections
    text = retention_table(sections, means, model_row("openai/clip-vit-base-patch32"))
    lines = {line.split("  ")[0].strip(): line.split() for line in text.splitlines()}
    header = [name for name, _, _ in RETENTION_COLUMNS]
    # Table 10's columns, in its order: ImageNet1k, COCO, Flickr30k, VTAB.
    assert header == [
        "ImageNet acc@1",
        "ImageNet acc@5",
        "COCO image R@1",
        "COCO text R@1",
        "Flickr image R@1",
        "Flickr text R@1",
        "VTAB acc@1",
        "VTAB acc@5",
    ]
    ours = lines["ours"][1:]
    assert ours == ["60.00", "85.00", "30.00", "50.00", "60.00", "84.50"]  # Flickr30k not run: empty
    paper = next(cells for label, cells in lines.items() if label.startswith("paper:"))
    # Table 10's CLIP ViT-B/32 row, every column.
    assert paper[-8:] == ["63.33", "88.83", "30.46", "50.14", "58.82", "77.40", "39.00", "70.90"]
    # ImageNet and COCO are clip_benchmark's own Hub sets, all rows: their differences. VTAB ran 2 of its 20
    # tasks: no difference, and the note says why.
    delta = lines["ours - paper (pp)"][-4:]
    assert delta == [f"{a - b:+.2f}" for a, b in zip((60, 85, 30, 50), (63.33, 88.83, 30.46, 50.14))]
    assert "no difference for vtab: 2 of the 20 VTAB tasks" in text
    assert retention_table(sections, means, None).count("\n") == 3  # no paper row for an unknown model
    assert retention_table({}, {}, None) == ""


def test_retention_sets_are_matched_by_the_data_read_not_the_entry_name(suite_sections, tmp_path):
    """A local folder named `coco` run as entry `mscoco_captions` is not Table 10's COCO (in `compare` neither);
    a local copy named like clip_benchmark's set is, but is not the paper's data: no difference."""
    from hf_hardpos.evaluation.retention_table import retention_differs

    sections, means = suite_sections
    coco = dict(
        sections,
        mscoco_captions=_section(
            ZEROSHOT_RETRIEVAL, str(tmp_path / "coco"), **{"image_retrieval_recall@1": 0.3}
        ),
    )
    assert ("mscoco_captions", "image_retrieval_recall@1") not in retention_values(coco, means)
    local = dict(
        sections,
        mscoco_captions=Section(
            ZEROSHOT_RETRIEVAL,
            str(tmp_path / "wds_mscoco_captions"),
            results={"all": {"image_retrieval_recall@1": 0.3}},
            provenance={"all": {"dataset": {"path": str(tmp_path)}}},
        ),
    )
    assert retention_values(local, means)[("mscoco_captions", "image_retrieval_recall@1")] == 0.3
    assert "not clip_benchmark's clip-benchmark/wds_mscoco_captions" in retention_differs(
        "mscoco_captions", local, means
    )
    assert retention_differs("imagenet1k", sections, means, max_rows=10) == "at most 10 rows scored"


def test_a_preset_names_the_paper_row_of_a_local_checkpoint(suite_sections):
    """A converted checkpoint is a local folder: its `hardpos zoo` preset, recorded by the run, names its row."""
    from hf_hardpos.evaluation.suite import SuiteReport

    sections, means = suite_sections
    report = SuiteReport("out/converted", run={"preset": "hp-hn"}, sections=sections, group_means=means)
    paper = next(line.split() for line in report.table().splitlines() if line.startswith("paper: "))
    assert paper[-8:] == [
        "49.85",
        "79.70",
        "49.67",
        "65.02",
        "67.52",
        "80.60",
        "33.24",
        "67.75",
    ]  # Table 10, HP+HN
    assert "paper: " not in SuiteReport("out/converted", sections=sections, group_means=means).table()


def test_vtab_acc5_averages_the_tasks_that_have_one():
    """clip_benchmark 1.6.2 gives a task with fewer than 5 classes acc5 = NaN (metrics/zeroshot_classification.py,
    `evaluate`); a pandas mean of its results skips NaN, so VTAB acc@5 is the mean over the other tasks, never
    blank because pcam (2 classes) and kitti (4) are in the group."""
    import pandas as pd

    results = {
        "vtab/cifar10": {"acc1": 0.8, "acc5": 0.99},
        "vtab/dtd": {"acc1": 0.4, "acc5": 0.7},
        "vtab/pcam": {"acc1": 0.55},
        "vtab/kitti_closest_vehicle_distance": {"acc1": 0.3},
    }
    sections = {
        name: _section(ZEROSHOT_CLASSIFICATION, f"clip-benchmark/wds_{name.replace('/', '-')}", **m)
        for name, m in results.items()
    }
    means = group_means(
        sections, [SuiteEntry(n, s.source, s.task, group="vtab") for n, s in sections.items()]
    )
    # As the paper's clip_benchmark outputs would be averaged: NaN where acc5 is not computed, skipped.
    frame = pd.DataFrame([{"acc1": m["acc1"], "acc5": m.get("acc5", float("nan"))} for m in results.values()])
    assert means["vtab"]["values"] == {
        "acc1": pytest.approx(frame["acc1"].mean()),
        "acc5": pytest.approx(frame["acc5"].mean()),
    }
    assert means["vtab"]["values_over"] == {"acc1": 4, "acc5": 2}
    assert ("vtab", "acc5") in retention_values(sections, means)
