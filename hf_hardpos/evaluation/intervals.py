"""A 95% interval on every rate `hardpos eval` prints and saves, computed from the per-row outcomes it keeps.

Intervals are not part of what is scored: they are recomputed from the per-row scores on every run (a
saved config included), so a different `--bootstrap` never rescores a model, and a suite gets them too.

- By default: the **Wilson score interval** of each rate (`metrics.wilson_interval`), from its count alone.
  It never collapses to [0, 0] on a few rows (0 of 4 gives [0, 49 %]), which a bootstrap does.
- `--bootstrap N`: the percentile bootstrap over images (`metrics.bootstrap_interval` with the rows'
  `image_id`, rows of one image moving together), **widened to contain the Wilson interval** where it is
  narrower: on few images, or a rate of 0 or 1, every resample gives the same rate and the bootstrap
  interval is a point, which says nothing about the rate's uncertainty.
- REPLACE's pooled column (`aggregation.REPLACE_POOLED`): the same, over the rows of both subsets (an image
  drawn brings its rows of both). Its macro mean: the mean of the two subsets' bounds, wider than needed
  (the mean of two widths is at least the width of the mean), stated as such.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..metrics import (
    METRIC_NAMES,
    augmented_correct,
    bootstrap_interval,
    brittle,
    original_correct,
    wilson_interval,
)
from .aggregation import MACRO_MEAN, POOLED

CONFIDENCE = 0.95


def method(bootstrap_samples: int, by_image: bool) -> str:
    """How the intervals were obtained, as printed under the table and saved in `metrics.json`."""
    if not bootstrap_samples:
        return f"{CONFIDENCE:.0%} Wilson score interval of each rate (rows taken as independent)"
    unit = "images (all rows of a drawn image_id)" if by_image else "rows (the set has no image_id column)"
    return (
        f"{CONFIDENCE:.0%} percentile bootstrap, {bootstrap_samples} resamples over {unit}, seed 0, widened to "
        "contain the Wilson interval where narrower (few rows, or a rate of 0 or 1)"
    )


def outcomes(scores: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each rate's per-row 0/1 outcome from a config's saved `original`, `negative`, `positive` scores."""
    o, n, p = (np.asarray(scores[k], dtype=np.float64) for k in ("original", "negative", "positive"))
    return {
        "original_accuracy": original_correct(o, n),
        "augmented_accuracy": augmented_correct(o, n, p),
        "brittleness": brittle(o, n, p),
    }


def rate_intervals(
    per_row: Mapping[str, np.ndarray], bootstrap_samples: int = 0, groups: np.ndarray | None = None
) -> dict[str, float]:
    """`{rate}_ci_low` / `{rate}_ci_high` for each per-row outcome (see the module docstring)."""
    bounds: dict[str, float] = {}
    for name, values in per_row.items():
        values = np.asarray(values, dtype=np.float64)
        low, high = wilson_interval(int(values.sum()), int(values.size), CONFIDENCE)
        if bootstrap_samples:
            b_low, b_high = bootstrap_interval(values, bootstrap_samples, CONFIDENCE, seed=0, groups=groups)
            low, high = min(low, b_low), max(high, b_high)
        bounds[f"{name}_ci_low"], bounds[f"{name}_ci_high"] = low, high
    return bounds


def _without_intervals(metrics: Mapping) -> dict:
    return {k: v for k, v in metrics.items() if "_ci_" not in k}


def attach(
    results: dict[str, dict],
    aggregates: dict[str, dict],
    provenance: dict[str, dict],
    scores: Mapping[str, Mapping[str, np.ndarray]],
    bootstrap_samples: int = 0,
) -> None:
    """Replace the intervals of every config with per-row scores, and of the aggregate rows, in place."""
    for config, s in scores.items():
        if config not in results:
            continue
        groups = np.asarray(s["image_id"]).astype(str) if "image_id" in s else None
        results[config] = {
            **_without_intervals(results[config]),
            **rate_intervals(outcomes(s), bootstrap_samples, groups),
        }
        prov = provenance.setdefault(config, {})
        prov.pop("bootstrap", None)  # the older name of this entry
        prov["interval"] = method(bootstrap_samples, groups is not None)
    for name, row in aggregates.items():
        aggregation = row.get("aggregation") or {}
        configs = aggregation.get("configs", [])
        if not configs or not all(c in scores for c in configs):
            continue
        base = _without_intervals(row)
        if aggregation["method"] == POOLED:
            by_image = all("image_id" in scores[c] for c in configs)
            groups = (
                np.concatenate([np.asarray(scores[c]["image_id"]).astype(str) for c in configs])
                if by_image
                else None
            )
            per_row = {m: np.concatenate([outcomes(scores[c])[m] for c in configs]) for m in METRIC_NAMES}
            base.update(rate_intervals(per_row, bootstrap_samples, groups))
            how = method(bootstrap_samples, by_image)
        elif aggregation["method"] == MACRO_MEAN:
            for bound in (f"{m}_ci_{side}" for m in METRIC_NAMES for side in ("low", "high")):
                base[bound] = float(np.mean([results[c][bound] for c in configs]))
            how = "the mean of the subsets' interval bounds (wider than an exact interval of the mean)"
        else:
            continue
        base["aggregation"] = {**aggregation, "interval": how}
        aggregates[name] = base


# Rates of the other tasks that are a count over `num_examples` rows (caption selection, zero-shot
# classification over images, Winoground over examples); means over classes or subsets are not.
COUNT_RATES = ("accuracy", "acc1", "acc5", "text_score", "image_score", "group_score")


def count_rate_bounds(
    results: Mapping[str, Mapping], aggregates: Mapping[str, Mapping]
) -> dict[str, dict[str, tuple]]:
    """Wilson bounds of each `COUNT_RATES` rate of a result row or a `pooled(...)` row (exact counts), and for
    a `mean(a,b)` row the mean of its members' bounds (as for REPLACE's macro mean); other rows get none."""
    bounds: dict[str, dict[str, tuple]] = {}
    counted = {**results, **{n: r for n, r in aggregates.items() if n.startswith("pooled(")}}
    for name, row in counted.items():
        rows = row.get("num_examples")
        for rate in COUNT_RATES:
            if isinstance(row.get(rate), float) and isinstance(rows, int) and rows > 0:
                bounds.setdefault(name, {})[rate] = wilson_interval(round(row[rate] * rows), rows, CONFIDENCE)
    for name, row in aggregates.items():
        members = (
            name[len("mean(") : -1].split(",") if name.startswith("mean(") and name.endswith(")") else []
        )
        for rate in COUNT_RATES:
            if (
                members
                and isinstance(row.get(rate), float)
                and all(rate in bounds.get(m, {}) for m in members)
            ):
                lows, highs = zip(*(bounds[m][rate] for m in members))
                bounds.setdefault(name, {})[rate] = (float(np.mean(lows)), float(np.mean(highs)))
    return bounds
