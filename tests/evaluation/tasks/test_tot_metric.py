"""SugarCrepe++'s text-only task: the evaluate module, the package's text-only scorer, and their agreement.

The folder's Space files, doctest, standalone run and input wording are checked with the other modules
in `tests/repository/test_metric_modules.py`."""

from __future__ import annotations

import evaluate
import numpy as np
import pytest
import torch
from datasets import Dataset

from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.tasks.text_only import (
    TEXT_ONLY_TIE_RULE,
    evaluate_text_only,
    text_only_correct,
    text_only_scores,
)
from hf_hardpos.scoring import ITMScorer
from tests.support.paths import REPO

MODULE_DIR = REPO / "hf_hardpos" / "evaluate_modules" / "text_only_accuracy"
NAME = "text_only_accuracy"


@pytest.fixture(scope="module")
def module():
    return evaluate.load(str(MODULE_DIR))


@pytest.fixture(scope="module")
def tie_heavy_scores():
    rng = np.random.default_rng(0)
    pair, caption_negative, positive_negative = rng.normal(size=(3, 400)).round(
        1
    )  # rounding makes ties common
    return {
        "positive_pair_scores": pair.tolist(),
        "caption_negative_scores": caption_negative.tolist(),
        "positive_negative_scores": positive_negative.tolist(),
    }


def test_module_equals_package_formula_on_ties(module, tie_heavy_scores):
    result = module.compute(**tie_heavy_scores)
    expected = text_only_correct(*(np.asarray(v) for v in tie_heavy_scores.values())).mean()
    assert list(result) == [NAME] and type(result[NAME]) is float
    assert result[NAME] == float(expected)
    pair = np.asarray(tie_heavy_scores["positive_pair_scores"])
    ties = (pair == np.asarray(tie_heavy_scores["caption_negative_scores"])).sum()
    assert ties > 0  # the comparison above covers ties


def test_strict_rule_by_hand(module):
    result = module.compute(
        positive_pair_scores=[0.9, 0.8, 0.7, 0.5],
        caption_negative_scores=[0.5, 0.8, 0.75, 0.4],
        positive_negative_scores=[0.6, 0.1, 0.2, 0.5],
    )
    assert result == {NAME: 0.25}  # row 1 right; row 2 ties cos(p1,n); row 3 loses; row 4 ties cos(p2,n)


def test_bootstrap_and_input_errors(module, tie_heavy_scores):
    result = module.compute(**tie_heavy_scores, bootstrap_samples=200, seed=1)
    assert result[f"{NAME}_ci_low"] <= result[NAME] <= result[f"{NAME}_ci_high"]
    with_nan = [float("nan")] + tie_heavy_scores["caption_negative_scores"][1:]
    bad = dict(tie_heavy_scores, caption_negative_scores=with_nan)
    with pytest.raises(ValueError, match="non-finite"):
        module.compute(**bad)
    with pytest.raises(ValueError, match="differ in length"):
        module.compute(
            **dict(tie_heavy_scores, positive_pair_scores=tie_heavy_scores["positive_pair_scores"][:-1])
        )
    with pytest.raises(ValueError, match="must hold numbers"):
        module.compute(**dict(tie_heavy_scores, positive_pair_scores=["0.3"] * 400))
    with pytest.raises(ValueError, match="`positive_negative_scores` is missing"):
        module.compute(positive_pair_scores=[0.1], caption_negative_scores=[0.0])


# ---- the package's text-only scorer ----------------------------------------------------------------


def _sc_pp_rows() -> Dataset:
    """SC++-shaped rows (no image needed); row 2 repeats row 0's caption, row 3 has p2 == p1 (a defect)."""
    return Dataset.from_dict(
        {
            "caption": [
                "a red cube left of a sphere",
                "a dog holding a cat",
                "a red cube left of a sphere",
                "a small cat",
            ],
            "hard_positive": [
                "a sphere right of a red cube",
                "a cat held by a dog",
                "left of a sphere a red cube",
                "a small cat",
            ],
            "hard_negative": [
                "a blue cube left of a sphere",
                "a cat holding a dog",
                "a red sphere left of a cube",
                "a large cat",
            ],
        }
    )


def test_text_only_scores_equal_naive_loop_and_module(model_and_processor, module):
    model, processor = model_and_processor
    dataset = _sc_pp_rows()
    scorer = ITMScorer(model, processor, batch_size=2, progress=False)
    scores = text_only_scores(scorer, dataset)

    def embed(text):
        with torch.no_grad():
            out = model.get_text_features(**processor.tokenizer([text], return_tensors="pt")).pooler_output[0]
        return torch.nn.functional.normalize(out, dim=-1)

    for row, example in enumerate(dataset):
        p1, p2, n = (
            embed(example["caption"]),
            embed(example["hard_positive"]),
            embed(example["hard_negative"]),
        )
        assert scores["positive_pair"][row] == pytest.approx(float(p1 @ p2), abs=1e-5)
        assert scores["caption_negative"][row] == pytest.approx(float(p1 @ n), abs=1e-5)
        assert scores["positive_negative"][row] == pytest.approx(float(p2 @ n), abs=1e-5)
    assert scores["positive_pair"][3] == pytest.approx(1.0, abs=1e-6)  # the defective row: p2 == p1

    result = evaluate_text_only(scorer, dataset)
    from_module = module.compute(
        positive_pair_scores=scores["positive_pair"],
        caption_negative_scores=scores["caption_negative"],
        positive_negative_scores=scores["positive_negative"],
    )
    assert result["text_only_accuracy"] == from_module[NAME]
    assert (result["num_examples"], result["tie_rule"]) == (4, TEXT_ONLY_TIE_RULE)


def test_text_only_needs_three_captions(model_and_processor):
    scorer = ITMScorer(*model_and_processor, progress=False)
    with pytest.raises(ValueError, match="hard_positive"):
        text_only_scores(scorer, _sc_pp_rows().remove_columns("hard_positive"))
    broken = Dataset.from_dict({"caption": ["a"], "hard_positive": [None], "hard_negative": ["b"]})
    with pytest.raises(UserInputError, match="row 0, column 'hard_positive'"):
        text_only_scores(scorer, broken)
