"""`hardpos eval` end to end against its floor, both measured in one run, on the CPU or a GPU.

Workload (as `eval_throughput.py`): `--rows` REPLACE-shaped rows in its two configs (the real rows with
`--upstream-dir`, a clone of amitakamath/hard_positives; else a synthetic stand-in with REPLACE's 2.34
rows per image), one generated 500x375 JPEG (about 55 KB, Visual Genome's typical size) per distinct
image, written as a local Hub folder and read through the datasets cache (warmed once, untimed).

Model: `--model tiny` (a 2-layer CLIP at 32 px: its forward passes are nearly free, so what remains is
the pipeline) or `--model vit-b-32` (`CLIPConfig()` defaults, random weights: ViT-B/32's shape).

Timed, each a fresh process where the user would start one:
- run: `python -m hf_hardpos eval --model M --dataset D --output O --device DEV` at the default flags
  (workers, batch size, decoding ahead while the process starts: `evaluation.decode_ahead`), fp32,
  alternating with the same run of `--models` models; then `--dtype bf16` (on CUDA). Since images are
  decoded while the process imports, end to end less start can be below the decode floor;
- start: a fresh process that imports what `hardpos eval` imports and exits as `hardpos` exits
  (interpreter, imports and the end of a process);
  it also says whether peft or transformers' Trainer got imported (evaluation needs neither);
- load: one model resolved (its files hashed for its identity) and loaded as `hardpos eval` loads it
  (`ModelRun.start`, then its scorer: weights, tokenizer, image processor), in this process, imports done;
- decode floor: every distinct image decoded and preprocessed once by the model's image processor, in
  as many processes as the run's default workers (a process pool; the pool's start included);
- forward floor: the forward passes alone of the distinct images and token sequences, in the batches
  the scorer forms (inputs prepared beforehand, untimed) — `eval_sweep.forward_floor`.

Every whole-process figure (run, start) is the fastest of `--repeats` fresh processes, each writing a new
output folder (nothing resumed): the noise of a shared machine only ever adds time. The one-model and the
two-model runs alternate (a drifting machine slows a pair's two runs alike).

The extra model is what a run with one more model takes after its first model is done: the median over
the pairs of (two-model run's end - the second its first model's `[name] done in` line appeared) -
(one-model run's end - the second its first output line, the table, appeared). Both runs do the same
first-model phase (start, decoding, the first model's scoring), whose length is a race (how many images
are decoded while the process imports) that moves whole runs by a second or more on a 2-core machine:
the median of whole-run differences is printed beside it, and it is what a difference of two single runs
could look like. Not in the tail: checking the second model's options and files before any data is read.

Targets (printed beside each figure, all figures from this one run):
- end to end less start <= 1.3 x (decode floor + forward floor) with the tiny model, 1.15 x with ViT-B/32;
- on CUDA, `--dtype bf16` end to end <= fp32 end to end (wherever its forward passes are faster);
- each additional model of a `--model A --model B ...` run <= 1.5 x its forward floor + its load.

Beside the extra model, the multi-model runs' own clocks say where it went: what each later model took
(`[name] done in X s`: resolve, load, scoring, saving) and the comparison table (`comparison table: X s`),
the two things one more model adds.

    python benchmarks/eval_floor.py [--rows 12001] [--model tiny|vit-b-32] [--device cpu|cuda]
        [--upstream-dir DIR] [--models 2] [--repeats 5]

Figures go to `benchmarks/results.json` under `eval_floor_<device>_<model>`.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from datasets import Image as ImageFeature
from eval_sweep import forward_floor, hardpos_eval, synchronize, timed_output
from eval_throughput import build_processor, replace_workload
from PIL import Image
from results import record

# What every `hardpos eval` process imports before it reads a row: the start term of the bound. It prints
# the training stack it pulled in (peft alone costs seconds; `hardpos eval` must not need it), and ends as
# the `hardpos` executable ends (`cli.console_main`: no final collection over what the imports left, which
# alone takes seconds), so that start is not larger than the part of a run it stands for.
TRAINING_STACK = ("peft", "transformers.trainer", "transformers.trainer_utils")
IMPORTS = (
    "import gc, sys, hf_hardpos.cli, hf_hardpos.commands.eval, hf_hardpos.evaluation.run, datasets; "
    "from transformers import AutoImageProcessor, AutoModel, AutoTokenizer, CLIPModel; "
    f"print(','.join(m for m in {TRAINING_STACK!r} if m in sys.modules)); gc.freeze()"
)
# Each target's factor of (decode floor + forward floor), by model.
E2E_FACTOR = {"tiny": 1.3, "vit-b-32": 1.15}
# The line a multi-model run prints when a model is done: `[name] done in X s` (`multi_model.evaluate_models`).
DONE_LINE = re.compile(r"^\[[^\]]+\] done in ([\d.]+) s$", re.M)


def fastest(repeats: int, run: Callable[[int], float]) -> float:
    """The fastest of `repeats` calls of `run(i)` (seconds)."""
    return min(run(i) for i in range(repeats))


def interleaved(repeats: int, runs: list[Callable[[int], float]]) -> list[list[float]]:
    """Every time of `repeats` calls of each of `runs`, called in turn (a, b, a, b, ...): a machine whose
    speed drifts over minutes slows a pair's two runs alike, so their difference (the extra model) is not
    the drift."""
    times: list[list[float]] = [[] for _ in runs]
    for i in range(repeats):
        for run, seconds in zip(runs, times):
            seconds.append(run(i))
    return times


def eval_seconds(models: list[Path], dataset: Path, output: Path, device: str, *flags: str) -> float:
    """Wall seconds of one `hardpos eval` process on `device` writing `output` (which must not exist)."""
    return hardpos_eval(models, dataset, output, "--device", device, *flags)[0]


def after_first_model(seconds: float, lines: list[tuple[float, str]], models: int) -> float:
    """Seconds a `hardpos eval` run (`timed_lines`) took after its first model was scored: from its first
    model's `[name] done in` line (several models), or its first stdout line (one model: it prints nothing
    before its table), to the process's end."""
    if models == 1:
        return seconds - lines[0][0]
    done = [at for at, line in lines if DONE_LINE.match(line)]
    if not done:
        raise SystemExit("the multi-model run did not say when its first model was done")
    return seconds - done[0]


