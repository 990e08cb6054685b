"""The work every model of a `--model A --model B` run shares is done once (issue 52): the eval sets are
loaded and hashed once, each config's images keyed once, its caption slots built once and its texts
tokenised once per tokenizer, while each model's scores stay those of a run alone."""

import pyarrow.parquet as pq
import pytest

import hf_hardpos.evaluation.eval_data as eval_data
import hf_hardpos.scoring as scoring
from hf_hardpos.cli import main
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import write_attributes_relations_folder

CONFIGS = ("attributes", "relations")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny CLIPs with the same tokenizer and image processor, different weights."""
    root = tmp_path_factory.mktemp("models")
    return [build_tiny_clip(root / "a", seed=1), build_tiny_clip(root / "b", seed=2)]


def _count(monkeypatch, module, name: str) -> list:
    calls, original = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_shared_work_is_done_once_and_scores_equal_runs_alone(models, tmp_path, monkeypatch):
    folder = write_attributes_relations_folder(tmp_path / "replace")
    loads = _count(monkeypatch, eval_data, "load_local_split")
    keyed = _count(monkeypatch, scoring, "distinct_images")
    slots = _count(monkeypatch, scoring, "_caption_slots")
    tokenised = _count(monkeypatch, scoring.ITMScorer, "tokenize")
    args = ["--dataset", str(folder), "--batch-size", "3", "--no-progress"]

    assert (
        main(
            [
                "eval",
                "--model",
                str(models[0]),
                "--model",
                str(models[1]),
                "--output",
                str(tmp_path / "both"),
                *args,
            ]
        )
        == 0
    )
    assert (len(loads), len(keyed), len(slots), len(tokenised)) == (
        2,
        2,
        2,
        2,
    )  # once per config, not per model

    for model in models:  # and each alone does it all itself: the sharing ends with the run
        assert (
            main(["eval", "--model", str(model), "--output", str(tmp_path / f"alone-{model.name}"), *args])
            == 0
        )
    assert (len(loads), len(keyed), len(slots), len(tokenised)) == (6, 6, 6, 6)
    for model in models:
        for config in CONFIGS:
            alone = pq.read_table(tmp_path / f"alone-{model.name}" / f"scores-{config}.parquet")
            assert alone.equals(pq.read_table(tmp_path / "both" / model.name / f"scores-{config}.parquet"))


def test_evaluate_model_loads_its_eval_sets_once(models, tmp_path, monkeypatch):
    """Recognising the task reads the eval sets; scoring them does not read them again."""
    from hf_hardpos.evaluation.run import evaluate_model

    folder = write_attributes_relations_folder(tmp_path / "replace")
    loads = _count(monkeypatch, eval_data, "load_local_split")
    report = evaluate_model(
        str(models[0]), str(folder), batch_size=3, progress=False, log=lambda message: None
    )
    assert sorted(report.section.results) == sorted(CONFIGS) and len(loads) == len(CONFIGS)
