"""The `evaluate` modules in metrics/ support `evaluate`'s incremental API: add / add_batch, then compute()."""

import evaluate
import numpy as np
import pytest

from tests.support.paths import REPO

METRICS_DIR = REPO / "hf_hardpos" / "evaluate_modules"
HARD_POSITIVE = ["original_accuracy", "augmented_accuracy", "brittleness"]
TOT_COLUMNS = ("positive_pair_scores", "caption_negative_scores", "positive_negative_scores")


def _scores(columns, rows=40, seed=0):
    rng = np.random.default_rng(seed)
    return {c: v.tolist() for c, v in zip(columns, rng.normal(size=(len(columns), rows)).round(1))}


CASES = [(name, ("original_scores", "negative_scores", "positive_scores")) for name in HARD_POSITIVE]
CASES.append(("text_only_accuracy", TOT_COLUMNS))


@pytest.mark.parametrize("name, columns", CASES, ids=[c[0] for c in CASES])
def test_add_batch_add_and_compute_kwargs_agree(name, columns):
    scores = _scores(columns)
    whole = evaluate.load(str(METRICS_DIR / name)).compute(**scores, bootstrap_samples=50, seed=3)

    batched = evaluate.load(str(METRICS_DIR / name))
    for start in range(0, 40, 15):
        batched.add_batch(**{c: v[start : start + 15] for c, v in scores.items()})
    assert batched.compute(bootstrap_samples=50, seed=3) == whole

    one_by_one = evaluate.load(str(METRICS_DIR / name))
    for row in range(40):
        one_by_one.add(**{c: v[row] for c, v in scores.items()})
    assert one_by_one.compute(bootstrap_samples=50, seed=3) == whole
    assert set(whole) == {name, f"{name}_ci_low", f"{name}_ci_high"}


def test_original_accuracy_add_batch_without_positive_scores():
    scores = _scores(("original_scores", "negative_scores"))
    module = evaluate.load(str(METRICS_DIR / "original_accuracy"))
    module.add_batch(**scores)
    expected = np.mean(np.array(scores["original_scores"]) > np.array(scores["negative_scores"]))
    assert module.compute()["original_accuracy"] == expected
