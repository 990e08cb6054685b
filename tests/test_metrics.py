"""Truth tables of the three metrics over every ordering of (s_c, s_n, s_p), ties included."""

import itertools

import numpy as np
import pytest

from hf_hardpos import metrics


def _all_orderings():
    """Every weak ordering of three scores drawn from {0, 1, 2}: 27 triples, all tie patterns."""
    return list(itertools.product([0.0, 1.0, 2.0], repeat=3))


def _expected(c, n, p):
    orig = c > n
    aug = c > n and p > n
    brittle = (c > n > p) or (p > n > c)
    return orig, aug, brittle


@pytest.mark.parametrize("c,n,p", _all_orderings())
def test_truth_table_single_row(c, n, p):
    orig, aug, brit = _expected(c, n, p)
    result = metrics.compute_metrics([c], [n], [p])
    assert (result["original_accuracy"], result["augmented_accuracy"], result["brittleness"]) == (
        orig,
        aug,
        brit,
    )


@pytest.mark.parametrize(
    "c,n,p,name",
    [
        (0.5, 0.5, 0.9, "original_accuracy"),
        (0.6, 0.5, 0.5, "augmented_accuracy"),
        (0.6, 0.5, 0.5, "brittleness"),
        (0.5, 0.5, 0.4, "brittleness"),
    ],
)
def test_ties_never_correct_never_brittle(c, n, p, name):
    assert metrics.compute_metrics([c], [n], [p])[name] == 0.0


def test_compute_metrics_on_all_orderings_pooled():
    rows = _all_orderings()
    c, n, p = (np.array(x) for x in zip(*rows))
    result = metrics.compute_metrics(c, n, p)
    expected = np.array([_expected(*r) for r in rows], dtype=float).mean(axis=0)
    assert result["original_accuracy"] == pytest.approx(expected[0])
    assert result["augmented_accuracy"] == pytest.approx(expected[1])
    assert result["brittleness"] == pytest.approx(expected[2])
    assert result["num_examples"] == 27
    assert result["mean_original_score"] == pytest.approx(c.mean())
    assert all(isinstance(v, (float, int)) and not isinstance(v, np.generic) for v in result.values())


def test_chance_levels_on_random_scores():
    rng = np.random.default_rng(0)
    c, n, p = rng.normal(size=(3, 200_000))
    result = metrics.compute_metrics(c, n, p)
    assert result["original_accuracy"] == pytest.approx(1 / 2, abs=0.01)
    assert result["augmented_accuracy"] == pytest.approx(1 / 3, abs=0.01)
    assert result["brittleness"] == pytest.approx(1 / 3, abs=0.01)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"original_scores": [1.0, 2.0], "negative_scores": [1.0], "positive_scores": [1.0, 2.0]},
            "differ in length",
        ),
        ({"original_scores": [], "negative_scores": [], "positive_scores": []}, "empty"),
        (
            {"original_scores": [float("nan")], "negative_scores": [0.0], "positive_scores": [0.0]},
            "non-finite",
        ),
        (
            {"original_scores": [0.0], "negative_scores": [float("inf")], "positive_scores": [0.0]},
            "negative_scores",
        ),
        ({"original_scores": [[0.0]], "negative_scores": [0.0], "positive_scores": [0.0]}, "one-dimensional"),
        ({"original_scores": ["a"], "negative_scores": [0.0], "positive_scores": [0.0]}, "numbers"),
    ],
)
def test_bad_input_is_an_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        metrics.compute_metrics(**kwargs)


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = rng.random(100) < 0.3
    large = rng.random(10_000) < 0.3
    lo_s, hi_s = metrics.bootstrap_interval(small, 500)
    lo_l, hi_l = metrics.bootstrap_interval(large, 500)
    assert lo_s <= small.mean() <= hi_s
    assert lo_l <= large.mean() <= hi_l
    assert hi_l - lo_l < hi_s - lo_s
    assert metrics.bootstrap_interval(large, 500, seed=3) == metrics.bootstrap_interval(large, 500, seed=3)
    with pytest.raises(ValueError, match="confidence_level"):
        metrics.bootstrap_interval(small, 10, confidence_level=1.5)


def _grouped_bootstrap_reference(per_row, groups, resamples, seed, level=0.95):
    """The percentile bootstrap over groups (a cluster bootstrap: Efron & Tibshirani 1993, "An Introduction
    to the Bootstrap", ch. 13, percentile interval; here the groups are images, the docstring of
    `metrics.bootstrap_interval` says why) restated plainly: all resamples' group draws as one
    (resamples x groups) matrix from `default_rng(seed).integers` over the sorted group labels, each
    statistic the pooled mean over the rows of the drawn groups (a group drawn twice counts twice)."""
    rows_of: dict = {}
    for i, group in enumerate(groups):
        rows_of.setdefault(group, []).append(i)
    labels = sorted(rows_of)
    draws = np.random.default_rng(seed).integers(0, len(labels), size=(resamples, len(labels)))
    stats = []
    for drawn in draws:
        rows = [i for d in drawn for i in rows_of[labels[d]]]
        stats.append(sum(per_row[i] for i in rows) / len(rows))
    alpha = (1 - level) / 2
    return tuple(float(q) for q in np.quantile(stats, [alpha, 1 - alpha]))


# One chunk of draws; several; two resamples a chunk, the last chunk short.
@pytest.mark.parametrize("images", [7, 300, 40_000])
def test_grouped_bootstrap_equals_the_plain_restatement_whatever_its_chunks(images):
    rng = np.random.default_rng(5)
    groups = rng.integers(0, images, 3 * images)
    outcomes = [(rng.random(groups.size) < p).astype(np.float64) for p in (0.3, 0.6)]
    resamples = 5 if images == 40_000 else 60
    got = metrics.bootstrap_intervals(outcomes, resamples, seed=11, groups=groups)
    for outcome, interval in zip(outcomes, got):
        assert interval == pytest.approx(
            _grouped_bootstrap_reference(list(outcome), list(groups), resamples, 11), abs=1e-12
        )
