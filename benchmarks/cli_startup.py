"""How long `hardpos --help`, `hardpos eval --help` and an argument error take, in fresh processes.

Why: every refusal used to wait ~3.4 s for torch, transformers and datasets to import before
argparse could say "--dataset is required". `hardpos` now imports only the command being run and
each command's parser imports only light modules, so these must stay under `--budget` seconds
(0.5 by default). Each command line runs `--repeats` times in a new interpreter (what a user
waits for); the median wall time is reported, and the exit status is 1 if any median is over.

    python benchmarks/cli_startup.py [--repeats 5] [--budget 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from results import record  # benchmarks/results.py: one results file for every benchmark

COMMAND_LINES = {
    "hardpos --help": ["--help"],
    "hardpos eval --help": ["eval", "--help"],
    "hardpos eval --model m (argument error)": ["eval", "--model", "m"],
    "hardpos eval (argument error)": ["eval"],
}


def time_command(args: list[str], repeats: int) -> tuple[float, int]:
    """Median wall seconds of `python -m hf_hardpos.cli ARGS` in fresh interpreters, and its exit status."""
    times, status = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "hf_hardpos.cli", *args], capture_output=True)
        times.append(time.perf_counter() - start)
        status = done.returncode
    return statistics.median(times), status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds allowed per command line (median)")
    args = parser.parse_args()
    python_start = statistics.median(_wall([sys.executable, "-c", "pass"]) for _ in range(args.repeats))
    print(f"python -c pass (interpreter start, for reference): {python_start:.3f} s")
    over, medians = [], {}
    for label, argv in COMMAND_LINES.items():
        median, status = time_command(argv, args.repeats)
        medians[label] = median
        print(f"{label}: median {median:.3f} s over {args.repeats} fresh processes (exit status {status})")
        if median > args.budget:
            over.append(label)
    record("cli_startup", {
        "fastest_s": f"{min(medians.values()):.2f}", "slowest_s": f"{max(medians.values()):.2f}",
        "help_s": f"{medians['hardpos --help']:.2f}", "budget_s": f"{args.budget:.2f}",
        "python_start_s": f"{python_start:.2f}",
    })  # fmt: skip
    print(f"budget {args.budget:.2f} s: " + ("all within" if not over else f"over for {over}"))
    return 1 if over else 0


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
