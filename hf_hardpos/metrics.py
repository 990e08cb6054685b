"""The hard-positive metrics: the one place where their formulas live.

Per instance there are three image-text scores: s_c (original caption), s_n (hard negative) and
s_p (hard positive). Kamath et al. (2024) define:

- Original accuracy:   s_c > s_n                           (chance 1/2)
- Augmented accuracy:  s_c > s_n and s_p > s_n             (chance 1/3)
- Brittleness:         s_c > s_n > s_p  or  s_p > s_n > s_c (chance 1/3, lower is better)

All comparisons are strict, so a tie is never correct and never brittle. The `evaluate` modules in
`evaluate_modules/` restate these one-line formulas so that each runs as a Hub Space without this package;
`tests/repository/test_metric_modules.py` proves them bit-identical to these functions on tie-heavy data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

ScoreLike = Sequence[float] | np.ndarray


def as_scores(values: ScoreLike | None, name: str) -> np.ndarray:
    """Return `values` as a 1-D float64 array, rejecting what would give a silently wrong number.

    Strings are refused even when they parse ("0.3"): a column of text scores means the caller
    passed the wrong field, and coercing it would hide that.
    """
    if values is None:
        raise ValueError(f"`{name}` is missing: pass one score per example")
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        shown = next((v for v in np.ravel(array)[:1000] if not _is_number(v)), None)
        raise ValueError(
            f"`{name}` must hold numbers, got {array.dtype.name} values"
            + (f" such as {getattr(shown, 'item', lambda: shown)()!r}" if shown is not None else "")
        )
    array = array.astype(np.float64)
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"`{name}` is empty: there is nothing to score")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        shown = ", ".join(str(i) for i in bad[:5])
        raise ValueError(
            f"`{name}` holds {bad.size} non-finite value(s) (NaN or inf), first at index {shown}"
        )
    return array


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def check_scores(**named: ScoreLike) -> list[np.ndarray]:
    """Validate several score lists at once: each finite and non-empty, all of one length."""
    arrays = [as_scores(values, name) for name, values in named.items()]
    lengths = {name: len(a) for name, a in zip(named, arrays)}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}={n}" for name, n in lengths.items())
        raise ValueError(f"score lists differ in length ({described}); they must align row by row")
    return arrays


def original_correct(original: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Per-row bool: the original caption beats the hard negative."""
    return original > negative


