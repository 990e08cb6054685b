"""`benchmarks/demo_budgets.py`: a comparison holds only in the paper's direction and beyond twice the seed std."""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.paths import REPO as ROOT


@pytest.fixture()
def budgets(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the script imports its sibling results.py
    spec = importlib.util.spec_from_file_location("demo_budgets", ROOT / "benchmarks" / "demo_budgets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records(differences: dict[tuple[str, str], float], twice: float) -> list[dict]:
    """Records shaped as `findings.compare` writes them, for every comparison of paper Table 1 (c) and hn's gain."""
    keys = [
        ("hn", "hp+hn", d, m) for d in ("replace", "swap") for m in ("orig_acc", "aug_acc", "brittleness")
    ]
    keys += [
        ("contrastive", "hn", d, m)
        for d in ("replace", "swap")
        for m in ("orig_acc", "aug_acc", "brittleness")
    ]
    return [{"a": a, "b": b, "dataset": d, "metric": m, "difference": differences.get((d, m), 0.0),
             "twice_larger_std": twice} for a, b, d, m in keys]  # fmt: skip


def test_holding_counts_differences_in_the_papers_direction_beyond_the_threshold(budgets):
    paper_way = {("replace", "brittleness"): -0.2, ("replace", "aug_acc"): 0.15, ("swap", "brittleness"): -0.3,
                 ("swap", "aug_acc"): 0.3, ("swap", "orig_acc"): 0.07}  # fmt: skip
    # swap orig_acc is hn - contrastive; the hp+hn - hn row of the same key gets the same value and is not counted
    assert budgets.holding(_records(paper_way, twice=0.035)) == (5, pytest.approx(2.0))
    wrong_way = {**paper_way, ("swap", "brittleness"): 0.3}  # hp+hn more brittle than hn: against the paper
    held, margin = budgets.holding(_records(wrong_way, twice=0.035))
    assert held == 4 and margin == pytest.approx(-0.3 / 0.035)
    within_spread = budgets.holding(_records(paper_way, twice=0.1))
    assert within_spread == (4, pytest.approx(0.7))  # hn's SWAP gain, 0.07, is inside twice the std


def test_table_has_a_row_per_budget_and_a_column_per_pair(budgets):
    runs = [{"seeds": [0, 1], "held": 5, "margin": 2.5}, {"seeds": [2, 3], "held": 4, "margin": 0.5}]
    table = budgets.table({"default": {"pretrain_epochs": 8.0, "finetune_epochs": 5.0, "experiment_s": 143.2,
                                       "runs": runs}})  # fmt: skip
    header, _, row = table.splitlines()
    assert [c.strip() for c in header.strip("|").split("|")][-2:] == [
        "seeds 0 1: held, margin",
        "seeds 2 3: held, margin",
    ]
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "default",
        "8",
        "5",
        "143",
        "5 of 5, 2.50",
        "4 of 5, 0.50",
    ]


def test_no_seed_spread_holds_only_in_the_papers_direction(budgets):
    paper_way = {("replace", "brittleness"): -0.2, ("replace", "aug_acc"): 0.15, ("swap", "brittleness"): -0.3,
                 ("swap", "aug_acc"): 0.3, ("swap", "orig_acc"): 0.07}  # fmt: skip
    assert budgets.holding(_records(paper_way, twice=0.0))[0] == 5
    assert budgets.holding(_records({**paper_way, ("replace", "aug_acc"): -0.01}, twice=0.0))[0] == 4
