"""The hard-positive task: s_c, s_n, s_p per row -> Original/Augmented Accuracy and Brittleness.

Recognised by the shared schema (image, caption, hard_negative, hard_positive). Each config's rates are
fractions of its rows (`hf_hardpos.metrics`); REPLACE's two subsets are also reported as one figure,
the paper's pooled column, with the macro mean beside it (`evaluation.aggregation`), and every rate
gets its interval from the per-row scores (`evaluation.intervals`). What differs from the other tasks
is declared on `TASK`: each config is scored and resumed on its own and keeps its per-row scores
(`scores-<config>.parquet`), the pooled column is computed over configs after every run or resume, the
rows map to the paper's REPLACE and SWAP columns, and SugarCrepe++'s text-only figure can be added.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset

from ... import columns
from ...metrics import (
    METRIC_NAMES,
    augmented_correct,
    brittle,
    metrics_from_scores,
    original_correct,
    outcomes_disagree,
)
from ...scoring import ITMScorer
from ...tables import TIE_RULE
from .. import intervals
from ..aggregation import REPLACE_POOLED, describe_all, replace_aggregates
from ..options import RunOptions
from ..section import HARD_POSITIVE, Section
from .base import CARD_TASK_ID, RowScores, Task, TaskData
from .text_only import TEXT_ONLY_TIE_RULE, evaluate_text_only

ROWS_RULE = "rates = fraction of each config's rows; s_c, s_n, s_p = mean cosine scores"


def bootstrap_description(
    bootstrap_samples: int, by_image: bool, confidence_level: float = 0.95
) -> str | None:
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
    return np.asarray([str(v) for v in dataset[columns.IMAGE_ID][:]])  # `[:]`: one batch, not row by row


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
    scorer = ITMScorer(
        model, processor, batch_size, num_workers, device, precision=precision, progress=progress
    )
    s = score_eval_set(scorer, dataset)
    groups = image_groups(dataset)
    return metrics_from_scores(s["original"], s["negative"], s["positive"], bootstrap_samples, groups=groups)


def score_hard_positive(scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
    """Every config scored with `scorer`: its rates, its per-row scores (with image ids when the set has
    them, for intervals over images) and its truncation report. Aggregates over configs: `aggregate`."""
    section = Section(HARD_POSITIVE, data.describe(), tie_rule=TIE_RULE, aggregation=ROWS_RULE)
    for config, rows in data.subsets().items():
        TASK.check_columns(rows, f"config {config!r}")
        if max_rows is not None:
            rows = rows.select(range(min(max_rows, len(rows))))
        s = score_eval_set(scorer, rows)
        groups = image_groups(rows)
        if groups is not None:
            s["image_id"] = groups
        section.provenance[config] = {"truncation": s.pop("truncation").to_dict()}
        section.row_scores[config] = s
        section.results[config] = metrics_from_scores(s["original"], s["negative"], s["positive"])
    return section


def aggregate_hard_positive(section: Section, options: RunOptions) -> None:
    """REPLACE's pooled column and macro mean over the configs (from their per-row scores), every rate's
    interval unless `options.intervals` is off (`intervals.attach`), and the rules they follow, in `section`."""
    section.aggregates = replace_aggregates(section.results, section.row_scores)
    if options.intervals:
        intervals.attach(
            section.results,
            section.aggregates,
            section.provenance,
            section.row_scores,
            options.bootstrap_samples,
        )
    section.tie_rule = TIE_RULE
    section.aggregation = "; ".join([ROWS_RULE, *describe_all(section.aggregates)])


def add_text_only(section: Section, scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> None:
    """SugarCrepe++'s TOT per config: text embeddings only (cached from the image-text pass)."""
    for name, rows in data.subsets().items():
        if name in section.results:
            result = evaluate_text_only(scorer, rows, max_rows=max_rows)
            section.results[name]["text_only_accuracy"] = result["text_only_accuracy"]
    section.tie_rule += f"; text-only (TOT): {TEXT_ONLY_TIE_RULE}"


def _scores_table(s: dict[str, Any]) -> dict[str, Any]:
    """One config's `scores-<config>.parquet`: row, s_c, s_n, s_p, the per-row outcomes, image ids when known."""
    outcomes = _outcomes(s)
    table = {
        "row": np.arange(len(s["original"])),
        "original_score": s["original"],
        "negative_score": s["negative"],
        "positive_score": s["positive"],
        "original_correct": outcomes["original_accuracy"],
        "augmented_correct": outcomes["augmented_accuracy"],
        "brittle": outcomes["brittleness"],
    }
    if "image_id" in s:
        table["image_id"] = s["image_id"]
    return table


def _scores_from_table(table: dict[str, list]) -> dict[str, np.ndarray]:
    scores = {
        "original": np.asarray(table["original_score"]),
        "negative": np.asarray(table["negative_score"]),
        "positive": np.asarray(table["positive_score"]),
    }
    if "image_id" in table:
        scores["image_id"] = np.asarray(table["image_id"])
    return scores


def _outcomes(s: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Each rate's per-row 0/1 outcome (metric name -> array) from one config's scores."""
    return {
        "original_accuracy": original_correct(s["original"], s["negative"]),
        "augmented_accuracy": augmented_correct(s["original"], s["negative"], s["positive"]),
        "brittleness": brittle(s["original"], s["negative"], s["positive"]),
    }


def _disagrees(row: Mapping[str, Any], s: Mapping[str, Any]) -> str | None:
    """`metrics.outcomes_disagree` of a saved config row and the outcomes its saved scores give (a NaN or
    infinite score, which no model gives a cosine, disagrees too)."""
    for name in ("original", "negative", "positive"):
        if not np.isfinite(np.asarray(s[name], dtype=np.float64)).all():
            return f"its saved {name} scores hold NaN or infinity"
    return outcomes_disagree(row, _outcomes(s))


# Our result rows -> the paper's benchmarks (REPLACE's configs and its pooled aggregate; `hf_hardpos.published`).
_REPLACE_ROWS = {
    "attributes": "replace/attributes",
    "relations": "replace/relations",
    REPLACE_POOLED: "replace",
}


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


TASK = Task(
    HARD_POSITIVE,
    score_hard_positive,
    matches_columns=lambda names: {columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS} <= names,
    published_benchmark=benchmark_of,
    per_config=True,
    required_columns=(columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS),
    aggregate=aggregate_hard_positive,
    row_scores=RowScores(_scores_table, _scores_from_table, _disagrees),
    text_only=add_text_only,
    recognition_order=1,
    card_task=(CARD_TASK_ID, "Image-text matching with hard positives"),
    card_metrics=METRIC_NAMES,
)
