"""`hardpos eval --suite`: every task recognised from its layout, one report, resumable, images encoded once."""

import json

import pytest
import yaml
from transformers import CLIPModel

from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.suite import load_suite, run_suite
from hf_hardpos.evaluation.tasks import (
    CAPTION_SELECTION,
    HARD_POSITIVE,
    WINOGROUND,
    ZEROSHOT_CLASSIFICATION,
    ZEROSHOT_RETRIEVAL,
    detect_task,
)
from hf_hardpos.evaluation.tasks.zeroshot_classification import (
    evaluate_zeroshot_classification,
)


def test_tasks_are_recognised_from_the_layout(suite_folders):
    expected = {
        "replace": HARD_POSITIVE,
        "sugarcrepe": CAPTION_SELECTION,
        "winoground": WINOGROUND,
        "cifar_a": ZEROSHOT_CLASSIFICATION,
        "coco": ZEROSHOT_RETRIEVAL,
    }
    assert {name: detect_task(str(suite_folders[name])) for name in expected} == expected


def test_named_suites_and_yaml_errors(tmp_path):
    paper = load_suite("paper")
    names = [e.name for e in paper]
    assert names[:5] == ["replace", "swap", "sugarcrepe_pp", "sugarcrepe", "aro"]
    assert sum(e.group == "vtab" for e in paper) == 20 and "imagenet1k" in names and "flickr30k" in names
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"datasets": [{"dataset": "x", "colour": "red"}]}))
    with pytest.raises(UserInputError, match="unknown field"):
        load_suite(str(bad))
    with pytest.raises(UserInputError, match="neither a suite"):
        load_suite("no-such-suite")


def test_suite_end_to_end_resumes_and_encodes_each_image_once(
    tiny_clip_dir, suite_folders, tmp_path, monkeypatch
):
    spec = tmp_path / "suite.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "datasets": [
                    {"name": "replace", "dataset": str(suite_folders["replace"])},
                    {"name": "sugarcrepe", "dataset": str(suite_folders["sugarcrepe"])},
                    {"name": "winoground", "dataset": str(suite_folders["winoground"])},
                    {"name": "cifar_a", "dataset": str(suite_folders["cifar_a"]), "group": "mini-vtab"},
                    {"name": "cifar_b", "dataset": str(suite_folders["cifar_b"]), "group": "mini-vtab"},
                    {"name": "coco", "dataset": str(suite_folders["coco"])},
                ]
            }
        )
    )
    images_encoded = []
    real = CLIPModel.get_image_features
    monkeypatch.setattr(
        CLIPModel,
        "get_image_features",
        lambda self, pixel_values, **k: (
            images_encoded.append(len(pixel_values)) or real(self, pixel_values=pixel_values, **k)
        ),
    )
    out = tmp_path / "out"
    report = run_suite(
        str(tiny_clip_dir),
        load_suite(str(spec)),
        output_dir=out,
        batch_size=4,
        progress=False,
        log=lambda m: None,
    )
    assert set(report.sections) == {"replace", "sugarcrepe", "winoground", "cifar_a", "cifar_b", "coco"}
    # cifar_b's images are a subset of cifar_a's: the shared scorer never encodes an image twice.
    assert sum(images_encoded) == len({*_distinct_images(suite_folders)})
    section = report.sections["cifar_a"]
    assert section.task == ZEROSHOT_CLASSIFICATION and section.tie_rule and section.aggregation
    direct = evaluate_zeroshot_classification(_scorer(tiny_clip_dir), str(suite_folders["cifar_a"]))
    assert section.results["all"]["acc1"] == direct["acc1"]
    mean = report.group_means["mini-vtab"]
    assert mean["value"] == pytest.approx(
        (section.results["all"]["acc1"] + report.sections["cifar_b"].results["all"]["acc1"]) / 2
    )
    assert "pooled(attributes,relations)" in report.sections["replace"].aggregates
    table = report.table()
    assert "tie rule" in table and "unweighted mean of acc1 over 2 datasets" in table
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved["datasets"]) == set(report.sections)

    # A rerun reuses every dataset's saved result without loading the model.
    from hf_hardpos.model_source import ModelSource

    monkeypatch.setattr(ModelSource, "load", lambda self, *args: pytest.fail("model loaded"))
    again = run_suite(
        str(tiny_clip_dir),
        load_suite(str(spec)),
        output_dir=out,
        batch_size=4,
        progress=False,
        log=lambda m: None,
    )
    assert again.to_dict()["datasets"] == report.to_dict()["datasets"]


