"""The hard-positive task: s_c, s_n, s_p per row -> Original/Augmented Accuracy and Brittleness.

Recognised by the shared schema (image, caption, hard_negative, hard_positive). Each config's rates are
fractions of its rows (`hf_hardpos.metrics`); REPLACE's two subsets are also reported as one figure,
the paper's pooled column, with the macro mean beside it (`evaluation.aggregation`). `hardpos eval`
runs this task through `evaluation.run.evaluate_model` (resumable, per-config files); the suite's
sections and the trainer's evaluations are built by `hard_positive_section` either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset

from ... import columns
from ...metrics import metrics_from_scores
from ...scoring import ITMScorer
from ..aggregation import REPLACE_POOLED, describe_all, replace_aggregates
from ..section import HARD_POSITIVE, Section
from ...tables import TIE_RULE
from .base import Task, TaskData

ROWS_RULE = "rates = fraction of each config's rows; s_c, s_n, s_p = mean cosine scores"


def bootstrap_description(bootstrap_samples: int, by_image: bool, confidence_level: float = 0.95) -> str | None:
    if not bootstrap_samples:
        return None
    unit = "images (all rows of a drawn image_id)" if by_image else "rows (the set has no image_id column)"
    return f"{confidence_level:.0%} percentile bootstrap, {bootstrap_samples} resamples over {unit}"


def score_eval_set(scorer: ITMScorer, dataset: Dataset) -> dict[str, Any]:
    """s_c, s_n, s_p per row of the shared schema, keyed `original`, `negative`, `positive`, plus the
    truncation report; each distinct image and caption is encoded once (`ITMScorer.score`)."""
    scores = scorer.score(dataset, columns.IMAGE, columns.EVAL_CAPTION_COLUMNS)
    original, negative, positive = (scores[column] for column in columns.EVAL_CAPTION_COLUMNS)
    return {"original": original, "negative": negative, "positive": positive, "truncation": scores.truncation}


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


def hard_positive_section(
    source: str,
    results: dict[str, dict],
    aggregates: dict[str, dict],
    provenance: dict | None = None,
    published: dict | None = None,
) -> Section:
    """The section of per-config results and their aggregates, with the rules they follow."""
    return Section(
        HARD_POSITIVE, source, results, aggregates, TIE_RULE, "; ".join([ROWS_RULE, *describe_all(aggregates)]),
        provenance=provenance or {}, published=published or {},
    )


# Our result rows -> the paper's benchmarks (REPLACE's configs and its pooled aggregate; `hf_hardpos.published`).
_REPLACE_ROWS = {"attributes": "replace/attributes", "relations": "replace/relations", REPLACE_POOLED: "replace"}


def benchmark_of(dataset: str, row: str, metrics=None) -> str | None:
    """The benchmark of Kamath et al. (ECCV 2024) a row of our hard-positive results measures, or None.

    REPLACE rows are known by their config names; SWAP has one config, `default`, so a `default` row is
    SWAP only when the dataset is named `swap` (the Hub id `hardpos/swap` or a folder named `swap`, as
    `hardpos build swap` writes it).
    """
    if row in _REPLACE_ROWS:
        return _REPLACE_ROWS[row]
    if row == "default" and Path(str(dataset).rstrip("/")).name.lower() == "swap":
        return "swap"
    return None


def score_hard_positive(scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
    """Every config scored with `scorer` (no output folder: `evaluate_model` is the resumable path)."""
    results = {}
    for config, rows in data.subsets().items():
        columns.require_columns(rows, [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], f"config {config!r}")
        if max_rows is not None:
            rows = rows.select(range(min(max_rows, len(rows))))
        s = score_eval_set(scorer, rows)
        results[config] = metrics_from_scores(s["original"], s["negative"], s["positive"])
    return hard_positive_section(data.describe(), results, replace_aggregates(results))


TASK = Task(
    HARD_POSITIVE,
    score_hard_positive,
    matches_columns=lambda names: {columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS} <= names,
    published_benchmark=benchmark_of,
)
