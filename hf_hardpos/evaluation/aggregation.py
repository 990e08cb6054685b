"""REPLACE's two subsets as one figure: the paper's pooled column, and the macro mean beside it.

REPLACE ships as two configs, `attributes` (10,575 rows) and `relations` (16,868 rows), which share
Visual Genome images. Kamath et al. (ECCV 2024) print one REPLACE column in Tables 1 and 8; their
code (`run_eval.py` in github.com/amitakamath/hard_positives @33addaa) counts each subset separately,
and the column is those counts **pooled**: the fraction over all 27,443 rows, each row once. The
paper's own tables show it: pooling Table 7's per-subset figures by row count gives Table 1 (CLIP
ViT-B/32: relations 57.6 / 45.3 / 21.7 and attributes 68.1 / 49.0 / 25.5 pool to 61.6 / 46.7 / 23.2;
Table 1 prints 61.6 / 46.8 / 23.2), while their unweighted mean (62.8 / 47.1 / 23.6) misses by up to
1.3 points. `hf_hardpos.published` holds those figures and the tests redo that sum.

So this module computes, from the subsets' results:

- `REPLACE_POOLED` = "pooled(attributes,relations)": the paper's REPLACE column. Rates are fractions
  of all rows of both subsets, mean scores are means over all rows, and its bootstrap interval
  resamples *images* across both subsets (an image drawn brings its rows of both subsets, since the
  subsets share images; rows of one image are not independent).
- `REPLACE_MACRO_MEAN` = "mean(attributes,relations)": the unweighted mean of the two subsets, a
  secondary figure that weights an attribute row 1.6 times as much as a relation row. Never the
  paper's column.

Every aggregate row carries a machine-readable `aggregation` entry (method, rows, configs, whether it
is the paper's column), and `describe` turns it into the line printed under tables, so every consumer
(CLI, `metrics.json`, trainer logs and model cards, the demo) says the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..columns import REPLACE_SUBSETS
from ..metrics import METRIC_NAMES, metrics_from_scores
from ..published.hard_positive import REPLACE_SUBSET_ROWS

REPLACE_POOLED = "pooled(attributes,relations)"
REPLACE_MACRO_MEAN = "mean(attributes,relations)"
SCORE_MEANS = ("mean_original_score", "mean_negative_score", "mean_positive_score")
POOLED = "pooled"
MACRO_MEAN = "macro_mean"


def describe(name: str, aggregation: Mapping[str, Any]) -> str:
    """One line saying how an aggregate row was computed, from its machine-readable `aggregation`."""
    configs = " + ".join(aggregation["configs"])
    if aggregation["method"] == POOLED:
        paper_rows = sum(REPLACE_SUBSET_ROWS.values())
        # Only all of the paper's rows are its column; fewer (a --skip-missing build, a sample) follow its rule.
        column = (
            "the paper's REPLACE column"
            if aggregation["rows"] == paper_rows
            else f"the paper's REPLACE column's rule, on {aggregation['rows']:,} of its {paper_rows:,} rows"
        )
        text = (
            f"{name} = fraction over all {aggregation['rows']:,} rows of {configs}, each row once; mean scores "
            f"over all rows ({column}, Kamath et al. 2024 Tables 1 and 8)"
        )
        if aggregation.get("interval"):
            text += f"; CI: {aggregation['interval']}"
        return text
    text = (
        f"{name} = unweighted mean of the {len(aggregation['configs'])} subsets' figures (macro mean of subsets; "
        "not the paper's column)"
    )
    return text + (f"; CI: {aggregation['interval']}" if aggregation.get("interval") else "")


def describe_all(aggregates: Mapping[str, Mapping]) -> list[str]:
    """`describe` for every aggregate row that carries an `aggregation` entry."""
    return [describe(name, row["aggregation"]) for name, row in aggregates.items() if "aggregation" in row]


def _counts(result: Mapping[str, Any]) -> dict[str, int]:
    """Each rate of one config as the count of rows it is the fraction of (exact: rates are count / rows)."""
    rows = int(result["num_examples"])
    return {name: int(round(result[name] * rows)) for name in METRIC_NAMES}


def pooled_from_results(results: Mapping[str, Mapping], configs: Sequence[str]) -> dict[str, float | int]:
    """Pooled rates and mean scores from per-config results alone (rate x rows summed, over all rows).

    Used where per-row scores are not kept (the trainer's evaluations, published per-subset figures
    as fractions); equal to pooling the per-row outcomes because each rate is an exact count / rows.
    """
    total = sum(int(results[c]["num_examples"]) for c in configs)
    pooled: dict[str, float | int] = {}
    for name in METRIC_NAMES:
        pooled[name] = sum(_counts(results[c])[name] for c in configs) / total
    for name in SCORE_MEANS:
        if all(name in results[c] for c in configs):
            pooled[name] = float(sum(results[c][name] * results[c]["num_examples"] for c in configs) / total)
    pooled["num_examples"] = total
    return pooled


def pooled_from_scores(
    scores: Mapping[str, Mapping[str, np.ndarray]],
    configs: Sequence[str],
    bootstrap_samples: int = 0,
    confidence_level: float = 0.95,
) -> tuple[dict[str, float | int], str | None]:
    """Pooled metrics from the configs' per-row scores, and the bootstrap interval's description.

    The interval resamples images when every config has `image_id` (ids shared across configs are
    one image, so its rows in both subsets move together), rows otherwise.
    """
    original = np.concatenate([np.asarray(scores[c]["original"], dtype=np.float64) for c in configs])
    negative = np.concatenate([np.asarray(scores[c]["negative"], dtype=np.float64) for c in configs])
    positive = np.concatenate([np.asarray(scores[c]["positive"], dtype=np.float64) for c in configs])
    by_image = all("image_id" in scores[c] for c in configs)
    groups = (
        np.concatenate([np.asarray(scores[c]["image_id"]).astype(str) for c in configs]) if by_image else None
    )
    pooled = metrics_from_scores(original, negative, positive, bootstrap_samples, confidence_level, groups)
    if not bootstrap_samples:
        return pooled, None
    unit = "images across both subsets (all rows of a drawn image_id)" if by_image else "rows of both subsets"
    return pooled, f"{confidence_level:.0%} percentile bootstrap, {bootstrap_samples} resamples over {unit}"


def macro_mean(results: Mapping[str, Mapping], configs: Sequence[str]) -> dict[str, float | int]:
    """The unweighted mean of the configs' rates and mean scores (the macro mean of subsets)."""
    mean: dict[str, float | int] = {
        k: float(np.mean([results[c][k] for c in configs]))
        for k in (*METRIC_NAMES, *SCORE_MEANS)
        if all(k in results[c] for c in configs)
    }
    mean["num_examples"] = int(sum(int(results[c]["num_examples"]) for c in configs))
    return mean


