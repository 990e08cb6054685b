"""SugarCrepe++'s text-only task (TOT): does the text encoder alone keep the two positives closest?

Why: SugarCrepe++ (Dumpala et al. 2024) separates what the text tower knows from what image-text
matching shows. Each row has a caption p1, a second positive p2 (a human-validated paraphrase; our
`hard_positive`) and a hard negative n; TOT is correct when

    cos(p1, p2) > cos(p1, n)  and  cos(p1, p2) > cos(p2, n)        (strict, as in the authors' code)

with cosines of L2-normalised text embeddings. Only text embeddings are computed here. The same
formula is restated in the self-contained `text_only_accuracy` evaluate module
(`hf_hardpos/evaluate_modules/`); its test proves the two agree.
"""

from __future__ import annotations

import numpy as np
import torch
from datasets import Dataset

from ... import columns
from ...errors import UserInputError
from ...scoring import ITMScorer

TEXT_ONLY = "text_only"
TEXT_ONLY_TIE_RULE = "strict: cos(p1,p2) must exceed both cos(p1,n) and cos(p2,n); a tie is wrong"


def text_only_scores(
    scorer: ITMScorer,
    dataset: Dataset,
    caption_column: str = columns.CAPTION,
    positive_column: str = columns.HARD_POSITIVE,
    negative_column: str = columns.HARD_NEGATIVE,
) -> dict[str, np.ndarray]:
    """The three pairwise text cosines per row: `positive_pair` cos(p1,p2), `caption_negative`
    cos(p1,n), `positive_negative` cos(p2,n). Each distinct caption is encoded once; no image is read."""
    required = [caption_column, positive_column, negative_column]
    columns.require_columns(dataset, required, "the text-only (TOT) set")
    if len(dataset) == 0:
        raise UserInputError("the text-only (TOT) set has no rows")
    texts = dataset.select_columns(required)
    cells = {c: list(texts[c]) for c in required}
    for column, values in cells.items():
        row = next((r for r, v in enumerate(values) if not isinstance(v, str)), None)
        if row is not None:
            raise UserInputError(f"row {row}, column {column!r}: TOT needs a caption, found {values[row]!r}")
    slot = {t: i for i, t in enumerate(dict.fromkeys(t for values in cells.values() for t in values))}
    embeddings = scorer.encode_texts(list(slot))
    p1, p2, n = (embeddings[torch.tensor([slot[t] for t in cells[c]])] for c in required)

    def cosine(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        return (a * b).sum(-1).double().numpy()

    return {
        "positive_pair": cosine(p1, p2),
        "caption_negative": cosine(p1, n),
        "positive_negative": cosine(p2, n),
    }


def text_only_correct(
    positive_pair: np.ndarray, caption_negative: np.ndarray, positive_negative: np.ndarray
) -> np.ndarray:
    """Per row: the positives are strictly closer to each other than either is to the negative."""
    return (positive_pair > caption_negative) & (positive_pair > positive_negative)


def evaluate_text_only(scorer: ITMScorer, dataset: Dataset, *, max_rows: int | None = None) -> dict:
    """`text_only_accuracy` (SugarCrepe++ TOT) of one subset in our schema (caption, hard_positive, hard_negative)."""
    if max_rows is not None:
        dataset = dataset.select(range(min(max_rows, len(dataset))))
    scores = text_only_scores(scorer, dataset)
    correct = text_only_correct(**scores)
    return {
        "task": TEXT_ONLY,
        "text_only_accuracy": float(correct.mean()),
        "num_examples": int(correct.size),
        "tie_rule": TEXT_ONLY_TIE_RULE,
        "aggregation": "fraction of the subset's rows",
    }
