"""One command for a GPU machine: the `gpu` tests, the demo, and the evaluation, loader, training and
generation benchmarks, with their figures in `benchmarks/results.json`, in about 6 minutes of GPU time.

    python benchmarks/gpu_check.py [--upstream-dir DIR] [--budget-s 360] [--skip STEP ...] [--log-dir DIR]

Steps, in this order (the cheapest evidence first), each a fresh process with its own time limit; a
step that would start past the budget is skipped and recorded as such:

  tests       `pytest -m gpu tests/integration/test_gpu.py`: AMP fine-tuning with pinned memory and exact resumes,
              evaluation under --dtype / --allow-tf32 / --protocol paper (outcome flips against fp32
              recorded), two models and torchrun on the GPU
  demo        `hardpos demo` at its defaults (benchmarks/demo_time.py)
  eval        `benchmarks/eval_floor.py --device cuda --model vit-b-32 --rows 6000 --repeats 1`: end to
              end against decode + forward + start, bf16, two models in one run (REPLACE's rows with
              `--upstream-dir`)
  loader      `benchmarks/train_loader.py --device cuda`: the svlc recipe's DataLoader against its step
  step        `benchmarks/train_step.py --device cuda --batch-size 256`: step time and peak memory
  generation  `benchmarks/generation_batches.py --throughput --device cuda`: prompts/s of a small causal LM
              at batch 8 and 32

A machine without `datasets` / `evaluate` (the lent H100 has torch, transformers, accelerate, peft,
pyarrow and pandas): download their Python wheels where there is an index, carry them, and install
them beside the checkout, e.g.

    pip download --no-deps --python-version 3.12 --only-binary=:all: -d wheels datasets evaluate dill \
        multiprocess xxhash fsspec huggingface_hub
    pip install --no-deps --target .deps wheels/*.whl && PYTHONPATH=$PWD/.deps:$PWD python benchmarks/gpu_check.py

Each step's exit status, seconds and last lines go to `results.json` under `gpu_check`; the
benchmarks record their own figures under their own names, with the GPU's name in `machine`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from results import record

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def steps(upstream: Path | None) -> dict[str, tuple[list[list[str]], int]]:
    """Step name -> (its commands, its time limit in seconds)."""
    python = sys.executable
    upstream_flags = ["--upstream-dir", str(upstream)] if upstream else []
    return {
        "tests": (
            [
                [
                    python,
                    "-m",
                    "pytest",
                    "-q",
                    "-m",
                    "gpu",
                    "-p",
                    "no:cacheprovider",
                    str(REPO / "tests" / "integration" / "test_gpu.py"),
                ]
            ],
            180,
        ),
        "demo": ([[python, str(HERE / "demo_time.py")]], 150),
        "eval": (
            [
                [
                    python,
                    str(HERE / "eval_floor.py"),
                    "--device",
                    "cuda",
                    "--model",
                    "vit-b-32",
                    # 12,001 rows timed 3 times each (fp32, bf16, two models) did not fit 240 s on an H200
                    "--rows",
                    "6000",
                    "--repeats",
                    "1",
                    *upstream_flags,
                ]
            ],
            240,
        ),
        "loader": ([[python, str(HERE / "train_loader.py"), "--device", "cuda"]], 120),
        "step": (
            [
                [
                    python,
                    str(HERE / "train_step.py"),
                    "--device",
                    "cuda",
                    "--batch-size",
                    "256",
                    "--repeats",
                    "3",
                ]
            ],
            120,
        ),
        "generation": (
            [
                [
                    python,
                    str(HERE / "generation_batches.py"),
                    "--throughput",
                    "--device",
                    "cuda",
                    "--throughput-batches",
                    "8",
                    "32",
                ]
            ],
            90,
        ),
    }


def run_step(
    commands: list[list[str]], limit: int, env: dict, log: Path | None = None
) -> tuple[str, float, str]:
    """(outcome, seconds, last lines) of a step's commands, run in turn within `limit` seconds; with
    `log`, each command's whole output is appended there (a failure's cause is rarely in its last lines)."""
    start, tail, outcome = time.perf_counter(), "", "ok"
    for command in commands:
        left = limit - (time.perf_counter() - start)
        try:
            done = subprocess.run(
                command, cwd=HERE, env=env, capture_output=True, text=True, timeout=max(1, left)
            )
        except subprocess.TimeoutExpired as expired:
            _append(log, command, _text(expired.stdout) + _text(expired.stderr))
            return f"timed out after {limit} s", time.perf_counter() - start, tail
        _append(log, command, done.stdout + done.stderr)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        if done.returncode != 0:
            outcome = f"exit status {done.returncode}"
            break
    return outcome, time.perf_counter() - start, tail


def _append(log: Path | None, command: list[str], output: str) -> None:
    """A command line and its whole output, appended to `log` (nothing without one)."""
    if log is not None:
        with log.open("a") as stream:
            stream.write(f"$ {' '.join(command)}\n{output}\n")


def _text(output: bytes | str | None) -> str:
    """What a timed-out command had printed (`TimeoutExpired` may hold bytes, str or nothing)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--upstream-dir", type=Path, help="a clone of amitakamath/hard_positives (REPLACE's rows)"
    )
    parser.add_argument("--budget-s", type=float, default=360, help="start no step after this many seconds")
    parser.add_argument("--skip", action="append", default=[], help="a step to leave out (repeatable)")
    parser.add_argument("--log-dir", type=Path, help="write each step's whole output to DIR/STEP.log")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA device here; run it on a GPU machine")
        return 2
    report = Path(tempfile.mkdtemp(prefix="hardpos-gpu-")) / "test_figures.json"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HARDPOS_GPU_REPORT": str(report),
        "PYTHONPATH": os.pathsep.join([p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p]),
    }
    began, figures = time.perf_counter(), {"device": torch.cuda.get_device_name()}
    planned = steps(args.upstream_dir)
    for name, (commands, limit) in planned.items():
        if name in args.skip:
            figures[name] = "skipped (--skip)"
            continue
        if time.perf_counter() - began > args.budget_s:
            figures[name] = f"skipped (budget of {args.budget_s:.0f} s spent)"
            continue
        log = None
        if args.log_dir is not None:
            args.log_dir.mkdir(parents=True, exist_ok=True)
            log = args.log_dir / f"{name}.log"
        outcome, seconds, tail = run_step(commands, limit, env, log)
        figures[name] = f"{outcome} in {seconds:.0f} s"
        print(
            f"[{time.perf_counter() - began:5.0f} s] {name}: {outcome} in {seconds:.0f} s\n{tail}\n",
            flush=True,
        )
    if report.is_file():
        for key, value in json.loads(report.read_text()).items():
            figures[f"tests.{key}"] = json.dumps(value, sort_keys=True)
    figures["total_s"] = f"{time.perf_counter() - began:.0f}"
    record("gpu_check", figures)
    return 0 if all(str(v).startswith(("ok", "skipped")) for k, v in figures.items() if k in planned) else 1


if __name__ == "__main__":
    sys.exit(main())
