"""The scorer and metrics are model-agnostic: a tiny SigLIP and a tiny non-CLIP dual encoder (issue 11, item 5).

Each is scored through `ITMScorer`'s public API and compared with a naive per-row loop that follows
the model's own protocol (SigLIP: text padded to the context length, as it was trained; it pools the
last position, so padding changes its embeddings).
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

from hf_hardpos.metrics import compute_metrics
from hf_hardpos.scoring import ITMScorer
from hf_hardpos.synthetic.tiny_clip import train_clip_tokenizer
from tests.support.eval_data import WORDS, make_eval_set

CAPTION_COLUMNS = ("caption", "hard_negative", "hard_positive")
SIGLIP_CONTEXT = 16


@pytest.fixture(scope="module")
def tokenizer():
    """A CLIP-format BPE over the eval set's words (returns input_ids and attention_mask)."""
    return train_clip_tokenizer([" ".join(WORDS)] * 3, vocab_size=600)


@pytest.fixture(scope="module")
def siglip():
    # Like SiglipTokenizer (sentencepiece, not available offline), it returns only input_ids.
    tokenizer = train_clip_tokenizer([" ".join(WORDS)] * 3, vocab_size=600)
    tokenizer.model_input_names = ["input_ids"]
    torch.manual_seed(0)
    config = SiglipConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": SIGLIP_CONTEXT,
            "pad_token_id": tokenizer.pad_token_id,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": 32,
            "patch_size": 8,
        },
    )
    model = SiglipModel(config).eval()
    image_processor = SiglipImageProcessor(size={"height": 32, "width": 32})
    return model, types.SimpleNamespace(tokenizer=tokenizer, image_processor=image_processor)


class TinyDualEncoder(torch.nn.Module):
    """Not a transformers model: no config, returns plain tensors, mean-pools its inputs."""

    def __init__(self, vocab_size: int, dim: int = 24):
        super().__init__()
        torch.manual_seed(1)
        self.token_embedding = torch.nn.Embedding(vocab_size, dim)
        self.image_projection = torch.nn.Linear(3 * 8 * 8, dim)

    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        patches = torch.nn.functional.unfold(pixel_values, kernel_size=8, stride=8)  # (b, 3*8*8, n)
        return self.image_projection(patches.mean(-1))

    def get_text_features(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        embedded = self.token_embedding(input_ids) * mask.unsqueeze(-1)
        return embedded.sum(1) / mask.sum(1, keepdim=True)


def naive_scores(model, processor, dataset, column: str, **tokenizer_options) -> np.ndarray:
    out = []
    with torch.no_grad():
        for row in dataset:
            pixels = processor.image_processor(images=row["image"].convert("RGB"), return_tensors="pt")[
                "pixel_values"
            ]
            tokens = processor.tokenizer(
                [row[column]], return_tensors="pt", truncation=True, **tokenizer_options
            )
            image = model.get_image_features(pixel_values=pixels)
            text = model.get_text_features(**tokens)
            image = image if isinstance(image, torch.Tensor) else image.pooler_output
            text = text if isinstance(text, torch.Tensor) else text.pooler_output
            out.append(torch.nn.functional.cosine_similarity(image, text).item())
    return np.array(out)


def _assert_same_metrics(scores, expected) -> None:
    """Rates exactly (the strict inequalities see the same order), mean scores to float noise."""
    ours = compute_metrics(scores["caption"], scores["hard_negative"], scores["hard_positive"])
    reference = compute_metrics(expected["caption"], expected["hard_negative"], expected["hard_positive"])
    for name in ("original_accuracy", "augmented_accuracy", "brittleness", "num_examples"):
        assert ours[name] == reference[name], name
    for name in ("mean_original_score", "mean_negative_score", "mean_positive_score"):
        assert ours[name] == pytest.approx(reference[name], abs=1e-6), name


def test_siglip_is_scored_with_max_length_padding(siglip):
    model, processor = siglip
    dataset = make_eval_set(num_images=4, rows_per_image=2)
    scorer = ITMScorer(model, processor, batch_size=3, progress=False)
    assert scorer.max_length == SIGLIP_CONTEXT and scorer.settings()["text_padding"] == "max_length"
    scores = scorer.score(dataset)
    expected = {
        c: naive_scores(model, processor, dataset, c, padding="max_length", max_length=SIGLIP_CONTEXT)
        for c in CAPTION_COLUMNS
    }
    for column in CAPTION_COLUMNS:
        np.testing.assert_allclose(scores[column], expected[column], atol=1e-5)
    # SigLIP pools the last position: unpadded text would give other scores, so the padding is what matters.
    unpadded = naive_scores(model, processor, dataset, "caption")
    assert np.abs(unpadded - expected["caption"]).max() > 1e-3
    _assert_same_metrics(scores, expected)


def test_non_clip_dual_encoder_without_config(tokenizer):
    model = TinyDualEncoder(len(tokenizer)).eval()
    image_processor = SiglipImageProcessor(size={"height": 32, "width": 32})
    processor = types.SimpleNamespace(tokenizer=tokenizer, image_processor=image_processor)
    dataset = make_eval_set(num_images=5, rows_per_image=2, seed=3)
    scorer = ITMScorer(model, processor, batch_size=4, progress=False)
    assert scorer.max_length == tokenizer.model_max_length == 77  # no config: the tokenizer's context
    scores = scorer.score(dataset)
    expected = {c: naive_scores(model, processor, dataset, c) for c in CAPTION_COLUMNS}
    for column in CAPTION_COLUMNS:
        np.testing.assert_allclose(scores[column], expected[column], atol=1e-5)
    _assert_same_metrics(scores, expected)
    embeddings = scorer.encode_texts(["red cube", "blue sphere"])
    assert embeddings.dtype == torch.float32 and torch.allclose(
        embeddings.norm(dim=-1), torch.ones(2), atol=1e-5
    )


@pytest.mark.parametrize("pad_to_context", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_text_batches_are_padded_as_the_tokenizer_pads(model_and_processor, pad_to_context, side):
    """`ITMScorer._pad` (one numpy scatter per batch) against the tokenizer's own `pad`, for every padding
    a family can declare: to the longest or to the context, on either side, with the mask it returns."""
    import dataclasses

    model, processor = model_and_processor
    scorer = ITMScorer(model, processor, progress=False)
    scorer.text_inputs = dataclasses.replace(
        scorer.text_inputs, pad_to_context=pad_to_context, padding_side=side, pad_token_id=3
    )
    texts = ["a red cube", "the small dog beside a tall green tree", "dog", "a cube on a red dog"]
    ids = processor.tokenizer(texts)["input_ids"]
    padded = scorer._pad(ids)
    processor.tokenizer.pad_token_id = 3  # what the declared id is, for the reference
    expected = processor.tokenizer.pad(
        {"input_ids": ids},
        padding="max_length" if pad_to_context else "longest",
        max_length=scorer.max_length,
        padding_side=side,
        return_tensors="pt",
    )
    assert padded["input_ids"].tolist() == expected["input_ids"].tolist()
    assert padded["attention_mask"].tolist() == expected["attention_mask"].tolist()
    assert padded["input_ids"].dtype == padded["attention_mask"].dtype == torch.long
    assert padded["input_ids"].shape[1] == (scorer.max_length if pad_to_context else max(map(len, ids)))