def replace_aggregates(
    results: Mapping[str, Mapping],
    scores: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    bootstrap_samples: int = 0,
    confidence_level: float = 0.95,
) -> dict[str, dict]:
    """REPLACE's pooled column and macro mean, when both subsets are in `results`; else `{}`.

    With `scores` (each config's per-row `original`, `negative`, `positive` and optional
    `image_id`, as `hardpos eval` keeps them) the pooled row is computed from the rows themselves,
    with a bootstrap interval over images when `bootstrap_samples` > 0; without, from the per-config
    rates and row counts (no interval).
    """
    configs = list(REPLACE_SUBSETS)
    if not all(c in results for c in configs):
        return {}
    interval = None
    if scores is not None and all(c in scores for c in configs):
        pooled, interval = pooled_from_scores(scores, configs, bootstrap_samples, confidence_level)
    else:
        pooled = pooled_from_results(results, configs)
    rows = int(pooled["num_examples"])
    pooled["aggregation"] = {"method": POOLED, "rows": rows, "configs": configs, "paper_column": True}
    if interval:
        pooled["aggregation"]["interval"] = interval
    mean = macro_mean(results, configs)
    mean["aggregation"] = {"method": MACRO_MEAN, "rows": rows, "configs": configs, "paper_column": False}
    return {REPLACE_POOLED: pooled, REPLACE_MACRO_MEAN: mean}
