"""Caption-selection sets (SugarCrepe / ARO layout: image, caption, one or several hard negatives) and
Winoground-shaped sets, with random images and captions from a small vocabulary."""

from __future__ import annotations

import io

import numpy as np
from datasets import Dataset, Features, Image, Sequence, Value
from PIL import Image as PILImage

WORDS = ["red", "blue", "cube", "sphere", "left", "right", "holding", "small", "large", "dog", "cat", "on"]

# facebook/winoground's features, as its loading script declares them
WINOGROUND_FEATURES = Features(
    {
        "id": Value("int32"),
        "image_0": Image(),
        "image_1": Image(),
        "caption_0": Value("string"),
        "caption_1": Value("string"),
        "tag": Value("string"),
        "secondary_tag": Value("string"),
        "num_main_preds": Value("int32"),
        "collapsed_tag": Value("string"),
    }
)


def _png(rng: np.random.Generator) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(rng.integers(0, 255, (16, 20, 3), dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=rng.integers(2, 6)))


def make_selection_set(num_rows: int, num_negatives: int, seed: int, as_list: bool = False) -> Dataset:
    """Rows share images two by two; with several negatives the last one is null in every third row."""
    rng = np.random.default_rng(seed)
    images = [_png(rng) for _ in range((num_rows + 1) // 2)]
    rows = {"image": [{"bytes": images[r // 2], "path": None} for r in range(num_rows)]}
    rows["caption"] = [_sentence(rng) for _ in range(num_rows)]
    negatives = [[_sentence(rng) for _ in range(num_negatives)] for _ in range(num_rows)]
    if num_negatives > 1:
        for r in range(0, num_rows, 3):
            negatives[r][-1] = None
    features = {"image": Image(), "caption": Value("string")}
    if as_list:
        rows["hard_negatives"] = [[n for n in row if n is not None] for row in negatives]
        features["hard_negatives"] = Sequence(Value("string"))
    elif num_negatives == 1:
        rows["hard_negative"] = [row[0] for row in negatives]
        features["hard_negative"] = Value("string")
    else:
        for i in range(num_negatives):
            rows[f"hard_negative_{i}"] = [row[i] for row in negatives]
            features[f"hard_negative_{i}"] = Value("string")
    return Dataset.from_dict(rows, features=Features(features))


def make_winoground(num_rows: int = 6, seed: int = 7) -> Dataset:
    rng = np.random.default_rng(seed)
    tags = ["Object", "Relation", "Both"]
    rows = {name: [] for name in WINOGROUND_FEATURES}
    for i in range(num_rows):
        words = list(rng.choice(WORDS, size=4, replace=False))
        rows["id"].append(i)
        rows["image_0"].append({"bytes": _png(rng), "path": None})
        rows["image_1"].append({"bytes": _png(rng), "path": None})
        rows["caption_0"].append(" ".join(words))
        rows["caption_1"].append(" ".join(words[::-1]))  # same words, another order, as Winoground
        rows["tag"].append("Noun")
        rows["secondary_tag"].append("")
        rows["num_main_preds"].append(1)
        rows["collapsed_tag"].append(tags[i % 3])
    return Dataset.from_dict(rows, features=WINOGROUND_FEATURES)
