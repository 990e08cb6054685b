"""A small eval set in the shared schema, with images shared between rows like REPLACE, and the Hub-style
folder `hardpos eval --dataset` reads."""

import io
from pathlib import Path

import numpy as np
from datasets import Dataset, Features, Image, Value
from PIL import Image as PILImage

WORDS = ["red", "blue", "cube", "sphere", "left", "right", "holding", "grasping", "small", "large"]


def _png(rng: np.random.Generator, size=(20, 24)) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(rng.integers(0, 255, (*size, 3), dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def make_eval_set(num_images=7, rows_per_image=3, seed=0) -> Dataset:
    """Rows share images (like REPLACE: ~2.3 rows per image) and captions repeat across rows."""
    rng = np.random.default_rng(seed)
    images = [_png(rng) for _ in range(num_images)]
    rows = {"image": [], "image_id": [], "caption": [], "hard_negative": [], "hard_positive": []}
    for i, png in enumerate(images):
        for _ in range(rows_per_image):
            rows["image"].append({"bytes": png, "path": None})
            rows["image_id"].append(str(1000 + i))
            for column in ("caption", "hard_negative", "hard_positive"):
                rows[column].append(" ".join(rng.choice(WORDS, size=rng.integers(1, 4))))
    features = Features(
        {
            "image": Image(),
            "image_id": Value("string"),
            "caption": Value("string"),
            "hard_negative": Value("string"),
            "hard_positive": Value("string"),
        }
    )
    return Dataset.from_dict(rows, features=features)


def write_hub_folder(root: Path, sets: dict[str, Dataset]) -> Path:
    """A folder laid out as a Hub dataset repository: one parquet shard per config under `data/<config>/`,
    each declared in the README's `configs:` (what `hardpos eval --dataset` and `load_dataset` read)."""
    for config, dataset in sets.items():
        dataset.to_parquet(str(root / "data" / config / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {c}\n  data_files:\n  - split: test\n    path: data/{c}/test-*.parquet\n"
            for c in sets
        )
        + "---\n"
    )
    return root


def write_attributes_relations_folder(root: Path, seeds=(0, 1), configs=("attributes", "relations")) -> Path:
    """A Hub folder with REPLACE's two configs, each `make_eval_set` of 4 images x 2 rows with its own seed."""
    sets = {
        config: make_eval_set(num_images=4, rows_per_image=2, seed=seed)
        for seed, config in zip(seeds, configs)
    }
    return write_hub_folder(root, sets)
