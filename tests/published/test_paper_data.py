"""`hardpos eval` records the data's build, and a real build from local copies of other files gets no difference."""

import json

from hf_hardpos.data.replace import export_replace
from hf_hardpos.evaluation.aggregation import REPLACE_POOLED
from hf_hardpos.evaluation.run import evaluate_model
from tests.support.data_sources import make_replace_upstream, make_vg_images, replace_images


def test_a_build_from_other_files_is_recorded_and_gets_no_difference(tiny_clip_dir, tmp_path):
    upstream = make_replace_upstream(tmp_path / "hard_positives")
    make_vg_images(tmp_path / "VG", replace_images())
    built = tmp_path / "replace"
    export_replace(built, upstream_dir=upstream, images_dir=tmp_path / "VG", progress=False)
    evaluate_model(
        str(tiny_clip_dir), str(built), output_dir=tmp_path / "eval", preset="clip", progress=False
    )
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    report = json.loads((built / "build_report.json").read_text())
    for config in ("attributes", "relations"):
        build = saved["provenance"][config]["build"]
        assert build["dataset"] == "replace" and build["counts"] == report["counts"]
        assert build["local_variants"] == report["local_variants"] != []  # the fixture is not the pinned file
    pooled = saved["published"]["rows"][REPLACE_POOLED]
    assert "delta" not in pooled
    assert pooled["differs"].startswith(
        "11 of 27,443 rows; built from local copies that are not the paper's files"
    )


def test_a_hub_datasets_build_record_is_read_through_the_hub_cache(tmp_path, monkeypatch):
    """`hardpos build --push` uploads build_report.json beside the shards: a Hub id's record is that file."""
    import huggingface_hub

    from hf_hardpos.evaluation.paper_data import build_record

    (tmp_path / "build_report.json").write_text(
        json.dumps({"dataset": "swap", "counts": {"default": 28_748}, "expected_counts": {"default": 28_748}})
    )
    asked = []

    def download(repo_id, filename, repo_type):
        asked.append((repo_id, filename, repo_type))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    assert build_record("hardpos/swap")["counts"] == {"default": 28_748}
    assert asked == [("hardpos/swap", "build_report.json", "dataset")]
    assert (
        build_record(str(tmp_path / "missing" / "x")) is None and len(asked) == 1
    )  # a path is never a Hub id


def test_valse_rows_are_counted_as_its_figures_count_them():
    """VALSE's figures are over its valid rows (mturk.caption >= 2: existence 505 of 534, read from the
    VALSE files at Heidelberg-NLP/VALSE@2152d90); a full run is not short of rows, only of a pinned digest."""
    from hf_hardpos.evaluation.paper_data import data_differs

    full = data_differs(
        "valse/existence", ["existence"], {"existence": {"num_examples": 505}}, {"existence": {"dataset": {}}}
    )
    assert "rows" not in full.split(";")[0] and "not built from the paper's sources" in full
    short = data_differs(
        "valse/existence", ["existence"], {"existence": {"num_examples": 8}}, {"existence": {"dataset": {}}}
    )
    assert short.startswith("8 of 505 rows")


def test_a_build_of_valses_pinned_files_is_valses_data():
    """VALSE's files are pinned by sha256 at Heidelberg-NLP/VALSE@2152d90: a complete build of them, scored on
    every valid row, may stand beside CE-CLIP's VALSE figures with a difference."""
    import tempfile
    from pathlib import Path

    from hf_hardpos.benchmarks.valse.builder import VALSE_COUNTS, VALSE_REPO
    from hf_hardpos.evaluation.paper_data import build_record, data_differs
    from tests.support.paper_data import write_paper_build_report

    with tempfile.TemporaryDirectory() as folder:
        write_paper_build_report(
            Path(folder),
            "valse",
            [f"data/{p}.json" for p in VALSE_COUNTS],
            {p: rows for p, (rows, _) in VALSE_COUNTS.items()},
            repo=VALSE_REPO,
        )
        build = build_record(folder)
    provenance = {p: {"dataset": {}, "build": build} for p in VALSE_COUNTS}
    results = {p: {"num_examples": valid} for p, (_, valid) in VALSE_COUNTS.items()}
    assert data_differs("valse/existence", ["existence"], results, provenance) is None
    assert data_differs("vl_checklist/overall", ["official/overall"], {}, provenance).startswith(
        "built as 'valse'"
    )
