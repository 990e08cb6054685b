"""The scorer equals a naive per-row computation, encodes each distinct input once, and fails loudly."""

import numpy as np
import pytest
import torch
from datasets import Dataset, Image
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.evaluation import evaluate_dataset
from hf_hardpos.metrics import compute_metrics
from hf_hardpos.scoring import ITMScorer

from eval_fixtures import make_eval_set


@pytest.fixture(scope="module")
def model_and_processor(tiny_clip_dir):
    return CLIPModel.from_pretrained(tiny_clip_dir).eval(), CLIPProcessor.from_pretrained(tiny_clip_dir)


def naive_scores(model, processor, dataset, column):
    """The reference protocol: every row's image and caption encoded on its own."""
    out = []
    with torch.no_grad():
        for row in dataset:
            pixels = processor(images=row["image"].convert("RGB"), return_tensors="pt")["pixel_values"]
            tokens = processor.tokenizer([row[column]], return_tensors="pt")
            img = model.get_image_features(pixel_values=pixels).pooler_output
            txt = model.get_text_features(**tokens).pooler_output
            out.append(torch.nn.functional.cosine_similarity(img, txt).item())
    return np.array(out)


def test_scores_equal_naive_loop_for_any_batch_size(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set()
    expected = {c: naive_scores(model, processor, dataset, c) for c in ("caption", "hard_negative", "hard_positive")}
    for batch_size in (1, 4, 64):
        scores = ITMScorer(model, processor, batch_size=batch_size, progress=False).score(dataset)
        for column, values in expected.items():
            np.testing.assert_allclose(scores[column], values, atol=1e-5)


def test_each_distinct_image_and_caption_encoded_once(model_and_processor, monkeypatch):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=5, rows_per_image=4)
    seen = {"images": 0, "texts": 0}
    original_image, original_text = model.get_image_features, model.get_text_features

    def count_images(pixel_values):
        seen["images"] += pixel_values.shape[0]
        return original_image(pixel_values=pixel_values)

    def count_texts(**kwargs):
        seen["texts"] += kwargs["input_ids"].shape[0]
        return original_text(**kwargs)

    monkeypatch.setattr(model, "get_image_features", count_images)
    monkeypatch.setattr(model, "get_text_features", count_texts)
    ITMScorer(model, processor, batch_size=3, progress=False).score(dataset)
    distinct_texts = set(dataset["caption"]) | set(dataset["hard_negative"]) | set(dataset["hard_positive"])
    assert seen["images"] == 5
    assert seen["texts"] == len(distinct_texts)


def test_same_image_id_different_pixels_are_different_images(model_and_processor):
    """SWAP crops several boxes out of one image: dedup must follow content, not image_id."""
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=2, rows_per_image=1)
    dataset = dataset.map(lambda row: {"image_id": "same"})
    scores = ITMScorer(model, processor, progress=False).score(dataset, caption_columns=["caption"])
    expected = naive_scores(model, processor, dataset, "caption")
    np.testing.assert_allclose(scores["caption"], expected, atol=1e-5)


def test_several_negatives_and_missing_captions(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=2, rows_per_image=2)
    extra = ["red cube", None, "blue sphere", "large"]
    dataset = dataset.add_column("hard_negative_2", extra)
    scores = ITMScorer(model, processor, progress=False).score(
        dataset, caption_columns=["caption", "hard_negative", "hard_negative_2"]
    )
    assert np.isnan(scores["hard_negative_2"][1]) and np.isfinite(scores["hard_negative_2"]).sum() == 3
    with pytest.raises(ValueError, match="non-finite"):
        compute_metrics(scores["caption"], scores["hard_negative_2"], scores["hard_negative"])


def test_dataloader_workers_give_the_same_scores(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=4, rows_per_image=2)
    single = ITMScorer(model, processor, progress=False).score(dataset)
    workers = ITMScorer(model, processor, num_workers=2, progress=False).score(dataset)
    for column in single:
        np.testing.assert_allclose(single[column], workers[column], atol=1e-6)


def test_missing_column_lists_expected_and_found(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=1, rows_per_image=1).remove_columns("hard_positive")
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['hard_positive'\].*found"):
        ITMScorer(model, processor, progress=False).score(dataset)


def test_unreadable_image_names_row_and_image_id(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=3, rows_per_image=1)
    rows = dataset.cast_column("image", Image(decode=False)).to_dict()
    rows["image"][2] = {"bytes": b"not an image at all", "path": None}
    broken = Dataset.from_dict(rows, features=dataset.cast_column("image", Image(decode=False)).features)
    with pytest.raises(ValueError, match=r"row 2 \(image_id='1002'\)"):
        ITMScorer(model, processor, progress=False).score(broken)


def test_empty_dataset_is_an_error(model_and_processor):
    model, processor = model_and_processor
    empty = make_eval_set(num_images=1, rows_per_image=1).select([])
    with pytest.raises(ValueError, match="no rows"):
        ITMScorer(model, processor, progress=False).score(empty)


def test_evaluate_dataset_matches_metrics_of_naive_scores(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set()
    result = evaluate_dataset(model, processor, dataset, progress=False)
    naive = {c: naive_scores(model, processor, dataset, c) for c in ("caption", "hard_negative", "hard_positive")}
    expected = compute_metrics(naive["caption"], naive["hard_negative"], naive["hard_positive"])
    for key in ("original_accuracy", "augmented_accuracy", "brittleness", "num_examples"):
        assert result[key] == expected[key]
    assert result["mean_original_score"] == pytest.approx(expected["mean_original_score"], abs=1e-6)
