"""Evaluation sweeps: K models in one `hardpos eval` vs K separate runs, and end to end vs the forward-pass floor.

Workload (as `eval_throughput.py`): about `--rows` REPLACE-shaped rows in its two configs (a synthetic
stand-in with REPLACE's 2.34 rows per image, or the real rows from `--upstream-dir`), one generated
500x375 JPEG per distinct image (Visual Genome's typical size), written as a local Hub folder.

(a) sweep: K tiny random CLIPs (32 px images, 2 layers: decode-bound, as any model is on a GPU),
    timed as the user runs them, each a fresh process (`python -m hf_hardpos eval`, fresh output
    folders, the datasets cache warmed first): K runs of one `--model` each, then one run with K
    `--model` flags. Prints both times (wall and CPU, children included) and
    `sweep_speedup = separate / together` (target >= 0.7 K), and checks that every model's rates are
    the same in both arms.
(b) floor: one full-size ViT-B/32 (`CLIPConfig()` defaults, random weights) scored end to end by
    `evaluate_model` (model and data loading, decoding in `--num-workers` DataLoader workers, both
    configs, metrics), against the forward passes alone of its distinct inputs, in the batches the
    scorer forms (images decoded and texts tokenised beforehand, untimed). Prints
    `e2e_over_floor = e2e / floor` (target <= 1.10).

    python benchmarks/eval_sweep.py [--rows 600] [--models 4] [--skip-floor]

Both figures are recorded in `benchmarks/results.json`. Run it on an otherwise idle machine: other
processes stretch wall time; the CPU times are printed beside it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault(
    "OMP_WAIT_POLICY", "PASSIVE"
)  # as `hardpos eval` sets it, before torch loads (its comment says why)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from datasets import Image as ImageFeature  # noqa: E402
from eval_throughput import build_processor, replace_workload  # noqa: E402
from PIL import Image  # noqa: E402
from results import record  # noqa: E402  benchmarks/results.py: one results file for every benchmark


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the timed `hardpos eval` processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# Offline; unbuffered, so that each stdout line reaches `timed_lines` when it is printed.
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


def timed_lines(command: list[str]) -> tuple[float, list[tuple[float, str]]]:
    """Wall seconds of a fresh process (offline), and each stdout line with the second it arrived (from the
    process's start); a failure stops the benchmark with its stderr."""
    start = time.perf_counter()
    with (
        tempfile.TemporaryFile("w+") as stderr,  # a file: a full stderr pipe could block the process
        subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=stderr, text=True) as process,
    ):
        lines = [(time.perf_counter() - start, line) for line in process.stdout]
        process.wait()
        seconds = time.perf_counter() - start
        if process.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{stderr.read()[-3000:]}")
    return seconds, lines


def timed_output(command: list[str]) -> tuple[float, str]:
    """Wall seconds of a fresh process (offline), and its stdout (`timed_lines`)."""
    seconds, lines = timed_lines(command)
    return seconds, "".join(line for _, line in lines)


def hardpos_eval(
    models: list[Path], dataset: Path, output: Path, *flags: str
) -> tuple[float, list[tuple[float, str]]]:
    """Wall seconds and timed stdout lines (`timed_lines`) of one `hardpos eval` process writing `output` (a
    new folder: nothing resumed), as the user runs it (`python -m hf_hardpos`, default flags but
    `--no-progress` and `flags`)."""
    return timed_lines(
        [
            sys.executable,
            "-m",
            "hf_hardpos",
            "eval",
            *(x for m in models for x in ("--model", str(m))),
            "--dataset",
            str(dataset),
            "--output",
            str(output),
            "--no-progress",
            *flags,
        ]
    )


def rates(folder: Path) -> dict:
    results = json.loads((folder / "metrics.json").read_text())["results"]
    return {
        config: {k: m[k] for k in ("original_accuracy", "augmented_accuracy", "brittleness")}
        for config, m in results.items()
    }


def sweep(work: Path, dataset: Path, rows: list[dict], k: int) -> dict[str, str]:
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

    corpus = [r[c] for r in rows for c in ("caption", "hard_negative", "hard_positive")]
    models = [build_tiny_clip(work / f"tiny{i}", corpus, seed=i) for i in range(k)]
    hardpos_eval(
        models[:1], dataset, work / "warm"
    )  # the datasets cache of this content, built once, untimed

    start, cpu = time.perf_counter(), cpu_seconds()
    for model in models:
        hardpos_eval([model], dataset, work / "separate" / model.name)
    separate, separate_cpu = time.perf_counter() - start, cpu_seconds() - cpu

    start, cpu = time.perf_counter(), cpu_seconds()
    hardpos_eval(models, dataset, work / "together")
    together, together_cpu = time.perf_counter() - start, cpu_seconds() - cpu

    same = all(rates(work / "separate" / m.name) == rates(work / "together" / m.name) for m in models)
    if not same:
        raise SystemExit("the rates of one run with several models differ from separate runs")
    print(
        f"(a) {k} tiny models: {k} separate runs {separate:.1f} s wall ({separate_cpu:.1f} s CPU); one run with "
        f"{k} --model {together:.1f} s wall ({together_cpu:.1f} s CPU); rates identical per model"
    )
    print(
        f"sweep_speedup={separate / together:.2f} (target >= {0.7 * k:.1f}); cpu_speedup={separate_cpu / together_cpu:.2f}"
    )
    return {
        "sweep_models": str(k),
        "sweep_separate_s": f"{separate:.1f}",
        "sweep_together_s": f"{together:.1f}",
        "sweep_speedup": f"{separate / together:.2f}",
        "sweep_cpu_speedup": f"{separate_cpu / together_cpu:.2f}",
    }


