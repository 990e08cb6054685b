"""What a longer or shorter `hardpos demo` costs: the experiment's time against its finding, at several budgets.

    python benchmarks/demo_budgets.py [--pairs 0,1 2,3] [--budgets default pretrain-8 pretrain-4 finetune-3]

Why: nearly all of the demo's time is the model's forward and backward passes (docs/demo.md), so the
budgets (`DemoConfig`: 8,000 alt-text pairs pretrained for `pretrain_epochs`, 2,048 fine-tuning rows for
5 epochs, the paper's fine-tuning length) decide whether it fits its two minutes on 2 CPU cores, and
they must not be bought with the finding. This script measures what lengthening or shortening either
stage costs or buys in time and in the finding. For each budget and each seed pair it runs the demo's
experiment (`run_demo`: the same world, trainer, scorer and comparisons as `hardpos demo`) and records
- the experiment's clock: the pretraining (trained by the first pair of a budget, reused from the
  cache by the others, its key checked as `hardpos demo` checks it), and each pair's six fine-tunes
  with their evaluations (wall clock, as many at a time as `hardpos demo` runs them on this machine);
  `experiment_s` adds the pretraining to the mean pair, as a fresh
  `hardpos demo` of that budget would run them (plus the shared data and pretrained-model steps);
- the paper's controlled comparisons (`findings.compare`) in the direction Kamath et al. (ECCV 2024)
  report them, Table 1 (c) (hp+hn against hn: less brittle, higher augmented accuracy, on REPLACE and
  on SWAP) and hard negatives' own gain (hn against contrastive: higher SWAP original accuracy). A
  comparison *holds* when its difference is in that direction by more than twice the larger seed std;
  `margin` is the smallest ratio of the difference to that threshold (> 1: all hold).

Results go to `benchmarks/results.json` (`demo_budgets`); docs/demo.md quotes its table.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from results import record  # benchmarks/results.py: one results file for every benchmark

from hf_hardpos.synthetic.demo import DemoConfig, run_demo

BUDGETS = {
    "default": {},
    "pretrain-8": {"pretrain_epochs": 8.0},
    "pretrain-4": {"pretrain_epochs": 4.0},
    "finetune-3": {"finetune_epochs": 3.0},
}
# (A, B, dataset, metric, the sign of B - A that Kamath et al. report: Table 1 (c), and hn's SWAP gain)
EXPECTED = (
    ("hn", "hp+hn", "replace", "brittleness", -1),
    ("hn", "hp+hn", "replace", "aug_acc", +1),
    ("hn", "hp+hn", "swap", "brittleness", -1),
    ("hn", "hp+hn", "swap", "aug_acc", +1),
    ("contrastive", "hn", "swap", "orig_acc", +1),
)
FIXED_STAGES = ("data", "evaluate pretrained")


def holding(records: list[dict]) -> tuple[int, float]:
    """How many `EXPECTED` comparisons hold, and the smallest ratio of a signed difference to its threshold."""
    by_key = {(r["a"], r["b"], r["dataset"], r["metric"]): r for r in records}
    ratios = []
    for a, b, dataset, metric, sign in EXPECTED:
        r = by_key[(a, b, dataset, metric)]
        signed, twice = sign * r["difference"], r["twice_larger_std"]
        ratios.append(signed / twice if twice > 0 else (math.inf if signed > 0 else -math.inf))
    return sum(ratio > 1 for ratio in ratios), min(ratios)


def run_budget(name: str, pairs: list[tuple[int, int]], root: Path) -> dict:
    """Every pair at one budget; the pretrained model is trained once and copied into the later pairs' folders."""
    config = dataclasses.replace(DemoConfig(), **BUDGETS[name])
    runs, pretrain_s, fixed_s = [], None, 0.0
    first = root / name / "-".join(map(str, pairs[0]))
    for pair in pairs:
        folder = root / name / "-".join(map(str, pair))
        if folder != first:
            shutil.copytree(first / "models" / "pretrained", folder / "models" / "pretrained")
        result = run_demo(folder, dataclasses.replace(config, seeds=pair), progress=False, log=_stage_lines)
        timings = result.timings
        if folder == first:
            pretrain_s = timings["pretrain"]
            fixed_s = sum(timings[stage] for stage in FIXED_STAGES)
        finetune_s = timings["fine-tune"]  # the six runs, as many at a time as `hardpos demo` runs them
        held, margin = holding(result.comparisons)
        runs.append({"seeds": list(pair), "finetune_s": finetune_s, "held": held, "margin": margin})
        print(
            f"[{name}] seeds {pair}: {held} of {len(EXPECTED)} hold, margin {margin:.2f}, fine-tunes {finetune_s:.0f} s"
        )
    mean_finetune = sum(r["finetune_s"] for r in runs) / len(runs)
    return {
        "pretrain_epochs": config.pretrain_epochs,
        "finetune_epochs": config.finetune_epochs,
        "pretrain_s": pretrain_s,
        "experiment_s": fixed_s + pretrain_s + mean_finetune,
        "runs": runs,
    }


def _stage_lines(line: str) -> None:
    if line.startswith(("[pretrain] trained", "[fine-tune] seed")):
        print(line, flush=True)


def table(budgets: dict[str, dict]) -> str:
    """Markdown: one row per budget, its epochs and time, then each pair's comparisons held and margin."""
    pairs = [" ".join(map(str, r["seeds"])) for r in next(iter(budgets.values()))["runs"]]
    header = [
        "budget",
        "pretrain epochs",
        "fine-tune epochs",
        "experiment s",
        *(f"seeds {p}: held, margin" for p in pairs),
    ]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for name, b in budgets.items():
        cells = [f"{r['held']} of {len(EXPECTED)}, {r['margin']:.2f}" for r in b["runs"]]
        lines.append(
            f"| {name} | {b['pretrain_epochs']:g} | {b['finetune_epochs']:g} | {b['experiment_s']:.0f} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="+", default=["0,1", "2,3"], help="seed pairs, e.g. 0,1 2,3")
    parser.add_argument("--budgets", nargs="+", default=list(BUDGETS), choices=list(BUDGETS))
    args = parser.parse_args()
    pairs = [tuple(int(s) for s in p.split(",")) for p in args.pairs]
    root = Path(tempfile.mkdtemp(prefix="hardpos-demo-budgets-"))
    began = time.perf_counter()
    try:
        budgets = {name: run_budget(name, pairs, root) for name in args.budgets}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rendered = table(budgets)
    print(rendered)
    print(f"{time.perf_counter() - began:.0f} s in all")
    figures = {"table": "\n" + rendered + "\n", "pairs": "; ".join(" ".join(map(str, p)) for p in pairs)}
    for name, b in budgets.items():
        figures[f"{name}.experiment_s"] = f"{b['experiment_s']:.0f}"
        figures[f"{name}.pretrain_epochs"] = f"{b['pretrain_epochs']:g}"
        figures[f"{name}.pairs_held"] = (
            f"{sum(r['held'] == len(EXPECTED) for r in b['runs'])} of {len(b['runs'])}"
        )
    record("demo_budgets", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
