"""Fine-tuning fixtures shared by the trainer tests: rows of the fine-tuning and eval schemas, the
tiny CLIP loaded from its folder, `HardPosTrainingArguments` for short CPU runs, and the arguments of
the warnings a run logged (a resume's skipped checkpoints)."""

from __future__ import annotations

import numpy as np
from datasets import Dataset, Features, Image, Value
from PIL import Image as PILImage

from hf_hardpos import columns
from hf_hardpos.training import HardPosTrainingArguments


def _image(seed: int) -> PILImage.Image:
    rng = np.random.default_rng(seed)
    return PILImage.fromarray(rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8))


def finetune_rows(n: int) -> Dataset:
    """Fine-tuning schema; every third row lacks a SWAP positive, every fourth a SWAP negative."""
    colours = ["red", "blue", "green", "yellow"]
    rows = {
        name: []
        for name in (
            "image",
            "image_id",
            "caption",
            *columns.FINETUNE_POSITIVE_COLUMNS,
            *columns.FINETUNE_NEGATIVE_COLUMNS,
        )
    }
    for i in range(n):
        a, b = colours[i % 4], colours[(i + 1) % 4]
        rows["image"].append(_image(i))
        rows["image_id"].append(f"img{i}")
        rows["caption"].append(f"a {a} cube and a {b} sphere")
        rows[columns.HARD_POSITIVE_REPLACE].append(f"a {a} block and a {b} sphere")
        rows[columns.HARD_POSITIVE_SWAP].append(None if i % 3 == 0 else f"a {b} sphere and a {a} cube")
        rows[columns.HARD_NEGATIVE_REPLACE].append(f"a {b} cube and a {b} sphere")
        rows[columns.HARD_NEGATIVE_SWAP].append(None if i % 4 == 0 else f"a {b} cube and a {a} sphere")
    features = Features({"image": Image(), **{k: Value("string") for k in rows if k != "image"}})
    return Dataset.from_dict(rows, features=features)


def eval_rows(n: int) -> Dataset:
    data = finetune_rows(n)
    return Dataset.from_dict(
        {
            "image": data["image"],
            "caption": data["caption"],
            "hard_negative": data[columns.HARD_NEGATIVE_REPLACE],
            "hard_positive": data[columns.HARD_POSITIVE_REPLACE],
        },
        features=Features({"image": Image(), **{k: Value("string") for k in columns.EVAL_CAPTION_COLUMNS}}),
    )


def finetune_folder(folder, n: int):
    """A local training folder of `n` synthetic fine-tuning rows (one parquet file, split "train"), as
    `hardpos train --dataset <folder>` reads one."""
    from hf_hardpos.synthetic.world import make_finetune_dataset

    folder.mkdir(parents=True, exist_ok=True)
    make_finetune_dataset(n, seed=0).to_parquet(str(folder / "train.parquet"))
    return folder


def swap_eval_folder(folder, n: int = 16):
    """A local Hub-style folder holding the synthetic world's SWAP set (config "swap", split "test"), as
    `--eval_datasets swap=<folder>` reads one."""
    from hf_hardpos.synthetic.world import make_swap_dataset
    from tests.support.eval_data import write_hub_folder

    return write_hub_folder(folder, {"swap": make_swap_dataset(n, 0)})


def make_args(output_dir, **overrides) -> HardPosTrainingArguments:
    settings = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=8,
        per_device_eval_batch_size=16,
        learning_rate=1e-3,
        max_steps=6,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
    )
    settings.update(overrides)
    return HardPosTrainingArguments(**settings)


def load_tiny(tiny_clip_dir):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)


def logged_args(caplog, message: str) -> list[tuple]:
    """The arguments of every record logged with the format `message`: the values a warning reports."""
    return [record.args for record in caplog.records if record.msg == message]


SKIPPED = "Resuming from %s, the last complete checkpoint: skipped %s."  # checkpointing.resolve_checkpoint's warning