def synchronize(device: str | torch.device) -> None:
    """Wait for `device`'s queued kernels (CUDA runs them asynchronously: a clock read before this misses
    them); nothing elsewhere."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


@torch.inference_mode()
def forward_floor(model_dir: Path, dataset: Path, batch_size: int, device: str | None = None) -> float:
    """Seconds of the forward passes alone over the distinct images and captions of every config, in the
    batches `ITMScorer` forms (same order, same padding) on `device` (the scorer's own choice when None);
    decoding, tokenising and the copies to the device are done first, untimed. On CUDA the clock stops
    after a synchronise: kernels are queued asynchronously, and the floor must include them."""
    from transformers import CLIPModel, CLIPProcessor

    from hf_hardpos.evaluation.eval_data import load_eval_sets
    from hf_hardpos.scoring import ITMScorer

    model, processor = CLIPModel.from_pretrained(model_dir).eval(), CLIPProcessor.from_pretrained(model_dir)
    scorer = ITMScorer(model, processor, batch_size, device=device, progress=False)
    images, texts = {}, {}
    for eval_set in load_eval_sets(str(dataset), None, "test").values():
        data = eval_set.dataset
        for cell in data.cast_column("image", ImageFeature(decode=False))["image"]:
            images.setdefault(cell["bytes"], None)
        for column in ("caption", "hard_negative", "hard_positive"):
            for text in data[column]:
                ids = processor.tokenizer(text, truncation=True, max_length=scorer.max_length)["input_ids"]
                texts.setdefault(tuple(ids), None)
    pixels = [
        processor.image_processor(images=Image.open(io.BytesIO(b)).convert("RGB"), return_tensors="pt")[
            "pixel_values"
        ][0]
        for b in images
    ]
    image_batches = [
        torch.stack(pixels[s : s + batch_size]).to(scorer.device, scorer.pixel_dtype)
        for s in range(0, len(pixels), batch_size)
    ]
    ids = list(texts)
    order = np.argsort([len(i) for i in ids], kind="stable")
    text_batches = [
        {k: v.to(scorer.device) for k, v in scorer._pad([ids[i] for i in order[s : s + batch_size]]).items()}
        for s in range(0, len(ids), batch_size)
    ]
    synchronize(scorer.device)
    start = time.perf_counter()
    for batch in image_batches:
        scorer.model.get_image_features(pixel_values=batch)
    for batch in text_batches:
        scorer.model.get_text_features(**batch)
    synchronize(scorer.device)
    seconds = time.perf_counter() - start
    print(
        f"floor: {len(pixels)} distinct images, {len(ids)} distinct token sequences, batches of {batch_size}"
    )
    return seconds


def floor(work: Path, dataset: Path, rows: list[dict], batch_size: int, num_workers: int) -> dict[str, str]:
    from transformers import CLIPConfig, CLIPModel

    from hf_hardpos.evaluation.run import evaluate_model

    model_dir = work / "vit-b-32"
    torch.manual_seed(0)
    CLIPModel(CLIPConfig()).save_pretrained(model_dir)  # ViT-B/32 shape, random weights
    build_processor(rows, None).save_pretrained(model_dir)
    evaluate_model(
        str(model_dir), str(dataset), max_rows=2, progress=False, log=lambda m: None
    )  # warm caches
    start = time.perf_counter()
    evaluate_model(
        str(model_dir),
        str(dataset),
        batch_size=batch_size,
        num_workers=num_workers,
        progress=False,
        log=lambda m: None,
    )
    e2e = time.perf_counter() - start
    least = forward_floor(model_dir, dataset, batch_size)
    print(f"(b) ViT-B/32 fp32: end to end {e2e:.1f} s, forward passes of the distinct inputs {least:.1f} s")
    print(f"e2e_over_floor={e2e / least:.2f} (target <= 1.10)")
    return {
        "floor_e2e_s": f"{e2e:.1f}",
        "floor_forward_s": f"{least:.1f}",
        "e2e_over_floor": f"{e2e / least:.2f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--models", type=int, default=4, help="K, the models of the sweep")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--num-workers", type=int, default=1, help="image workers of the end-to-end run (b)")
    parser.add_argument(
        "--upstream-dir", type=Path, help="a clone of amitakamath/hard_positives (real REPLACE rows)"
    )
    parser.add_argument("--skip-floor", action="store_true", help="only (a)")
    args = parser.parse_args()

    rows, images, work, dataset = replace_workload(args.rows, args.upstream_dir, "hardpos-sweep-")
    figures = {"rows": str(len(rows)), "images": str(images), **sweep(work, dataset, rows, args.models)}
    if not args.skip_floor:
        figures.update(floor(work, dataset, rows, args.batch_size, args.num_workers))
    record("eval_sweep", figures)


if __name__ == "__main__":
    main()
