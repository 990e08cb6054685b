"""A 95% interval on every rate `hardpos eval` prints: Wilson by default, a bootstrap over images when asked,
both computed from the saved per-row scores (a new --bootstrap never rescores), and never [0, 0] on a few rows."""

import json
import re

import numpy as np
import pytest
from scipy.stats import binomtest

from hf_hardpos.cli import main
from hf_hardpos.evaluation import intervals
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite
from hf_hardpos.evaluation.tasks import HARD_POSITIVE
from hf_hardpos.metrics import METRIC_NAMES, wilson_interval
from tests.support.runs import write_replace_folder

RATE_CELL = re.compile(r"\d+\.\d \[\d+\.\d, \d+\.\d\]")


@pytest.mark.parametrize("successes, rows", [(0, 4), (4, 4), (1, 4), (7, 20), (150, 1000), (0, 1)])
def test_wilson_matches_scipy(successes, rows):
    """Against scipy's independent implementation (`BinomTestResult.proportion_ci(method="wilson")`)."""
    expected = binomtest(successes, rows).proportion_ci(0.95, method="wilson")
    assert wilson_interval(successes, rows) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_four_rows_never_get_a_point_interval():
    """All four rows alike: every bootstrap resample gives the same rate; the Wilson interval is kept instead."""
    bounds = intervals.rate_intervals(
        {"brittleness": np.zeros(4)}, bootstrap_samples=200, groups=np.array(["a", "b", "c", "d"])
    )
    assert bounds["brittleness_ci_low"] == 0.0
    assert (
        bounds["brittleness_ci_high"]
        == pytest.approx(wilson_interval(0, 4)[1])
        == pytest.approx(0.4899, abs=1e-4)
    )


def _rate_cells(text: str) -> list[str]:
    """The rate cells of every table row `hardpos eval` printed (between the row count and the mean scores)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("config"))
    cells = []
    for line in lines[start + 2 :]:
        if not re.match(r"^\S+\s+\d+\s", line):
            break
        rates = re.findall(r"\d+\.\d(?: \[[^\]]*\])?", line.split(None, 2)[2])[:3]
        cells.extend(rates)
    return cells


def test_eval_prints_an_interval_on_every_rate_and_a_new_bootstrap_does_not_rescore(
    tiny_clip_dir, tmp_path, capsys, monkeypatch
):
    data = write_replace_folder(tmp_path / "replace")
    out = tmp_path / "out"
    argv = [
        "eval",
        "--model",
        str(tiny_clip_dir),
        "--dataset",
        str(data),
        "--output",
        str(out),
        "--max-rows",
        "4",
        "--no-progress",
    ]
    assert main(argv) == 0
    cells = _rate_cells(capsys.readouterr().out)
    assert len(cells) == 12 and all(RATE_CELL.fullmatch(c) for c in cells)  # 4 rows x 3 rates
    saved = json.loads((out / "metrics.json").read_text())
    for config, result in saved["results"].items():
        for rate in METRIC_NAMES:
            hits = round(result[rate] * 4)
            assert (result[f"{rate}_ci_low"], result[f"{rate}_ci_high"]) == pytest.approx(
                wilson_interval(hits, 4)
            )
            assert result[f"{rate}_ci_high"] > 0
        assert "Wilson" in saved["provenance"][config]["interval"]

    from hf_hardpos.evaluation.tasks import hard_positive

    monkeypatch.setattr(
        hard_positive, "score_eval_set", lambda *a, **k: pytest.fail("a new --bootstrap rescored a config")
    )
    assert main([*argv, "--bootstrap", "100"]) == 0
    assert all(RATE_CELL.fullmatch(c) for c in _rate_cells(capsys.readouterr().out))
    again = json.loads((out / "metrics.json").read_text())
    assert all("bootstrap, 100 resamples over images" in p["interval"] for p in again["provenance"].values())
    for config in saved["results"]:
        assert {k: v for k, v in again["results"][config].items() if "_ci_" not in k} == {
            k: v for k, v in saved["results"][config].items() if "_ci_" not in k
        }


def test_suite_takes_bootstrap(tiny_clip_dir, tmp_path):
    data = write_replace_folder(tmp_path / "replace")
    report = run_suite(
        str(tiny_clip_dir),
        [SuiteEntry("replace", str(data), HARD_POSITIVE)],
        output_dir=tmp_path / "s",
        bootstrap_samples=50,
        max_rows=4,
        progress=False,
        log=lambda m: None,
    )
    section = report.sections["replace"]
    assert all(
        f"{r}_ci_low" in m for m in {**section.results, **section.aggregates}.values() for r in METRIC_NAMES
    )
    assert "50 resamples" in section.provenance["attributes"]["interval"]


def test_other_tasks_print_an_interval_on_each_counted_rate(tiny_clip_dir, tmp_path, capsys):
    """Caption selection: accuracy is a count over rows, so it gets its Wilson interval too."""
    from tests.support.runs import write_selection_folder

    data = write_selection_folder(tmp_path / "selection")
    capsys.readouterr()
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_clip_dir),
                "--dataset",
                str(data),
                "--output",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "o" / "metrics.json").read_text())
    row = saved["results"]["default"]
    low, high = wilson_interval(round(row["accuracy"] * row["num_examples"]), row["num_examples"])
    assert f"{row['accuracy']:.4f} [{low:.4f}, {high:.4f}]" in out


def test_text_only_accuracy_line_carries_its_interval():
    from hf_hardpos.evaluation.section import Section

    row = {
        "original_accuracy": 0.5,
        "augmented_accuracy": 0.25,
        "brittleness": 0.25,
        "num_examples": 4,
        "text_only_accuracy": 0.5,
    }
    line = next(
        text
        for text in Section(HARD_POSITIVE, results={"swap_att": row}).table().splitlines()
        if "TOT" in text
    )
    low, high = wilson_interval(2, 4)
    assert line.endswith(f"swap_att 50.0 [{100 * low:.1f}, {100 * high:.1f}]")