def own_clock(stdout: str) -> dict[str, float]:
    """What a multi-model `hardpos eval` says it spent: each model after the first (the mean of its
    `[name] done in X s` lines) and the comparison table (`comparison table: X s`). The time after the
    first model (`after_first_model`) is what the user pays for the others; these say where it went."""
    done = [float(x) for x in DONE_LINE.findall(stdout)]
    table = re.search(r"^comparison table: ([\d.]+) s$", stdout, re.M)
    if len(done) < 2 or table is None:
        raise SystemExit(f"the multi-model run did not report its own times:\n{stdout[-2000:]}")
    return {"later_models_s": sum(done[1:]) / len(done[1:]), "table_s": float(table.group(1))}


def run_settings(output: Path) -> dict:
    return json.loads((output / "metrics.json").read_text())["run"]["settings"]


def _decode_chunk(args: tuple[Path, list[bytes]]) -> int:
    from transformers import CLIPImageProcessor

    processor_dir, chunk = args
    processor = CLIPImageProcessor.from_pretrained(processor_dir)
    for data in chunk:
        processor(images=Image.open(io.BytesIO(data)).convert("RGB"), return_tensors="pt")
    return len(chunk)


def decode_floor(model_dir: Path, dataset: Path, processes: int) -> tuple[float, int]:
    """Seconds to decode and preprocess each distinct image once in `processes` processes."""
    from hf_hardpos.evaluation.eval_data import load_eval_sets

    distinct: dict[bytes, None] = {}
    for eval_set in load_eval_sets(str(dataset), None, "test").values():
        for cell in eval_set.dataset.cast_column("image", ImageFeature(decode=False))["image"]:
            distinct.setdefault(cell["bytes"], None)
    images = list(distinct)
    chunks = [(model_dir, images[i :: processes * 4]) for i in range(processes * 4)]
    start = time.perf_counter()
    with ProcessPoolExecutor(processes) as pool:
        assert sum(pool.map(_decode_chunk, chunks)) == len(images)
    return time.perf_counter() - start, len(images)


