"""The README's main command: `hardpos demo` end to end in a fresh process, its time and its findings.

    python benchmarks/demo_time.py [--seeds 0 1]
    python benchmarks/demo_time.py --results-from runs/demo   # the findings of a finished default run

Runs `hardpos demo --output-dir <temporary folder>` (the default configuration, no downloads) and
records in `benchmarks/results.json`:
- `demo_time`: the process's wall time (imports, the experiment, the report pages and the chart
  included) and the experiment's own clock from the demo's `run_info.json`;
- `demo_results`: the demo's table (mean ± sample std over seeds, from its `results.json`) and the
  paper's two controlled comparisons with their paired intervals and seed spread (from `run_info.json`),
  which the README and docs/demo.md quote between figure markers (`python benchmarks/results.py --render`).

The demo is deterministic (every run seeds what it draws; one torch thread per run), so its findings do
not depend on the machine's load: `--results-from` re-records them from a finished default run without
timing anything (a timing needs an idle machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import gpu_model, on_device, record  # benchmarks/results.py: one results file

VARIANTS = ("pretrained", "contrastive", "hn", "hp+hn")
RATES = (("orig_acc", "orig"), ("aug_acc", "aug"), ("brittleness", "brittle"))
NAMES = {"orig_acc": "orig acc", "aug_acc": "aug acc", "brittleness": "brittleness"}


def _cell(entry: dict, metric: str) -> str:
    value = f"{100 * entry[metric]:.1f}"
    return value + (f" ± {100 * entry[f'{metric}_std']:.1f}" if entry["num_seeds"] > 1 else "")


def demo_table(results: dict) -> str:
    """Markdown: one row per variant, REPLACE and SWAP rates in percent, mean ± sample std over seeds."""
    header = ["variant", *(f"{d} {label}" for d in ("REPLACE", "SWAP") for _, label in RATES)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for variant in VARIANTS:
        cells = [_cell(results[variant][d], m) for d in ("replace", "swap") for m, _ in RATES]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparison_table(records: list[dict]) -> str:
    """Markdown: each controlled difference B - A with its paired interval, the seed std and the verdict."""
    lines = [
        "| B - A | set | metric | A | B | B - A | 95% paired interval | 2 × seed std | clear |",
        "|---|---|---|---:|---:|---:|---|---:|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['b']} - {r['a']} | {r['dataset'].upper()} | {NAMES[r['metric']]} | {100 * r['a_mean']:.1f} | "
            f"{100 * r['b_mean']:.1f} | {100 * r['difference']:+.1f} | [{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}] | "
            f"{100 * r['twice_larger_std']:.1f} | {'yes' if r['clear'] else 'no'} |"
        )
    return "\n".join(lines)


def scores_line(results: dict) -> str:
    """Mean s_c / s_n / s_p on REPLACE for contrastive, hn and hp+hn (paper Table 2's pattern)."""
    names = ("mean_original_score", "mean_negative_score", "mean_positive_score")
    cells = []
    for variant in ("contrastive", "hn", "hp+hn"):
        scores = " / ".join(f"{results[variant]['replace'][name]:.3f}" for name in names)
        cells.append(f"{variant} {scores}")
    return "; ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="default: the demo's default seeds"
    )
    parser.add_argument(
        "--results-from",
        type=Path,
        default=None,
        help="record only the findings of this finished default `hardpos demo --output-dir` "
        "folder, run on this code",
    )
    args = parser.parse_args()
    # `hardpos demo` trains and scores on CUDA wherever torch sees a device
    device = "cpu" if gpu_model() == "none" else "cuda"
    if args.results_from:
        record(on_device("demo_results", device), findings(args.results_from))
        return 0
    output = Path(tempfile.mkdtemp(prefix="hardpos-demo-")) / "demo"
    command = [sys.executable, "-m", "hf_hardpos.cli", "demo", "--output-dir", str(output)]
    command += ["--seeds", *map(str, args.seeds)] if args.seeds else []
    began = time.perf_counter()
    done = subprocess.run(command)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        print(f"hardpos demo failed with exit status {done.returncode}")
        return done.returncode
    timings = json.loads((output / "run_info.json").read_text())["timings_seconds"]
    print(
        f"hardpos demo: {wall:.0f} s wall for the whole process; the experiment's own clock {timings['total']:.0f} s"
    )
    record(
        on_device("demo_time", device), {"wall_s": f"{wall:.0f}", "experiment_s": f"{timings['total']:.0f}"}
    )
    record(on_device("demo_results", device), findings(output))
    shutil.rmtree(output.parent, ignore_errors=True)
    return 0


def findings(output: Path) -> dict[str, str]:
    """The figures the docs quote from a finished demo folder: its settings, table and comparisons."""
    from dataclasses import asdict

    from hf_hardpos.synthetic.demo import DemoConfig

    info = json.loads((output / "run_info.json").read_text())
    ran = {name: tuple(v) if isinstance(v, list) else v for name, v in info["config"].items()}
    # `processes` aside (the numbers do not depend on it), the run must be the default the docs describe
    differs = {name: ran.get(name) for name, value in asdict(DemoConfig()).items()
               if name != "processes" and ran.get(name) != value}  # fmt: skip
    if differs:
        raise SystemExit(
            f"{output}: not a default `hardpos demo` run (differs in {differs}); the docs quote the default"
        )
    results = json.loads((output / "results.json").read_text())
    records = info["comparisons"]["records"]
    # Figure names are README marker keys ([\w.@-]+): "hp+hn - hn" on REPLACE brittleness is hphn_minus_hn.replace.brittleness.
    by_key = {f"{r['b'].replace('+', '')}_minus_{r['a']}.{r['dataset']}.{r['metric']}": r for r in records}
    return {
        "seeds": " ".join(str(s) for s in info["config"]["seeds"]),
        "eval_rows": str(info["config"]["eval_examples"]),
        # Markdown tables on lines of their own, so that the README's markers do not break them.
        "table": "\n" + demo_table(results) + "\n",
        "comparisons": "\n" + comparison_table(records) + "\n",
        "replace_scores": scores_line(results),
        "clear": f"{sum(r['clear'] for r in records)} of {len(records)}",
        **{f"{key}": f"{100 * r['difference']:+.1f}" for key, r in by_key.items()},
    }


if __name__ == "__main__":
    sys.exit(main())
