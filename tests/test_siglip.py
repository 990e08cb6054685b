"""SigLIP / SigLIP 2 models are scored the way they were trained (issue 24, item 3).

The score is still the cosine of L2-normalised features (a sigmoid model's logit is an affine map of
it). The text side follows the original protocol, restated here independently of the scorer:
big_vision (google-research/big_vision, `models/proj/image_text/text_transformer.py` @0127fb6, pool
"last") and open_clip (`tokenizer.py` SigLipTokenizer, open_clip 3.3.0: `padding="max_length"`,
`padding_side="right"`, ids only) pad the ids on the right to the text context (64) and pass no
attention mask, and the model pools the last position. transformers 5's `Siglip2Tokenizer` (the
SigLIP 2 tokenizer used here, built offline: Gemma-style BPE with lowercasing) defaults to left
padding and returns an attention mask, so following the tokenizer's defaults would give other
scores; the test shows they differ, so it can fail.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import (
    SiglipConfig,
    SiglipImageProcessor,
    SiglipModel,
    SiglipProcessor,
)
from transformers.models.siglip2.tokenization_siglip2 import Siglip2Tokenizer

from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.metrics import compute_metrics
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import WORDS, make_eval_set

CONTEXT = 64  # SigLIP's and SigLIP 2's text context
COLUMNS = ("caption", "hard_negative", "hard_positive")


def _siglip2_tokenizer() -> Siglip2Tokenizer:
    """transformers' SigLIP 2 tokenizer over a BPE trained on the eval set's words (no download)."""
    bpe = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    bpe.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(" ", "▁")])
    bpe.pre_tokenizer = pre_tokenizers.Split(pattern="▁", behavior="merged_with_next")
    trainer = trainers.BpeTrainer(
        vocab_size=120, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    )
    bpe.train_from_iterator([" " + " ".join(WORDS)] * 5, trainer)
    vocab = bpe.get_vocab()
    for byte in range(256):  # Gemma's byte fallback tokens
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    return Siglip2Tokenizer(vocab=vocab, merges=_merges(bpe))


def _merges(bpe: Tokenizer) -> list[tuple[str, str]]:
    merges = json.loads(bpe.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


@pytest.fixture(scope="module")
def siglip():
    tokenizer = _siglip2_tokenizer()
    torch.manual_seed(0)
    config = SiglipConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": CONTEXT,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
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
    processor = SiglipProcessor(
        image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tokenizer
    )
    return model, processor


def _as_trained(model, processor, dataset, column: str, follow_tokenizer: bool = False) -> np.ndarray:
    """Per-row cosine, the SigLIP protocol restated: ids padded right to 64 with the pad id, no mask.

    `follow_tokenizer=True` instead pads and masks as the tokenizer's defaults say (left, with mask).
    """
    tokenizer = processor.tokenizer
    out = []
    with torch.no_grad():
        for row in dataset:
            pixels = processor.image_processor(images=row["image"].convert("RGB"), return_tensors="pt")[
                "pixel_values"
            ]
            image = model.get_image_features(pixel_values=pixels).pooler_output
            if follow_tokenizer:
                tokens = tokenizer(
                    [row[column]],
                    padding="max_length",
                    max_length=CONTEXT,
                    truncation=True,
                    return_tensors="pt",
                )
                text = model.get_text_features(**tokens).pooler_output
            else:
                ids = tokenizer(row[column], truncation=True, max_length=CONTEXT)["input_ids"]
                padded = torch.full((1, CONTEXT), tokenizer.pad_token_id, dtype=torch.long)
                padded[0, : len(ids)] = torch.tensor(ids)
                text = model.get_text_features(input_ids=padded).pooler_output
            out.append(torch.nn.functional.cosine_similarity(image, text).item())
    return np.array(out)


def test_siglip2_tokenizer_defaults_are_not_the_training_protocol(siglip):
    _, processor = siglip
    assert processor.tokenizer.padding_side == "left"
    assert "attention_mask" in processor.tokenizer.model_input_names
    # SigLIP 2's tokenizer lowercases: these captions are one token sequence, so one embedding.
    assert processor.tokenizer("A Red CUBE")["input_ids"] == processor.tokenizer("a red cube")["input_ids"]


def test_siglip_is_scored_as_trained(siglip):
    model, processor = siglip
    dataset = make_eval_set(num_images=4, rows_per_image=2, seed=5)
    scorer = ITMScorer(model, processor, batch_size=3, progress=False)
    assert scorer.max_length == CONTEXT and scorer.settings()["text_padding"] == "max_length"
    scores = scorer.score(dataset)
    expected = {column: _as_trained(model, processor, dataset, column) for column in COLUMNS}
    for column in COLUMNS:
        np.testing.assert_allclose(scores[column], expected[column], rtol=0, atol=1e-5)
    # The tokenizer's own defaults (left padding, attention mask) would have given other scores.
    defaults = _as_trained(model, processor, dataset, "caption", follow_tokenizer=True)
    assert np.abs(defaults - expected["caption"]).max() > 1e-3
    ours = compute_metrics(*(scores[c] for c in COLUMNS))
    reference = compute_metrics(*(expected[c] for c in COLUMNS))
    for name in ("original_accuracy", "augmented_accuracy", "brittleness", "num_examples"):
        assert ours[name] == reference[name], name


def test_a_saved_siglip_folder_evaluates_end_to_end(siglip, tmp_path):
    """`hardpos eval --model FOLDER` on a SigLIP folder: AutoModel/AutoProcessor offline, context 64."""
    model, processor = siglip
    folder = tmp_path / "tiny-siglip"
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    dataset = make_eval_set(num_images=3, rows_per_image=2, seed=6)
    report = evaluate_model(str(folder), dataset, progress=False, batch_size=4, log=lambda message: None)
    assert report.run["settings"]["max_length"] == CONTEXT
    ((config, result),) = report.results.items()
    expected = compute_metrics(*(_as_trained(model, processor, dataset, c) for c in COLUMNS))
    for name in ("original_accuracy", "augmented_accuracy", "brittleness", "num_examples"):
        assert result[name] == expected[name], name
    assert result["mean_original_score"] == pytest.approx(expected["mean_original_score"], abs=1e-6)
