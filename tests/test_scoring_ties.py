"""Exact ties stay exact whatever the batch size; a half-precision checkpoint is scored in float32."""

import io

import numpy as np
import pytest
import torch
from datasets import Dataset, Features, Image, Value
from PIL import Image as PILImage
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.metrics import compute_metrics
from hf_hardpos.model_source import ModelSource
from hf_hardpos.scoring import ITMScorer

# Pairs that differ as text but not as CLIP tokens (lower-cased, whitespace collapsed).
SAME_TOKENS = [
    ("red cube", "Red  cube "),
    ("a blue sphere", "A blue  SPHERE"),
    ("small cube left", " small cube left"),
]


def _tie_set(rows: int = 60, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    data = {"image": [], "caption": [], "hard_negative": [], "hard_positive": []}
    for row in range(rows):
        buffer = io.BytesIO()
        PILImage.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(buffer, format="PNG")
        caption, negative = SAME_TOKENS[row % len(SAME_TOKENS)]
        data["image"].append({"bytes": buffer.getvalue(), "path": None})
        data["caption"].append(caption)
        data["hard_negative"].append(negative)
        data["hard_positive"].append(f"{caption} number {row}")  # other lengths: other padding per batch
    features = Features({c: Value("string") for c in data if c != "image"} | {"image": Image()})
    return Dataset.from_dict(data, features=features)


def test_identical_token_captions_are_exact_ties_at_every_batch_size(model_and_processor):
    model, processor = model_and_processor
    dataset = _tie_set()
    metrics = {}
    for batch_size in (1, 7, 64):
        scores = ITMScorer(model, processor, batch_size=batch_size, progress=False).score(dataset)
        np.testing.assert_array_equal(scores["caption"], scores["hard_negative"])  # bit-identical ties
        metrics[batch_size] = compute_metrics(
            scores["caption"], scores["hard_negative"], scores["hard_positive"]
        )
    assert metrics[1]["original_accuracy"] == 0.0  # a tie is not a win (strict rule)
    rates = [{k: v for k, v in m.items() if not k.startswith("mean_")} for m in metrics.values()]
    assert rates[0] == rates[1] == rates[2]
    # Scores themselves move only at float32 rounding with the batch (image batches of other shapes).
    assert max(abs(metrics[1][k] - metrics[b][k]) for b in (7, 64) for k in metrics[1]) < 1e-6


def test_texts_with_the_same_tokens_are_encoded_once(model_and_processor, monkeypatch):
    model, processor = model_and_processor
    seen = []
    original = model.get_text_features

    def count(**kwargs):
        seen.append(kwargs["input_ids"].shape[0])
        return original(**kwargs)

    monkeypatch.setattr(model, "get_text_features", count)
    embeddings = ITMScorer(model, processor, batch_size=2, progress=False).encode_texts(
        [t for p in SAME_TOKENS for t in p]
    )
    assert sum(seen) == len(SAME_TOKENS)
    assert torch.equal(embeddings[0], embeddings[1]) and not torch.equal(embeddings[0], embeddings[2])


@pytest.fixture(scope="module")
def fp16_model_dir(tiny_clip_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fp16_clip")
    CLIPModel.from_pretrained(tiny_clip_dir).half().save_pretrained(folder)
    CLIPProcessor.from_pretrained(tiny_clip_dir).save_pretrained(folder)
    return folder


def test_half_precision_checkpoint_is_scored_in_float32(fp16_model_dir):
    model, _ = ModelSource.resolve(str(fp16_model_dir)).load()
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_half_precision_checkpoint_scores_equal_its_float32_upcast(fp16_model_dir, tmp_path):
    dataset = _tie_set(rows=12)
    report = evaluate_model(str(fp16_model_dir), dataset, progress=False, log=lambda m: None, batch_size=5)
    upcast = CLIPModel.from_pretrained(fp16_model_dir, dtype=torch.float16).float().eval()
    processor = CLIPProcessor.from_pretrained(fp16_model_dir)
    expected = ITMScorer(upcast, processor, batch_size=5, progress=False).score(dataset)
    np.testing.assert_array_equal(report.scores["default"]["positive"], expected["hard_positive"])
    assert report.run["settings"]["precision"] == "fp32"
