"""Winoground (Thrush et al. 2022): two images crossed with two captions; text, image and group scores."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset, load_dataset

from ... import columns
from ...errors import UserInputError
from ...scoring import ITMScorer
from ..section import Section
from .base import CARD_TASK_ID, Task, TaskData

WINOGROUND = "winoground"
WINOGROUND_TIE_RULE = "strict inequalities (Thrush et al. 2022): a tie is wrong"

# facebook/winoground's published columns (the dataset's own features).
WINOGROUND_IMAGES = ("image_0", "image_1")
WINOGROUND_CAPTIONS = ("caption_0", "caption_1")
WINOGROUND_TAG = "collapsed_tag"


def winoground_outcomes(
    c0_i0: np.ndarray, c1_i0: np.ndarray, c0_i1: np.ndarray, c1_i1: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-example text, image and group correctness (Thrush et al. 2022), strict inequalities.

    text: each image prefers its own caption; image: each caption prefers its own image.
    """
    text = (c0_i0 > c1_i0) & (c1_i1 > c0_i1)
    image = (c0_i0 > c0_i1) & (c1_i1 > c1_i0)
    return {"text_score": text, "image_score": image, "group_score": text & image}


def _winoground_rates(outcomes: Mapping[str, np.ndarray], mask: np.ndarray | None = None) -> dict:
    rates = {name: float(v[mask].mean() if mask is not None else v.mean()) for name, v in outcomes.items()}
    rates["num_examples"] = int(mask.sum() if mask is not None else next(iter(outcomes.values())).size)
    return rates


def evaluate_winoground(
    scorer: ITMScorer,
    dataset: str | Dataset = "facebook/winoground",
    split: str = "test",
    *,
    revision: str | None = None,
    max_rows: int | None = None,
) -> dict:
    """Winoground's text, image and group scores, overall and per `collapsed_tag` (Object, Relation, Both).

    `dataset` is a loaded `Dataset` in facebook/winoground's schema (`id, image_0, image_1,
    caption_0, caption_1, tag, secondary_tag, num_main_preds, collapsed_tag`) or a Hub id / folder.
    """
    name = dataset if isinstance(dataset, str) else "dataset"
    if isinstance(dataset, str) and Path(dataset).expanduser().is_dir():
        from ..eval_data import load_local_split

        dataset, _ = load_local_split(dataset, None, split)  # by content: a rebuilt copy is never stale
    if isinstance(dataset, str):
        try:
            dataset = load_dataset(dataset, split=split, revision=revision)
        except Exception as err:  # gated repo, no network, scripts: the user has to act either way
            raise UserInputError(
                f"cannot load {name!r} split {split!r} ({type(err).__name__}: {err}); facebook/winoground is "
                "gated: accept its terms on the Hub and log in (`hf auth login`), or pass a local copy"
            ) from err
    columns.require_columns(dataset, [*WINOGROUND_IMAGES, *WINOGROUND_CAPTIONS], f"Winoground ({name})")
    if max_rows is not None:
        dataset = dataset.select(range(min(max_rows, len(dataset))))
    if len(dataset) == 0:
        raise UserInputError(f"Winoground ({name}) has no rows")
    captions = [list(dataset[c]) for c in WINOGROUND_CAPTIONS]
    slot = {t: i for i, t in enumerate(dict.fromkeys(captions[0] + captions[1]))}
    text_embeddings = scorer.encode_texts(list(slot))
    caption_embeddings = [text_embeddings[torch.tensor([slot[t] for t in c])] for c in captions]
    image_embeddings = []
    for column in WINOGROUND_IMAGES:
        embeddings, image_slot = scorer.embed_images(dataset, column)
        image_embeddings.append(embeddings[torch.from_numpy(image_slot)])

    def cosine(c: int, i: int) -> np.ndarray:
        return (caption_embeddings[c] * image_embeddings[i]).sum(-1).double().numpy()

    outcomes = winoground_outcomes(cosine(0, 0), cosine(1, 0), cosine(0, 1), cosine(1, 1))
    result = {"task": WINOGROUND, "dataset": name, "split": split, **_winoground_rates(outcomes)}
    if WINOGROUND_TAG in dataset.column_names:
        tags = [str(t) for t in dataset[WINOGROUND_TAG]]
        labels = np.asarray(tags)
        result[f"by_{WINOGROUND_TAG}"] = {
            t: _winoground_rates(outcomes, labels == t) for t in sorted(set(tags))
        }
    result["tie_rule"] = WINOGROUND_TIE_RULE
    result["aggregation"] = "fraction of examples (pooled), overall and within each collapsed_tag"
    return result


def score_winoground(scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
    """Winoground's scores as a section: row `all`, then one row per `collapsed_tag`."""
    result = evaluate_winoground(scorer, data.source, data.split, max_rows=max_rows)
    overall = {k: result[k] for k in ("text_score", "image_score", "group_score", "num_examples")}
    rows = {"all": overall, **result.get(f"by_{WINOGROUND_TAG}", {})}
    return Section(WINOGROUND, data.describe(), rows, {}, result["tie_rule"], result["aggregation"])


TASK = Task(
    WINOGROUND,
    score_winoground,
    matches_columns=lambda names: {*WINOGROUND_IMAGES, *WINOGROUND_CAPTIONS} <= names,
    card_task=(CARD_TASK_ID, "Winoground"),
    card_metrics=("text_score", "image_score", "group_score"),
)
