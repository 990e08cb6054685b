"""The scorer equals a naive per-row computation, encodes each distinct input once, and fails loudly."""

import numpy as np
import pytest
import torch
from datasets import Dataset, Image

from hf_hardpos.evaluation.tasks.hard_positive import evaluate_dataset
from hf_hardpos.metrics import compute_metrics
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set


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
    expected = {
        c: naive_scores(model, processor, dataset, c) for c in ("caption", "hard_negative", "hard_positive")
    }
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


def test_repeated_images_are_hashed_once_and_an_id_is_only_a_hint(model_and_processor, monkeypatch):
    """Rows repeating an image compare bytes with the last rows of that id instead of hashing again; a
    row with that id but other bytes (a SWAP crop) is still hashed and kept apart."""
    import hf_hardpos.image_keys as image_keys

    model, processor = model_and_processor
    dataset = make_eval_set(num_images=3, rows_per_image=4)
    other = make_eval_set(num_images=1, rows_per_image=1, seed=5)[0]["image"]
    dataset = dataset.map(lambda row, i: {"image_id": "1000"} if i == 5 else {}, with_indices=True)
    dataset = dataset.map(lambda row, i: {"image": other} if i == 5 else {}, with_indices=True)
    hashed: list[int] = []
    original = image_keys.image_key
    monkeypatch.setattr(
        image_keys, "image_key", lambda value, row: hashed.append(row) or original(value, row)
    )
    embeddings, slots = ITMScorer(model, processor, progress=False).embed_images(dataset)
    assert hashed == [0, 4, 5, 8]  # the first row of each image, and the odd one out
    assert len(embeddings) == 4 and len(set(slots[[0, 1, 2, 3]])) == 1 and slots[5] not in slots[[0, 4, 8]]


def test_several_negatives_and_missing_captions(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=2, rows_per_image=2)
    extra = ["red cube", None, "blue sphere", "large"]
    dataset = dataset.add_column("hard_negative_2", extra)
    scores = ITMScorer(model, processor, progress=False).score(
        dataset, caption_columns=["caption", "hard_negative"], optional_columns=["hard_negative_2"]
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


@pytest.mark.parametrize(
    "workers", [0, 1]
)  # in a DataLoader worker too: the one line is raised here, not wrapped
def test_unreadable_image_names_row_and_image_id(model_and_processor, workers):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=3, rows_per_image=1)
    rows = dataset.cast_column("image", Image(decode=False)).to_dict()
    rows["image"][2] = {"bytes": b"not an image at all", "path": None}
    broken = Dataset.from_dict(rows, features=dataset.cast_column("image", Image(decode=False)).features)
    with pytest.raises(ValueError, match=r"^cannot read the image of row 2 \(image_id='1002'\)"):
        ITMScorer(model, processor, num_workers=workers, progress=False).score(broken)


def test_empty_dataset_is_an_error(model_and_processor):
    model, processor = model_and_processor
    empty = make_eval_set(num_images=1, rows_per_image=1).select([])
    with pytest.raises(ValueError, match="no rows"):
        ITMScorer(model, processor, progress=False).score(empty)


def test_evaluate_dataset_matches_metrics_of_naive_scores(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set()
    result = evaluate_dataset(model, processor, dataset, progress=False)
    naive = {
        c: naive_scores(model, processor, dataset, c) for c in ("caption", "hard_negative", "hard_positive")
    }
    expected = compute_metrics(naive["caption"], naive["hard_negative"], naive["hard_positive"])
    for key in ("original_accuracy", "augmented_accuracy", "brittleness", "num_examples"):
        assert result[key] == expected[key]
    assert result["mean_original_score"] == pytest.approx(expected["mean_original_score"], abs=1e-6)


def test_default_precision_is_fp32_and_bf16_is_opt_in(model_and_processor):
    """bf16 autocast on CPU moves scores a little; the number of rows whose outcome flips is printed.

    Run `pytest -s -k bf16 tests/test_scoring.py` to see the count quoted in docs/evaluation.md (Precision).
    """
    from hf_hardpos.metrics import augmented_correct, brittle, original_correct

    model, processor = model_and_processor
    dataset = make_eval_set(num_images=40, rows_per_image=5, seed=3)
    fp32_scorer = ITMScorer(model, processor, progress=False)
    assert fp32_scorer.precision == "fp32" and fp32_scorer.settings()["allow_tf32"] is False
    fp32 = fp32_scorer.score(dataset)
    bf16 = ITMScorer(model, processor, precision="bf16", progress=False).score(dataset)
    c, n, p = (dataset_scores := [fp32[k] for k in ("caption", "hard_negative", "hard_positive")])
    c16, n16, p16 = [bf16[k] for k in ("caption", "hard_negative", "hard_positive")]
    assert not np.array_equal(c, c16), "bf16 autocast did not change any score: it did not run"
    np.testing.assert_allclose(c, c16, atol=0.05)
    flips = {
        "original": int((original_correct(c, n) != original_correct(c16, n16)).sum()),
        "augmented": int((augmented_correct(c, n, p) != augmented_correct(c16, n16, p16)).sum()),
        "brittle": int((brittle(c, n, p) != brittle(c16, n16, p16)).sum()),
    }
    print(
        f"\nbf16 vs fp32 on {len(dataset)} rows (tiny CLIP, CPU): outcome changes {flips}; "
        f"max |score diff| {max(np.abs(a - b).max() for a, b in zip(dataset_scores, (c16, n16, p16))):.4f}"
    )
    with pytest.raises(ValueError, match="precision"):
        ITMScorer(model, processor, precision="fp8")


def test_max_length_comes_from_the_model_and_truncation_is_counted(model_and_processor):
    model, processor = model_and_processor
    scorer = ITMScorer(model, processor, progress=False)
    assert scorer.max_length == model.config.text_config.max_position_embeddings
    dataset = make_eval_set(num_images=2, rows_per_image=2)
    long_prefix = " ".join(["red cube"] * 60)  # far beyond the context
    captions = list(dataset["caption"])
    positives = list(dataset["hard_positive"])
    captions[1] = long_prefix + " holding"
    positives[1] = long_prefix + " grasping"  # differs only after the context: same tokens kept
    captions[3] = long_prefix
    dataset = dataset.remove_columns(["caption", "hard_positive"])
    dataset = dataset.add_column("caption", captions).add_column("hard_positive", positives)
    scores = scorer.score(dataset)
    report = scores.truncation
    assert report.max_length == scorer.max_length
    assert report.truncated_captions == 3 and report.truncated_rows == [1, 3]
    assert report.identical_rows == [1]
    assert scores["caption"][1] == scores["hard_positive"][1]
    ids, counts = scorer.tokenize([captions[1], captions[0]])
    assert len(ids[0]) == scorer.max_length < counts[0] and len(ids[1]) == counts[1] <= scorer.max_length
    expected = processor.tokenizer([captions[1], captions[0]], truncation=True, max_length=scorer.max_length)
    assert ids == expected["input_ids"]  # the tokenizer's own cut, special tokens included


@pytest.mark.parametrize(
    "value, message",
    [
        (None, "row 2, column 'hard_negative': the caption is missing"),
        ("  ", "row 2, column 'hard_negative': the caption is empty"),
    ],
)
def test_missing_or_empty_caption_names_column_and_row(model_and_processor, value, message):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=2, rows_per_image=2)
    negatives = list(dataset["hard_negative"])
    negatives[2] = value
    dataset = dataset.remove_columns("hard_negative").add_column("hard_negative", negatives)
    with pytest.raises(ValueError, match=message):
        ITMScorer(model, processor, progress=False).score(dataset)