def _scorer(model_dir):
    from transformers import AutoModel, AutoProcessor

    from hf_hardpos.scoring import ITMScorer

    return ITMScorer(
        AutoModel.from_pretrained(model_dir), AutoProcessor.from_pretrained(model_dir), progress=False
    )


def _distinct_images(suite_folders):
    """Content keys of every image in the suite's data, as the scorer sees them."""
    import hashlib

    from datasets import Image

    from hf_hardpos.evaluation.eval_data import load_eval_sets
    from tests.support.webdataset import read_webdataset

    keys = set()
    for name, image_columns in (
        ("replace", ["image"]),
        ("sugarcrepe", ["image"]),
        ("winoground", ["image_0", "image_1"]),
    ):
        for eval_set in load_eval_sets(str(suite_folders[name]), None, "test").values():
            for column in image_columns:
                cells = eval_set.dataset.cast_column(column, Image(decode=False))[column]
                keys |= {hashlib.blake2b(c["bytes"], digest_size=16).hexdigest() for c in cells}
    for name in ("cifar_a", "cifar_b", "coco"):
        for sample in read_webdataset(suite_folders[name]):
            data = next(v for k, v in sample.items() if k in ("png", "jpg", "webp", "jpeg"))
            keys.add(hashlib.blake2b(data, digest_size=16).hexdigest())
    return keys


def test_cli_dataset_of_another_task_runs_as_one_dataset_and_prints_the_rule(
    tiny_clip_dir, suite_folders, tmp_path, capsys
):
    """Any task's dataset runs through the one runner: without --output it prints, with it OUT/metrics.json is
    that dataset's section (as a hard-positive dataset's), resumed by a rerun."""
    assert (
        main(
            ["eval", "--model", str(tiny_clip_dir), "--dataset", str(suite_folders["coco"]), "--no-progress"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "image_retrieval_recall@1" in printed and "tie rule" in printed
    out = tmp_path / "coco"
    argv = [
        "eval",
        "--model",
        str(tiny_clip_dir),
        "--dataset",
        str(suite_folders["coco"]),
        "--output",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["task"] == "zeroshot_retrieval" and set(saved["results"]) == {"all"}
    assert f"{saved['results']['all']['image_retrieval_recall@1']:.4f}" in printed  # the same figures, saved
    capsys.readouterr()
    assert main(argv) == 0
    assert "reusing" in capsys.readouterr().out
    assert main(["eval", "--model", str(tiny_clip_dir), "--suite", "paper", "--no-progress"]) == 2
    assert "--output-dir is required" in capsys.readouterr().err


def test_a_rerun_of_a_subset_keeps_the_other_datasets(tiny_clip_dir, suite_folders, tmp_path):
    """A suite rerun naming fewer datasets used to drop the others from OUT/metrics.json."""
    from hf_hardpos.evaluation.suite import SuiteEntry

    both = [
        SuiteEntry("replace", str(suite_folders["replace"])),
        SuiteEntry("sugarcrepe", str(suite_folders["sugarcrepe"])),
    ]
    out = tmp_path / "out"
    quiet = dict(output_dir=out, batch_size=4, progress=False, log=lambda m: None)
    run_suite(str(tiny_clip_dir), both, **quiet)
    first = json.loads((out / "metrics.json").read_text())
    run_suite(str(tiny_clip_dir), both[1:], **quiet)
    again = json.loads((out / "metrics.json").read_text())
    assert again["datasets"] == first["datasets"]
    assert again["run"]["complete"] and again["run"]["num_datasets"] == 2


def test_a_suite_file_that_is_not_utf8_is_one_line(tmp_path):
    spec = tmp_path / "suite.yaml"
    spec.write_bytes(b"datasets:\n  - {name: caf\xe9, dataset: x}\n")  # Latin-1
    with pytest.raises(UserInputError, match="not UTF-8"):
        load_suite(str(spec))