def augmented_correct(original: np.ndarray, negative: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Per-row bool: both the original caption and the hard positive beat the hard negative."""
    return (original > negative) & (positive > negative)


def brittle(original: np.ndarray, negative: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Per-row bool: the hard negative falls strictly between the original and the hard positive."""
    return ((original > negative) & (negative > positive)) | ((positive > negative) & (negative > original))


METRIC_NAMES = ("original_accuracy", "augmented_accuracy", "brittleness")


def outcomes_disagree(row: Mapping[str, Any], outcomes: Mapping[str, np.ndarray]) -> str | None:
    """Why a saved row's rates are not those of its per-row 0/1 `outcomes` (metric -> array), or None.

    Each rate is a count over the rows, so its saved value must equal the outcomes' mean (to float
    rounding) and `num_examples` their number: a figure edited after the run, rows dropped or duplicated,
    or scores of another run put beside it, all disagree. The one check every reader of saved
    results makes (`hardpos report` and `compare`, and the runner before it resumes a config)."""
    rows = len(next(iter(outcomes.values()))) if outcomes else 0
    if "num_examples" in row and row["num_examples"] != rows:
        return f"the per-row scores hold {rows} rows but num_examples says {row['num_examples']}"
    for name in METRIC_NAMES:
        if name in row and not abs(float(np.mean(outcomes[name])) - float(row[name])) <= 1e-9:  # NaN fails
            return f"the per-row scores give {name} {np.mean(outcomes[name]):.6f} but the saved figure is {row[name]:.6f}"
    return None


def compute_metrics(
    original_scores: ScoreLike, negative_scores: ScoreLike, positive_scores: ScoreLike
) -> dict[str, float | int]:
    """All three metrics plus the mean scores (paper Table 2), as plain Python numbers.

    The mean scores matter on their own: hard-negative fine-tuning lowers s_c too, which changes
    anything that thresholds raw scores (data filtering, CLIPScore).
    """
    original, negative, positive = check_scores(
        original_scores=original_scores, negative_scores=negative_scores, positive_scores=positive_scores
    )
    return {
        "original_accuracy": float(original_correct(original, negative).mean()),
        "augmented_accuracy": float(augmented_correct(original, negative, positive).mean()),
        "brittleness": float(brittle(original, negative, positive).mean()),
        "mean_original_score": float(original.mean()),
        "mean_negative_score": float(negative.mean()),
        "mean_positive_score": float(positive.mean()),
        "num_examples": int(original.size),
    }


def bootstrap_interval(
    per_row: np.ndarray,
    num_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
    groups: Sequence | np.ndarray | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of a per-row 0/1 outcome.

    Beyond the paper: differences of a point or two between fine-tuned models are common, so an
    interval tells whether a gap is worth reporting. With `groups` (the rows' image ids) whole
    groups are resampled: REPLACE has ~2.3 rows per image and repeated triples, so rows are not
    independent and a row bootstrap would give intervals that are too narrow. The statistic is the
    pooled mean over the rows of the drawn groups.
    """
    return bootstrap_intervals([per_row], num_resamples, confidence_level, seed, groups)[0]


def bootstrap_intervals(
    per_rows: Sequence[np.ndarray],
    num_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
    groups: Sequence | np.ndarray | None = None,
) -> list[tuple[float, float]]:
    """`bootstrap_interval` of each outcome in `per_rows` (all over the same rows and `groups`), from one
    set of draws: each interval equals the one `bootstrap_interval` gives alone (the draws depend only on
    the seed and the number of groups), at the cost of one (a model comparison asks for three)."""
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    if num_resamples < 1:
        raise ValueError(f"num_resamples must be >= 1, got {num_resamples}")
    values = np.stack([np.asarray(v, dtype=np.float64) for v in per_rows])
    if groups is None:
        sums, sizes = values, np.ones(values.shape[1])
    else:
        groups = np.asarray(groups)
        if groups.shape != values.shape[1:]:
            raise ValueError(
                f"`groups` has {groups.size} entries for {values.shape[1]} rows; give one per row"
            )
        _, group_of_row = np.unique(groups, return_inverse=True)
        sums = np.stack([np.bincount(group_of_row, weights=v) for v in values])
        sizes = np.bincount(group_of_row).astype(np.float64)
    rng = np.random.default_rng(seed)
    stats = np.empty((len(values), num_resamples))
    # Drawn in chunks of about 100k indices: the same stream of draws as one (resamples x groups) array, so
    # the same intervals, but an index array that stays in the CPU's cache rather than tens of MB mapped
    # afresh for each comparison table (which made the bootstrap the table's largest cost).
    chunk = max(1, 100_000 // max(1, sizes.size))
    for start in range(0, num_resamples, chunk):
        stop = min(num_resamples, start + chunk)
        idx = rng.integers(0, sizes.size, size=(stop - start, sizes.size))
        drawn = sizes[idx].sum(axis=1)
        for i, row_sums in enumerate(sums):
            stats[i, start:stop] = row_sums[idx].sum(axis=1) / drawn
    alpha = (1 - confidence_level) / 2
    return [(float(low), float(high)) for low, high in np.quantile(stats, [alpha, 1 - alpha], axis=1).T]


def wilson_interval(successes: int, rows: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a rate `successes / rows` (Wilson 1927, "Probable inference, the law of
    succession, and statistical inference", JASA 22:209).

    The default interval of every rate we print: it needs only the count, so it costs nothing and never
    rescores; unlike the normal (Wald) interval or a bootstrap on few rows, it is never [0, 0] or [1, 1]
    (0 of 4 rows gives [0, 49 %]), and it stays inside [0, 1]. It treats rows as independent; the bootstrap
    over images (`bootstrap_interval` with `groups`) does not, and is what `--bootstrap N` reports.
    """
    from statistics import NormalDist

    if rows < 1:
        raise ValueError(f"a rate needs at least one row, got {rows}")
    if not 0 <= successes <= rows:
        raise ValueError(f"successes must be in [0, {rows}], got {successes}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    z = NormalDist().inv_cdf(1 - (1 - confidence_level) / 2)
    rate = successes / rows
    denominator = 1 + z * z / rows
    centre = (rate + z * z / (2 * rows)) / denominator
    half = z * np.sqrt(rate * (1 - rate) / rows + z * z / (4 * rows * rows)) / denominator
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def metric_with_interval(
    name: str,
    per_row: np.ndarray,
    bootstrap_samples: int = 0,
    confidence_level: float = 0.95,
    groups: Sequence | np.ndarray | None = None,
) -> dict[str, float]:
    """`{name: mean}` and, when `bootstrap_samples > 0`, `{name}_ci_low` / `{name}_ci_high`.

    `groups` (one image id per row) makes it a bootstrap over images; see `bootstrap_interval`. The
    resampling seed is fixed (0) so that a rerun of an evaluation reports the same interval.
    """
    result = {name: float(np.mean(per_row))}
    if bootstrap_samples:
        low, high = bootstrap_interval(per_row, bootstrap_samples, confidence_level, seed=0, groups=groups)
        result[f"{name}_ci_low"] = low
        result[f"{name}_ci_high"] = high
    return result


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
            result.update(
                metric_with_interval(name, outcome, bootstrap_samples, confidence_level, groups=groups)
            )
    return result
