"""The hard-positive task: s_c, s_n, s_p per row -> Original/Augmented Accuracy and Brittleness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from datasets import Dataset

from .. import columns
from ..metrics import (
    augmented_correct,
    brittle,
    check_scores,
    compute_metrics,
    metric_with_interval,
    original_correct,
)
from ..scoring import ITMScorer


def metrics_from_scores(
    original: np.ndarray,
    negative: np.ndarray,
    positive: np.ndarray,
    bootstrap_samples: int = 0,
    confidence_level: float = 0.95,
    groups: Sequence | np.ndarray | None = None,
) -> dict[str, float | int]:
    """`compute_metrics`, plus bootstrap intervals of the three rates when asked for.

    `groups` (the rows' image ids) makes the bootstrap resample images rather than rows.
    """
    result = compute_metrics(original, negative, positive)
    if bootstrap_samples:
        original, negative, positive = check_scores(
            original_scores=original, negative_scores=negative, positive_scores=positive
        )
        per_row = {
            "original_accuracy": original_correct(original, negative),
            "augmented_accuracy": augmented_correct(original, negative, positive),
            "brittleness": brittle(original, negative, positive),
        }
        for name, outcome in per_row.items():
            result.update(metric_with_interval(name, outcome, bootstrap_samples, confidence_level, groups=groups))
    return result


def bootstrap_description(bootstrap_samples: int, by_image: bool, confidence_level: float = 0.95) -> str | None:
    if not bootstrap_samples:
        return None
    unit = "images (all rows of a drawn image_id)" if by_image else "rows (the set has no image_id column)"
    return f"{confidence_level:.0%} percentile bootstrap, {bootstrap_samples} resamples over {unit}"


def score_eval_set(
    scorer: ITMScorer,
    dataset: Dataset,
    caption_column: str = columns.CAPTION,
    negative_column: str = columns.HARD_NEGATIVE,
    positive_column: str = columns.HARD_POSITIVE,
    image_column: str = columns.IMAGE,
) -> dict[str, Any]:
    """s_c, s_n, s_p per row, keyed `original`, `negative`, `positive`, plus the truncation report."""
    scores = scorer.score(dataset, image_column, (caption_column, negative_column, positive_column))
    return {
        "original": scores[caption_column],
        "negative": scores[negative_column],
        "positive": scores[positive_column],
        "truncation": scores.truncation,
    }


def image_groups(dataset: Dataset) -> np.ndarray | None:
    if columns.IMAGE_ID not in dataset.column_names:
        return None
    return np.asarray([str(v) for v in dataset[columns.IMAGE_ID]])


def evaluate_dataset(
    model,
    processor,
    dataset: Dataset,
    *,
    batch_size: int = 64,
    num_workers: int = 0,
    device: str | None = None,
    precision: str = "fp32",
    progress: bool = True,
    bootstrap_samples: int = 0,
) -> dict[str, float | int]:
    """Metrics of `model` on one eval set in the shared schema (image, caption, hard_negative, hard_positive)."""
    scorer = ITMScorer(model, processor, batch_size, num_workers, device, precision=precision, progress=progress)
    s = score_eval_set(scorer, dataset)
    groups = image_groups(dataset)
    return metrics_from_scores(s["original"], s["negative"], s["positive"], bootstrap_samples, groups=groups)
