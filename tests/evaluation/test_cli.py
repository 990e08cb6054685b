"""`hardpos eval` end to end: a tiny random CLIP and a generated dataset laid out like a Hub repo."""

import json

import numpy as np
import pytest
from datasets import load_dataset

from hf_hardpos.cli import main
from hf_hardpos.evaluation.aggregation import REPLACE_MACRO_MEAN, REPLACE_POOLED
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.metrics import compute_metrics
from tests.support.eval_data import make_eval_set, write_hub_folder


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory):
    """parquet shards + README `configs:`, as a Hub dataset repo is stored."""
    sets = {
        config: make_eval_set(num_images=4 + seed, rows_per_image=2, seed=seed)
        for seed, config in enumerate(("attributes", "relations"))
    }
    return write_hub_folder(tmp_path_factory.mktemp("replace_repo"), sets)


def test_cli_prints_table_and_writes_outputs(tiny_clip_dir, hub_folder, tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(
        [
            "eval",
            "--model",
            str(tiny_clip_dir),
            "--dataset",
            str(hub_folder),
            "--output",
            str(out),
            "--batch-size",
            "3",
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "attributes" in printed and "relations" in printed and REPLACE_POOLED in printed
    report = json.loads((out / "metrics.json").read_text())
    assert set(report["results"]) == {"attributes", "relations"}
    for config in ("attributes", "relations"):
        rows = load_dataset("parquet", data_files=str(out / f"scores-{config}.parquet"), split="train")
        assert len(rows) == report["results"][config]["num_examples"]
        recomputed = compute_metrics(rows["original_score"], rows["negative_score"], rows["positive_score"])
        assert recomputed["brittleness"] == report["results"][config]["brittleness"]
        assert np.mean(rows["brittle"]) == report["results"][config]["brittleness"]
    macro = report["aggregates"][REPLACE_MACRO_MEAN]
    for key in ("original_accuracy", "augmented_accuracy", "brittleness"):
        expected = (report["results"]["attributes"][key] + report["results"]["relations"][key]) / 2
        assert macro[key] == pytest.approx(expected)
    assert report["aggregates"][REPLACE_POOLED]["aggregation"]["method"] == "pooled"


def test_single_config_and_bootstrap(tiny_clip_dir, hub_folder):
    report = evaluate_model(
        str(tiny_clip_dir), str(hub_folder), ["relations"], bootstrap_samples=100, max_rows=6, progress=False
    )
    assert list(report.results) == ["relations"] and report.aggregates == {}
    result = report.results["relations"]
    assert result["num_examples"] == 6
    assert result["brittleness_ci_low"] <= result["brittleness"] <= result["brittleness_ci_high"]


def test_unknown_config_is_an_error(tiny_clip_dir, hub_folder):
    with pytest.raises(ValueError, match="nonexistent"):
        evaluate_model(str(tiny_clip_dir), str(hub_folder), ["nonexistent"], progress=False)


def test_rerun_resumes_from_saved_configs(tiny_clip_dir, hub_folder, tmp_path, monkeypatch):
    from hf_hardpos.evaluation.tasks import hard_positive
    from hf_hardpos.model_source import ModelSource

    out = tmp_path / "eval"
    first = evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, progress=False)
    # Simulate an interruption after the first config: drop "relations" from the saved report.
    saved = json.loads((out / "metrics.json").read_text())
    del saved["results"]["relations"], saved["provenance"]["relations"]
    saved["aggregates"] = {}  # as a run saves after its first config: the pooled column needs both
    (out / "metrics.json").write_text(json.dumps(saved))

    scored = []
    real_score = hard_positive.score_eval_set
    monkeypatch.setattr(
        hard_positive, "score_eval_set", lambda scorer, ds: scored.append(len(ds)) or real_score(scorer, ds)
    )
    second = evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, progress=False)
    assert scored == [first.results["relations"]["num_examples"]]  # only the missing config was scored
    assert second.results == first.results and second.aggregates == first.aggregates

    # Everything saved: the model is not even loaded; other settings start afresh.
    monkeypatch.setattr(ModelSource, "load", lambda self, *args: pytest.fail("model loaded"))
    assert (
        evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, progress=False).results
        == first.results
    )
    with pytest.raises(pytest.fail.Exception, match="model loaded"):
        evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, max_rows=3, progress=False)
