"""Does the fine-tuning data pipeline keep the accelerator busy? The trainer's DataLoader against its step.

Both from one run, on one machine, with the recipe's settings (`--recipe`, default svlc: its per-device
batch, workers, crop augmentation, hard-example sampling and AMP):

- loader: `HardPosTrainer.get_train_dataloader()` exactly as training builds it (sampler, workers,
  pinned memory on CUDA, `HardPosDataCollator`: JPEG decode, RandomResizedCrop, normalisation,
  tokenisation of the caption and the drawn hard positive and negative, collation), iterated over
  `--batches` batches after the first (the workers' start), in samples/s;
- step: `HardPosTrainer.training_step` (forward, the objective, backward under the recipe's AMP)
  plus the optimiser step, on one batch already on the device, in samples/s (median of `--steps`).

Workload: COCO-shaped rows (a 640x480 JPEG, about 60 KB, per row; captions of COCO's length with one
replace and one swap hard positive and negative each) and a ViT-B/32-shaped `CLIPModel` (random
weights). Target: loader >= 1.2 x step (`loader_over_step`), so the step never waits for data.

    python benchmarks/train_loader.py [--recipe svlc] [--device cuda] [--batch-size 128] [--workers N]

Figures go to `benchmarks/results.json` under `train_loader_<device>`.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from datasets import Dataset, Features, Value
from datasets import Image as ImageFeature
from eval_throughput import build_processor
from PIL import Image
from results import record

REPO = Path(__file__).resolve().parents[1]
WORDS = "a man woman dog cat red blue wooden table holding riding next to on the and with large small".split()


def coco_jpeg(seed: int) -> bytes:
    """A 640x480 JPEG with smooth structure and noise (about COCO's size and entropy)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (15, 20, 3), dtype=np.uint8)
    image = Image.fromarray(base).resize((640, 480), Image.BICUBIC)
    noisy = np.clip(np.asarray(image, dtype=np.int16) + rng.integers(-12, 12, (480, 640, 3)), 0, 255)
    buffer = io.BytesIO()
    Image.fromarray(noisy.astype(np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def coco_rows(count: int, distinct_images: int) -> Dataset:
    from hf_hardpos import columns

    rng = np.random.default_rng(0)
    images = [coco_jpeg(i) for i in range(distinct_images)]

    def caption() -> str:
        return " ".join(rng.choice(WORDS, rng.integers(8, 14)))

    text_columns = ["caption", *columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS]
    rows = {
        "image": [{"bytes": images[i % distinct_images], "path": None} for i in range(count)],
        **{c: [caption() for _ in range(count)] for c in text_columns},
    }
    return Dataset.from_dict(
        rows, features=Features({"image": ImageFeature(), **{c: Value("string") for c in text_columns}})
    )


def recipe_arguments(recipe: str, output_dir: Path, device: str, overrides: dict):
    from hf_hardpos.training import HardPosTrainingArguments

    settings = yaml.safe_load((REPO / "examples" / "recipes" / f"{recipe}.yaml").read_text())
    known = {f for f in HardPosTrainingArguments.__dataclass_fields__}
    chosen = {k: v for k, v in settings.items() if k in known}
    chosen.update(
        output_dir=str(output_dir), report_to="none", disable_tqdm=True, use_cpu=device == "cpu", **overrides
    )
    if device == "cpu":  # AMP fp16 needs CUDA; the CPU measures the fp32 step
        chosen.update(fp16=False, bf16=False)
    return HardPosTrainingArguments(**chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="svlc")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, help="per-device batch (default: the recipe's)")
    parser.add_argument("--workers", type=int, help="dataloader workers (default: the recipe's)")
    parser.add_argument("--batches", type=int, default=6, help="loader batches timed after the first")
    parser.add_argument("--steps", type=int, default=5, help="training steps timed after a warm-up")
    args = parser.parse_args()

    from transformers import CLIPConfig, CLIPModel

    from hf_hardpos.training import HardPosTrainer

    overrides = {}
    if args.batch_size:
        overrides["per_device_train_batch_size"] = args.batch_size
    if args.workers is not None:
        overrides["dataloader_num_workers"] = args.workers
    training_args = recipe_arguments(
        args.recipe, Path(tempfile.mkdtemp(prefix="hardpos-loader-")), args.device, overrides
    )
    batch = training_args.per_device_train_batch_size
    data = coco_rows(batch * (args.batches + 2), distinct_images=min(512, batch * (args.batches + 2)))
    processor = build_processor(
        [{"caption": t, "hard_negative": t, "hard_positive": t} for t in data["caption"][:200]], None
    )
    torch.manual_seed(0)
    model = CLIPModel(CLIPConfig())
    trainer = HardPosTrainer(model=model, args=training_args, train_dataset=data, processor=processor)

    loader = trainer.get_train_dataloader()
    batches = iter(loader)
    first = next(batches)  # workers start; not timed
    start = time.perf_counter()
    for _ in range(args.batches):
        next(batches)
    loader_rate = args.batches * batch / (time.perf_counter() - start)

    trainer.create_optimizer_and_scheduler(num_training_steps=args.steps + 1)
    trainer.current_gradient_accumulation_steps = 1  # what `train()` sets before its first step
    inputs = trainer._prepare_inputs(first)
    model = trainer.model.train()
    seconds = []
    for step in range(args.steps + 1):
        if torch.device(args.device).type == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        trainer.training_step(model, inputs)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        if torch.device(args.device).type == "cuda":
            torch.cuda.synchronize()
        if step:  # the first is warm-up
            seconds.append(time.perf_counter() - begin)
    step_rate = batch / statistics.median(seconds)
    amp = "fp16" if training_args.fp16 else "bf16" if training_args.bf16 else "fp32"
    workers = training_args.dataloader_num_workers
    print(
        f"recipe {args.recipe}: batch {batch} per device, {workers} workers, AMP {amp}, device {args.device}"
    )
    print(
        f"loader {loader_rate:.0f} samples/s | step {step_rate:.0f} samples/s | loader/step "
        f"{loader_rate / step_rate:.2f} (target >= 1.2: {'met' if loader_rate >= 1.2 * step_rate else 'MISSED'})"
    )
    record(
        f"train_loader_{torch.device(args.device).type}",
        {
            "recipe": args.recipe,
            "batch_size": str(batch),
            "workers": str(workers),
            "amp": amp,
            "loader_samples_per_s": f"{loader_rate:.0f}",
            "step_samples_per_s": f"{step_rate:.0f}",
            "loader_over_step": f"{loader_rate / step_rate:.2f}",
        },
    )


if __name__ == "__main__":
    sys.exit(main())
