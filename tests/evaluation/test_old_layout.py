"""Run folders written before the one runner (result layout 1) still read, and are rescored when resumed.

`fixtures/run_layout_1` was written by the code of main b6d1909 (`evaluate_model` on a two-config REPLACE-like
set, and `run_suite` on it plus a caption-selection set): a `hardpos eval` folder (`metrics.json` without
`task`, `aggregation` as a dict, `scores-<config>.parquet`) and a suite folder whose caption-selection dataset
kept a `result.json`.
"""

import json
import shutil
from pathlib import Path

import numpy as np

from hf_hardpos.evaluation.aggregation import REPLACE_POOLED
from hf_hardpos.evaluation.definitions import RESULT_LAYOUT_VERSION
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.evaluation.suite import run_suite
from hf_hardpos.evaluation.suite_entry import SuiteEntry
from hf_hardpos.model_source import ModelSource
from hf_hardpos.reporting.compare import compare_runs
from hf_hardpos.reporting.compare_formats import render
from hf_hardpos.reporting.runs import load_run
from tests.support.eval_data import make_eval_set, write_hub_folder
from tests.support.paths import FIXTURES

LAYOUT_1 = FIXTURES / "run_layout_1"


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_layout_1_eval_and_suite_folders_still_read():
    saved = _json(LAYOUT_1 / "eval" / "metrics.json")
    assert "task" not in saved and isinstance(saved["aggregation"], dict)  # what layout 1 looks like
    run = load_run(LAYOUT_1 / "eval")
    bench = run.benchmarks["replace"]
    assert run.kind == "eval" and bench.carries_rates
    figure = bench.figures()[0]
    assert figure.row == REPLACE_POOLED and figure.metrics == saved["aggregates"][REPLACE_POOLED]
    outcomes, groups = bench.outcomes(["attributes", "relations"])
    rows = sum(saved["results"][c]["num_examples"] for c in ("attributes", "relations"))
    assert (
        len(groups) == rows
        and np.mean(outcomes["brittleness"]) == saved["aggregates"][REPLACE_POOLED]["brittleness"]
    )

    suite_saved = _json(LAYOUT_1 / "suite" / "metrics.json")
    suite = load_run(LAYOUT_1 / "suite")
    assert suite.kind == "suite" and set(suite.benchmarks) == {"replace", "selection"}
    assert suite.benchmarks["replace"].folder == LAYOUT_1 / "suite" / "replace"
    assert suite.benchmarks["replace"].results == suite_saved["datasets"]["replace"]["results"]
    selection = suite.benchmarks["selection"]
    assert (
        selection.task == "caption_selection"
        and selection.results == suite_saved["datasets"]["selection"]["results"]
    )
    table = render(compare_runs([run, suite], allow_mismatch=True), "text")
    assert "REPLACE" in table and f"{100 * saved['aggregates'][REPLACE_POOLED]['brittleness']:.1f}" in table


def _same_model(folder: Path, identity: dict) -> None:
    """The folder as the tiny model's own: layout 1 keeps one model per folder, refused otherwise."""
    path = folder / "metrics.json"
    saved = _json(path)
    saved["run"]["model_identity"] = identity
    path.write_text(json.dumps(saved))


def test_layout_1_folders_are_rescored_when_resumed(tiny_clip_dir, tmp_path):
    identity = ModelSource.resolve(str(tiny_clip_dir)).identity
    sets = {
        c: make_eval_set(num_images=4 + s, rows_per_image=2, seed=s)
        for s, c in enumerate(("attributes", "relations"))
    }
    replace = write_hub_folder(tmp_path / "data" / "replace", sets)
    out = tmp_path / "eval"
    shutil.copytree(LAYOUT_1 / "eval", out)
    _same_model(out, identity)
    messages = []
    report = evaluate_model(
        str(tiny_clip_dir), str(replace), output_dir=out, batch_size=4, progress=False, log=messages.append
    )
    assert all(any(m.startswith(f"{c}: ") and m.endswith("recomputing") for m in messages) for c in sets)
    assert not any("reusing" in m for m in messages)
    saved = _json(out / "metrics.json")
    assert (
        saved["task"] == "hard_positive"
        and saved["run"]["settings"]["versions"]["result_layout"] == RESULT_LAYOUT_VERSION
    )
    assert saved["results"] == report.results and set(saved["provenance"]) == set(sets)
    assert load_run(out).benchmarks["replace"].figures()[0].metrics == saved["aggregates"][REPLACE_POOLED]

    suite_out = tmp_path / "suite"
    shutil.copytree(LAYOUT_1 / "suite", suite_out)
    _same_model(suite_out / "replace", identity)
    selection = write_hub_folder(
        tmp_path / "data" / "selection",
        {"default": make_eval_set(num_images=4, rows_per_image=2, seed=7).remove_columns(["hard_positive"])},
    )
    entries = [
        SuiteEntry("replace", str(replace), "hard_positive"),
        SuiteEntry("selection", str(selection), "caption_selection"),
    ]
    suite = run_suite(
        str(tiny_clip_dir), entries, output_dir=suite_out, batch_size=4, progress=False, log=lambda m: None
    )
    assert not suite.failed
    assert suite.sections["replace"].results == report.results
    assert _json(suite_out / "selection" / "metrics.json")["results"] == suite.sections["selection"].results
