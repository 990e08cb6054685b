"""Caption selection (SugarCrepe, ARO) and Winoground: scores equal a naive loop, outcomes are strict."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from datasets import Dataset, Image, Value

from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.tasks.aro import ARO_MACRO, ARO_VG_RELATION_EXCLUDED
from hf_hardpos.evaluation.tasks.caption_selection import evaluate_caption_selection
from hf_hardpos.evaluation.tasks.selection import (
    MacroProtocol,
    macro_accuracy,
    negative_columns_of,
    selection_correct,
    selection_scores,
)
from hf_hardpos.evaluation.tasks.sugarcrepe import SUGARCREPE_CATEGORIES
from hf_hardpos.evaluation.tasks.winoground import (
    evaluate_winoground,
    winoground_outcomes,
)
from hf_hardpos.scoring import ITMScorer
from tests.support.caption_selection import make_selection_set, make_winoground


@pytest.fixture(scope="module")
def scorer(model_and_processor):
    return ITMScorer(*model_and_processor, batch_size=3, progress=False)


def naive_image(model, processor, image) -> torch.Tensor:
    with torch.no_grad():
        pixels = processor(images=image.convert("RGB"), return_tensors="pt")["pixel_values"]
        return torch.nn.functional.normalize(
            model.get_image_features(pixel_values=pixels).pooler_output[0], dim=-1
        )


def naive_text(model, processor, text: str) -> torch.Tensor:
    with torch.no_grad():
        tokens = processor.tokenizer([text], return_tensors="pt")
        return torch.nn.functional.normalize(model.get_text_features(**tokens).pooler_output[0], dim=-1)


def naive_selection(model, processor, dataset: Dataset) -> np.ndarray:
    """One row at a time: candidates in column order, NaN for a missing one."""
    negative_columns = negative_columns_of(dataset)
    out = []
    for row in dataset:
        image = naive_image(model, processor, row["image"])
        candidates = [row["caption"]]
        for column in negative_columns:
            candidates.extend(row[column] if isinstance(row[column], list) else [row[column]])
        out.append(
            [np.nan if c is None else float(image @ naive_text(model, processor, c)) for c in candidates]
        )
    width = max(len(r) for r in out)
    return np.array([r + [np.nan] * (width - len(r)) for r in out])


@pytest.mark.parametrize("num_negatives, as_list", [(1, False), (4, False), (4, True)])
def test_selection_scores_equal_naive_loop(model_and_processor, scorer, num_negatives, as_list):
    model, processor = model_and_processor
    dataset = make_selection_set(7, num_negatives, seed=num_negatives, as_list=as_list)
    scores = selection_scores(scorer, dataset)
    expected = naive_selection(model, processor, dataset)
    assert scores.shape == (7, 1 + num_negatives)
    np.testing.assert_array_equal(np.isnan(scores), np.isnan(expected))
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def test_selection_is_strict_by_hand():
    nan = float("nan")
    scores = np.array(
        [
            [0.5, 0.4, nan, nan],  # SugarCrepe / VG row: right
            [0.5, 0.5, nan, nan],  # tie with the negative: wrong
            [0.6, 0.2, 0.61, 0.1],  # Order row: one of 4 negatives higher: wrong
            [0.6, 0.6, 0.1, 0.1],  # tie for the maximum: the true one is not the unique max: wrong
            [0.6, 0.2, nan, 0.5],  # a missing candidate is ignored: right
        ]
    )
    assert selection_correct(scores).tolist() == [True, False, False, False, True]


def test_evaluate_caption_selection_aggregates(model_and_processor, scorer):
    model, processor = model_and_processor
    subsets = {
        "replace_att": make_selection_set(6, 1, seed=10),
        "replace_obj": make_selection_set(4, 1, seed=11),
        "swap_att": make_selection_set(5, 1, seed=12),
    }
    result = evaluate_caption_selection(scorer, subsets, categories=SUGARCREPE_CATEGORIES)
    accuracy = {}
    for name, dataset in subsets.items():
        expected = naive_selection(model, processor, dataset)
        accuracy[name] = float(np.mean(expected[:, 0] > expected[:, 1]))
        assert result["results"][name]["accuracy"] == accuracy[name]
        assert result["results"][name]["num_examples"] == len(dataset)
        assert result["results"][name]["num_candidates"] == 2
    aggregates = result["aggregates"]
    all_names = "replace_att,replace_obj,swap_att"
    assert aggregates[f"mean({all_names})"]["accuracy"] == pytest.approx(np.mean(list(accuracy.values())))
    pooled = (6 * accuracy["replace_att"] + 4 * accuracy["replace_obj"] + 5 * accuracy["swap_att"]) / 15
    assert aggregates[f"pooled({all_names})"]["accuracy"] == pytest.approx(pooled)
    assert aggregates["replace=mean(replace_att,replace_obj)"]["accuracy"] == pytest.approx(
        (accuracy["replace_att"] + accuracy["replace_obj"]) / 2
    )
    assert aggregates["swap=mean(swap_att)"]["num_examples"] == 5
    assert not any(key.startswith("add=") for key in aggregates)  # no add_* subset evaluated
    assert "strict" in result["tie_rule"] and "unweighted mean" in result["aggregation"]


def test_macro_accuracy_over_groups(scorer):
    dataset = make_selection_set(8, 1, seed=13)
    dataset = dataset.add_column(
        "relation_name", ["on", "on", "on", "left of", "left of", "with", "with", "with"]
    )
    protocol = MacroProtocol(column="relation_name", min_group_size=3, exclude=("with",))
    result = evaluate_caption_selection(scorer, {"vg_relation": dataset}, macro={"vg_relation": protocol})
    correct = selection_correct(selection_scores(scorer, dataset))
    subset = result["results"]["vg_relation"]
    # only "on" has >= 3 rows and is not excluded
    assert subset["macro_accuracy"] == pytest.approx(correct[:3].mean()) and subset["num_groups"] == 1
    assert subset["accuracy"] == pytest.approx(correct.mean())
    assert "'relation_name'" in subset["macro_protocol"] and "macro_protocol" in result["aggregation"]


def test_aro_protocol_groups_attribute_pairs():
    correct = np.array([True, False, True, True, False, True])
    pairs = [["white", "black"]] * 2 + [["red", "blue"]] * 4  # VG-Attribution: a list of two adjectives
    result = macro_accuracy(correct, pairs, MacroProtocol(column="attributes", min_group_size=2))
    assert result["macro_accuracy"] == pytest.approx((0.5 + 0.75) / 2) and result["num_groups"] == 2
    assert macro_accuracy(correct, pairs, ARO_MACRO["vg_attribution"]) == {}  # no pair has 25 rows
    assert len(ARO_VG_RELATION_EXCLUDED) == len(set(ARO_VG_RELATION_EXCLUDED)) == 157
    assert "on" not in ARO_VG_RELATION_EXCLUDED and "next to" in ARO_VG_RELATION_EXCLUDED


def test_selection_errors_name_the_problem(scorer):
    dataset = make_selection_set(3, 1, seed=14)
    with pytest.raises(UserInputError, match="no candidate caption columns"):
        selection_scores(scorer, dataset.remove_columns("hard_negative"))
    blank = dataset.cast_column("hard_negative", Value("string")).map(
        lambda row, i: {"hard_negative": None if i == 1 else row["hard_negative"]}, with_indices=True
    )
    with pytest.raises(UserInputError, match="row 1: no other candidate"):
        selection_scores(scorer, blank, what="subset 'x'")


# ---- Winoground ------------------------------------------------------------------------------------


def test_winoground_scores_by_hand():
    # rows: all right / text wrong (image 0 prefers caption 1) / image wrong (caption 1 prefers image 0)
    # / a tie between the captions on image 0 (text wrong) / both wrong
    c0_i0 = np.array([0.9, 0.3, 0.5, 0.5, 0.1])
    c1_i0 = np.array([0.1, 0.4, 0.4, 0.5, 0.9])
    c0_i1 = np.array([0.2, 0.1, 0.3, 0.1, 0.9])
    c1_i1 = np.array([0.8, 0.8, 0.35, 0.8, 0.1])
    outcomes = winoground_outcomes(c0_i0, c1_i0, c0_i1, c1_i1)
    assert outcomes["text_score"].tolist() == [True, False, True, False, False]
    assert outcomes["image_score"].tolist() == [True, True, False, True, False]
    assert outcomes["group_score"].tolist() == [True, False, False, False, False]


def _unit(vector: list[float]) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.tensor(vector, dtype=torch.float32), dim=-1)


class HandScorer:
    """Embeddings chosen by hand: images and captions looked up by content, so scores are known."""

    def __init__(self, image_vectors: dict[bytes, list[float]], text_vectors: dict[str, list[float]]):
        self.image_vectors = {k: _unit(v) for k, v in image_vectors.items()}
        self.text_vectors = {k: _unit(v) for k, v in text_vectors.items()}

    def encode_texts(self, texts):
        return torch.stack([self.text_vectors[t] for t in texts])

    def embed_images(self, dataset, image_column):
        cells = dataset.cast_column(image_column, Image(decode=False))[image_column]
        return torch.stack([self.image_vectors[c["bytes"]] for c in cells]), np.arange(len(cells))


def _at(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_winoground_fixture_by_hand():
    """Five examples with 2-d embeddings set by angle, so each cosine is cos(angle difference).

    S[c][i] = s(caption_c, image_i). text right: S00 > S10 and S11 > S01; image right: S00 > S01
    and S11 > S10.
    """
    dataset = make_winoground(5)
    raw = list(
        dataset.cast_column("image_0", Image(decode=False)).cast_column("image_1", Image(decode=False))
    )
    plan = [  # (image_0, image_1, caption_0, caption_1)
        (_at(0), _at(90), _at(10), _at(80)),  # S = [[c10, c80], [c80, c10]]: text, image, group right
        (_at(0), _at(40), _at(22), _at(50)),  # S00=c22 > S10=c50, S11=c10 > S01=c18: text right;
        #                                        S00=c22 < S01=c18: image wrong
        ([1, 0], [0, 1], [1, 1], [1, 1]),  # identical captions: every comparison ties, all wrong
        (_at(90), _at(0), _at(10), _at(80)),  # images swapped: S00=c80 < S10=c10, S01=c10 > S00: all wrong
        (_at(22), _at(50), _at(0), _at(40)),  # row 1 with roles swapped: text wrong (S00=c22 < S10=c18),
        #                                        image right (c22 > c50 and c10 > c18)
    ]
    images, texts = {}, {}
    for row, (i0, i1, c0, c1) in zip(raw, plan):
        images[row["image_0"]["bytes"]], images[row["image_1"]["bytes"]] = i0, i1
        texts[row["caption_0"]], texts[row["caption_1"]] = c0, c1
    assert len(texts) == 10 and len(images) == 10  # every caption and image distinct
    result = evaluate_winoground(HandScorer(images, texts), dataset)
    # text [T, T, F, F, F], image [T, F, F, F, T], group [T, F, F, F, F]
    assert (result["text_score"], result["image_score"], result["group_score"]) == (0.4, 0.4, 0.2)
    by_tag = result["by_collapsed_tag"]  # tags cycle Object, Relation, Both
    assert by_tag["Object"] == {"text_score": 0.5, "image_score": 0.5, "group_score": 0.5, "num_examples": 2}
    assert by_tag["Relation"] == {
        "text_score": 0.5,
        "image_score": 0.5,
        "group_score": 0.0,
        "num_examples": 2,
    }
    assert by_tag["Both"] == {"text_score": 0.0, "image_score": 0.0, "group_score": 0.0, "num_examples": 1}


def test_winoground_fixture_equals_naive_loop(model_and_processor, scorer):
    model, processor = model_and_processor
    dataset = make_winoground(24, seed=3)
    result = evaluate_winoground(scorer, dataset)
    text, image, group = [], [], []
    for row in dataset:
        images = [naive_image(model, processor, row[f"image_{i}"]) for i in (0, 1)]
        captions = [naive_text(model, processor, row[f"caption_{c}"]) for c in (0, 1)]
        s = {(c, i): float(captions[c] @ images[i]) for c in (0, 1) for i in (0, 1)}
        text.append(s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1])
        image.append(s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0])
        group.append(text[-1] and image[-1])
    assert any(text) and any(image)  # the random tiny model gets some right: the comparison can fail
    assert result["text_score"] == np.mean(text)
    assert result["image_score"] == np.mean(image)
    assert result["group_score"] == np.mean(group)
    assert result["num_examples"] == 24
    by_tag = result["by_collapsed_tag"]
    assert set(by_tag) == {"Both", "Object", "Relation"}
    assert by_tag["Object"]["text_score"] == np.mean(text[0::3])
    assert sum(v["num_examples"] for v in by_tag.values()) == 24
    assert "strict" in result["tie_rule"]


def test_winoground_requires_its_columns(scorer):
    with pytest.raises(ValueError, match="caption_1"):
        evaluate_winoground(scorer, make_winoground(2).remove_columns("caption_1"))
