"""Picking the true caption among a row's candidates: the scores, the strict rule, macro accuracies.

Shared by every caption-selection benchmark: SugarCrepe and ARO (`caption_selection`) and the registered
ones (`hf_hardpos/benchmarks/`). Tie rule: a row is correct only when the true caption scores strictly higher than every
other candidate, as SugarCrepe's `>` (ARO's argmax exception is `caption_selection`'s).

Schema read (hf_hardpos.columns): `image`, the true caption `caption`, and the other candidates in
`hard_negative`, `hard_negative_<i>` (i = 0, 1, ...) columns and/or a list-of-strings column
`hard_negatives`; a missing candidate is null. `negative_columns=` names other columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from datasets import Dataset

from ... import columns
from ...errors import UserInputError
from ...scoring import ITMScorer

NEGATIVES_LIST_COLUMN = "hard_negatives"
_NUMBERED_NEGATIVE = re.compile(rf"^{columns.HARD_NEGATIVE}_(\d+)$")

SELECTION_TIE_RULE = (
    "strict: a row is correct only when the true caption's score is greater than every other candidate's "
    "(a tie is wrong)"
)


def negative_columns_of(dataset: Dataset) -> list[str]:
    """The candidate columns besides the true caption, in the order the schema defines."""
    numbered = sorted(
        (int(m.group(1)), name) for name in dataset.column_names if (m := _NUMBERED_NEGATIVE.match(name))
    )
    found = [columns.HARD_NEGATIVE] if columns.HARD_NEGATIVE in dataset.column_names else []
    found += [name for _, name in numbered]
    if NEGATIVES_LIST_COLUMN in dataset.column_names:
        found.append(NEGATIVES_LIST_COLUMN)
    return found


def _candidates(
    dataset: Dataset, caption_column: str, negative_columns: Sequence[str], what: str
) -> list[list]:
    """Per row: [true caption, other candidates...]; list columns are expanded, nulls kept as None."""
    rows: list[list] = [[text] for text in list(dataset[caption_column])]
    for column in negative_columns:
        for row, cell in enumerate(dataset[column]):
            rows[row].extend(cell if isinstance(cell, list) else [cell])
    for row, candidates in enumerate(rows):
        if not isinstance(candidates[0], str):
            raise UserInputError(f"{what}, row {row}: the true caption ({caption_column!r}) is missing")
        bad = next((c for c in candidates[1:] if c is not None and not isinstance(c, str)), None)
        if bad is not None:
            raise UserInputError(
                f"{what}, row {row}: a candidate caption is a {type(bad).__name__}, not text"
            )
        if all(c is None for c in candidates[1:]):
            raise UserInputError(
                f"{what}, row {row}: no other candidate caption (columns {list(negative_columns)} are all null)"
            )
    return rows


def selection_scores(
    scorer: ITMScorer,
    dataset: Dataset,
    caption_column: str = columns.CAPTION,
    negative_columns: Sequence[str] | None = None,
    image_column: str = columns.IMAGE,
    what: str = "the dataset",
) -> np.ndarray:
    """[rows, 1 + max candidates] cosine scores; column 0 is the true caption, NaN where a row has
    fewer candidates. Each distinct image and each distinct caption is encoded once."""
    negative_columns = (
        list(negative_columns) if negative_columns is not None else negative_columns_of(dataset)
    )
    if not negative_columns:
        raise UserInputError(
            f"{what} has no candidate caption columns besides {caption_column!r} (expected "
            f"{columns.HARD_NEGATIVE!r}, {columns.HARD_NEGATIVE}_<i> or {NEGATIVES_LIST_COLUMN!r}); "
            f"found {dataset.column_names}"
        )
    columns.require_columns(dataset, [image_column, caption_column, *negative_columns], what)
    if len(dataset) == 0:
        raise UserInputError(f"{what} has no rows")
    candidates = _candidates(dataset, caption_column, negative_columns, what)
    slot = {t: i for i, t in enumerate(dict.fromkeys(t for row in candidates for t in row if t is not None))}
    text_embeddings = scorer.encode_texts(list(slot))
    image_embeddings, image_slot = scorer.embed_images(dataset, image_column)
    width = max(len(row) for row in candidates)
    index = torch.full((len(candidates), width), -1, dtype=torch.long)
    for row, texts in enumerate(candidates):
        index[row, : len(texts)] = torch.tensor([slot[t] if t is not None else -1 for t in texts])
    rows_image = torch.from_numpy(image_slot)
    scores = torch.empty(index.shape, dtype=torch.float64)
    for start in range(0, len(candidates), 4096):  # blocks: COCO-Order has 25k rows x 5 captions
        block = slice(start, start + 4096)
        texts = text_embeddings[index[block].clamp(min=0)]
        scores[block] = torch.einsum("rd,rkd->rk", image_embeddings[rows_image[block]], texts).double()
    scores[index < 0] = float("nan")
    return scores.numpy()


def selection_correct(scores: np.ndarray, ties_count_as_correct: bool = False) -> np.ndarray:
    """Per row: the true caption (column 0) beats every present candidate strictly, or, with
    `ties_count_as_correct`, is at least as high (`np.argmax` over a list with the true caption
    first, ARO's rule on COCO/Flickr30k-Order)."""
    others = np.where(np.isnan(scores[:, 1:]), -np.inf, scores[:, 1:])
    best_other = others.max(axis=1)
    return scores[:, 0] >= best_other if ties_count_as_correct else scores[:, 0] > best_other


@dataclass(frozen=True)
class MacroProtocol:
    """How a benchmark macro-averages a subset: accuracy per value of `column`, then the unweighted
    mean over the values with at least `min_group_size` rows that are not in `exclude` (see `aro.py`)."""

    column: str
    min_group_size: int = 1
    exclude: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"unweighted mean over {self.column!r} groups of their accuracy"]
        if self.min_group_size > 1:
            parts.append(f"groups with >= {self.min_group_size} rows")
        if self.exclude:
            parts.append(f"{len(self.exclude)} groups excluded")
        return ", ".join(parts)


def macro_accuracy(correct: np.ndarray, groups: Sequence, protocol: MacroProtocol) -> dict:
    """`macro_accuracy` and `num_groups` of per-row outcomes under `protocol` (empty if no group qualifies)."""
    labels = np.asarray([str(g) for g in groups])
    excluded = set(protocol.exclude)
    kept = [
        g for g in np.unique(labels) if g not in excluded and (labels == g).sum() >= protocol.min_group_size
    ]
    if not kept:
        return {}
    return {
        "macro_accuracy": float(np.mean([correct[labels == g].mean() for g in kept])),
        "num_groups": len(kept),
        "macro_protocol": protocol.describe(),
    }
