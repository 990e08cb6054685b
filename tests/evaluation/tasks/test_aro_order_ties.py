"""ARO's COCO/Flickr30k-Order figure follows ARO's argmax rule (the true caption, listed first, wins ties);
the strict figure stands beside it."""

import numpy as np
import pytest
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.evaluation.tasks.aro import ARO_TRUE_CAPTION_FIRST
from hf_hardpos.evaluation.tasks.caption_selection import evaluate_caption_selection
from hf_hardpos.evaluation.tasks.selection import selection_correct
from hf_hardpos.scoring import ITMScorer
from tests.support.caption_selection import make_selection_set


def aro_order_correct(scores: np.ndarray) -> np.ndarray:
    """ARO's rule restated (mertyg/vision-language-models-are-bows, dataset_zoo/aro_datasets.py,
    COCO_Order/Flickr30k_Order.evaluate_scores at commit 09e1fcf): `preds = np.argmax(scores, axis=-1)`
    over the candidates [caption, *perturbations]; a row is correct when `preds == 0`."""
    return np.argmax(scores, axis=-1) == 0


def test_selection_rule_equals_aro_argmax_on_tie_heavy_float64_scores():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 3, size=(400, 5)).astype(np.float64)  # many exact ties
    assert (scores[:, :1] == scores[:, 1:]).any(axis=1).sum() > 100
    np.testing.assert_array_equal(
        selection_correct(scores, ties_count_as_correct=True), aro_order_correct(scores)
    )
    strict = selection_correct(scores)
    assert strict.sum() < aro_order_correct(scores).sum()


@pytest.fixture(scope="module")
def scorer(tiny_clip_dir):
    model, processor = CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)
    return ITMScorer(model, processor, batch_size=4, progress=False)


def test_order_subsets_report_aro_accuracy_and_strict_beside_it(scorer):
    base = make_selection_set(8, 1, seed=3)
    negatives = list(base["hard_negative"])
    negatives[:4] = base["caption"][:4]  # a perturbation equal to the caption: an exact tie
    tied = base.remove_columns("hard_negative").add_column("hard_negative", negatives)
    result = evaluate_caption_selection(
        scorer, {"coco_order": tied, "other": tied}, true_caption_first=ARO_TRUE_CAPTION_FIRST
    )
    order, other = result["results"]["coco_order"], result["results"]["other"]
    assert order["accuracy"] - order["accuracy_strict"] == pytest.approx(4 / 8)
    assert other["accuracy"] == order["accuracy_strict"] and "accuracy_strict" not in other
    assert "coco_order" in result["tie_rule"]
