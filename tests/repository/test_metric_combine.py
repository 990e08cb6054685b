"""The three hard-positive metric modules work through `evaluate.combine`, which passes `predictions` and
`references` to every module: each accepts them (documented in its `_KWARGS_DESCRIPTION`), and its numbers
do not change."""

import evaluate
import numpy as np
import pytest

from hf_hardpos.metrics import compute_metrics
from tests.support.paths import REPO

METRICS_DIR = REPO / "hf_hardpos" / "evaluate_modules"
HARD_POSITIVE = ("original_accuracy", "augmented_accuracy", "brittleness")


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 4, size=(300, 3)) / 4  # many ties
    return {"original_scores": values[:, 0], "negative_scores": values[:, 1], "positive_scores": values[:, 2]}


@pytest.fixture(scope="module")
def combined():
    return evaluate.combine([evaluate.load(str(METRICS_DIR / name)) for name in HARD_POSITIVE])


def test_combine_computes_the_package_numbers(combined, scores):
    expected = compute_metrics(**scores)
    result = combined.compute(**scores)
    assert result == {name: expected[name] for name in HARD_POSITIVE}


def test_combine_with_prediction_rows_and_batches(combined, scores):
    expected = compute_metrics(**scores)
    rows = np.stack([scores["original_scores"], scores["negative_scores"], scores["positive_scores"]], axis=1)
    assert combined.compute(predictions=rows.tolist()) == {name: expected[name] for name in HARD_POSITIVE}
    for start in range(0, 300, 100):
        combined.add_batch(**{k: v[start : start + 100] for k, v in scores.items()})
    assert combined.compute() == {name: expected[name] for name in HARD_POSITIVE}


def test_predictions_and_references_are_checked():
    module = evaluate.load(str(METRICS_DIR / "brittleness"))
    with pytest.raises(ValueError, match="references"):
        module.compute(original_scores=[0.3], negative_scores=[0.2], positive_scores=[0.1], references=[1])
    with pytest.raises(ValueError, match="not both"):
        module.compute(original_scores=[0.3], predictions=[[0.3, 0.2, 0.1]])
    with pytest.raises(ValueError, match="one row of 3 scores"):
        module.compute(predictions=[0.3, 0.2, 0.1])
    original = evaluate.load(str(METRICS_DIR / "original_accuracy"))
    assert original.compute(predictions=[[0.3, 0.2], [0.1, 0.2]]) == {"original_accuracy": 0.5}