def load_floor(model_dir: Path, device: str) -> float:
    """Seconds to resolve and load one model onto `device` as `hardpos eval` does (imports done, warmed on
    another load; on CUDA the copy to the device is waited for)."""
    from hf_hardpos.evaluation.options import RunOptions
    from hf_hardpos.evaluation.runner import ModelRun
    from hf_hardpos.model_source import ModelSource

    options = RunOptions(device=device, progress=False, log=lambda message: None).resolved()
    ModelRun.start(
        ModelSource.resolve(str(model_dir), progress=False), options
    ).scorer()  # warm: imports, caches
    start = time.perf_counter()
    ModelRun.start(ModelSource.resolve(str(model_dir), progress=False), options).scorer()
    synchronize(device)
    return time.perf_counter() - start


def build_model(kind: str, folder: Path, rows: list[dict], seed: int) -> Path:
    from transformers import CLIPConfig, CLIPModel

    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

    if kind == "tiny":
        corpus = [r[c] for r in rows for c in ("caption", "hard_negative", "hard_positive")]
        return build_tiny_clip(folder, corpus, seed=seed)
    torch.manual_seed(seed)
    CLIPModel(CLIPConfig()).save_pretrained(folder)
    build_processor(rows, None).save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=12001)
    parser.add_argument("--model", choices=["tiny", "vit-b-32"], default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", type=int, default=2, help="models of the one-run sweep (0: skip it)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="fresh processes per timed run; the fastest counts (for the extra model, the median of the "
        "one- and two-model pairs' differences of the time after the first model)",
    )
    parser.add_argument(
        "--upstream-dir", type=Path, help="a clone of amitakamath/hard_positives (real REPLACE rows)"
    )
    args = parser.parse_args()

    from hf_hardpos.compute import default_num_workers

    rows, _, work, dataset = replace_workload(args.rows, args.upstream_dir, "hardpos-floor-")
    models = [build_model(args.model, work / f"model{i}", rows, seed=i) for i in range(max(1, args.models))]
    eval_seconds(
        models[:1], dataset, work / "warm", args.device, "--max-rows", "2"
    )  # datasets cache, untimed

    workers = default_num_workers()
    repeats = max(1, args.repeats)
    outputs: list[str] = []  # each multi-model run's stdout, in order: its own clock's figures
    tails: dict[int, list[float]] = {1: [], len(models): []}  # seconds after the first model, by models

    def timed_run(count: int, i: int) -> float:
        seconds, lines = hardpos_eval(
            models[:count], dataset, work / f"{count}-models-{i}", "--device", args.device
        )
        tails[count].append(after_first_model(seconds, lines, count))
        if count > 1:
            outputs.append("".join(line for _, line in lines))
        return seconds

    alone = lambda i: timed_run(1, i)
    if args.models > 1:
        alone_times, together_times = interleaved(repeats, [alone, lambda i: timed_run(len(models), i)])
        e2e, together = min(alone_times), min(together_times)
    else:
        e2e = fastest(repeats, alone)
    settings = run_settings(work / "1-models-0")
    start = fastest(repeats, lambda i: timed_output([sys.executable, "-c", IMPORTS])[0])
    stack = timed_output([sys.executable, "-c", IMPORTS])[1].strip()
    decode, images = decode_floor(models[0], dataset, workers)
    forward = forward_floor(models[0], dataset, settings["batch_size"], args.device)
    factor = E2E_FACTOR[args.model]
    bound = factor * (decode + forward)
    print(
        f"model {args.model}; device {args.device}; default workers {workers}; each run the fastest of {repeats}"
    )
    print(
        f"start {start:.2f} s: a fresh process importing what hardpos eval imports "
        f"(training stack imported: {stack or 'none'})"
    )
    print(
        f"end to end {e2e:.2f} s, less start {e2e - start:.2f} s | floor: decode {decode:.2f} s in {workers} "
        f"processes + forward {forward:.2f} s | target <= {factor} x floor = {bound:.2f} s: "
        f"{'met' if e2e - start <= bound else 'MISSED'} ({(e2e - start) / (decode + forward):.2f} x floor)"
    )
    figures = {
        "rows": len(rows),
        "images": images,
        "workers": workers,
        "model": args.model,
        "repeats": repeats,
        "e2e_s": round(e2e, 2),
        "decode_floor_s": round(decode, 2),
        "forward_floor_s": round(forward, 2),
        "start_s": round(start, 2),
        "start_training_stack": stack or "none",
        "e2e_target_factor": factor,
        "e2e_bound_s": round(bound, 2),
        "e2e_over_floor": round((e2e - start) / (decode + forward), 2),
        "e2e_target": "met" if e2e - start <= bound else "MISSED",
    }
    if torch.device(args.device).type == "cuda":
        bf16 = fastest(
            repeats,
            lambda i: eval_seconds(models[:1], dataset, work / f"bf16-{i}", args.device, "--dtype", "bf16"),
        )
        print(f"--dtype bf16 end to end {bf16:.2f} s vs fp32 {e2e:.2f} s")
        figures["e2e_bf16_s"] = round(bf16, 2)
    if args.models > 1:
        # After the first model: the race of the first model's phase (how many images were decoded ahead)
        # moves whole runs by seconds, their differences too; the tails do not carry it (module docstring).
        extra = float(np.median(np.subtract(tails[len(models)], tails[1]))) / (len(models) - 1)
        whole = float(np.median(np.subtract(together_times, alone_times))) / (len(models) - 1)
        load = load_floor(models[1], args.device)
        extra_bound = 1.5 * forward + load
        clocks = [own_clock(output) for output in outputs]
        clock = {k: float(np.median([c[k] for c in clocks])) for k in clocks[0]}
        print(
            f"{len(models)} models in one run {together:.2f} s: each extra model {extra:.2f} s (median of "
            f"{repeats} paired differences of the time after the first model) | floor: forward {forward:.2f} s + "
            f"load {load:.2f} s | target <= 1.5 x forward + load = {extra_bound:.2f} s: "
            f"{'met' if extra <= extra_bound else 'MISSED'}"
        )
        print(
            f"  whole runs: median of the {repeats} paired differences {whole:.2f} s per extra model (the "
            "first model's phase, a race of decoding ahead, included)"
        )
        print(
            f"  by those runs' own clocks (medians): models after the first {clock['later_models_s']:.2f} s each "
            f"(resolve, load, scoring, saving), comparison table {clock['table_s']:.2f} s"
        )
        figures.update(
            {
                "sweep_models": len(models),
                "sweep_s": round(together, 2),
                "extra_model_s": round(extra, 2),
                "extra_model_whole_runs_s": round(whole, 2),
                "load_s": round(load, 2),
                "extra_model_bound_s": round(extra_bound, 2),
                "extra_model_target": "met" if extra <= extra_bound else "MISSED",
                "extra_model_own_clock_s": round(clock["later_models_s"], 2),
                "comparison_table_s": round(clock["table_s"], 2),
            }
        )
    record(
        f"eval_floor_{torch.device(args.device).type}_{args.model}", {k: str(v) for k, v in figures.items()}
    )


if __name__ == "__main__":
    main()
