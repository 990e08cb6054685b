"""LoRA on both CLIP towers: only adapters train, the adapter saves, and merging gives a plain CLIPModel."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch
from datasets import Dataset, Features, Image, Value
from PIL import Image as PILImage

from hf_hardpos import columns
from hf_hardpos.training import HardPosTrainer, HardPosTrainingArguments, apply_lora, merge_lora


def _rows(n: int) -> Dataset:
    rng = np.random.default_rng(0)
    data = {
        "image": [PILImage.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(n)],
        "caption": [f"a red cube and a blue sphere number {i}" for i in range(n)],
        columns.HARD_POSITIVE_REPLACE: [f"a red block and a blue sphere number {i}" for i in range(n)],
        columns.HARD_POSITIVE_SWAP: [None if i % 2 else f"a blue sphere and a red cube number {i}" for i in range(n)],
        columns.HARD_NEGATIVE_REPLACE: [f"a green cube and a blue sphere number {i}" for i in range(n)],
        columns.HARD_NEGATIVE_SWAP: [f"a blue cube and a red sphere number {i}" for i in range(n)],
    }
    features = Features({"image": Image(), **{k: Value("string") for k in data if k != "image"}})
    return Dataset.from_dict(data, features=features)


def _features(model, processor, data: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = processor(text=list(data["caption"]), images=list(data["image"]), return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.eval()(**inputs)
    return out.image_embeds, out.text_embeds


@pytest.fixture()
def tiny(tiny_clip_dir):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)


def test_apply_lora_wraps_both_towers_and_trains_only_adapters(tiny):
    model, _ = tiny
    peft_model = apply_lora(model, r=4, alpha=8)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert any("vision_model" in n for n in trainable) and any("text_model" in n for n in trainable)
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert any(f"{proj}.lora_A" in n for n in trainable), proj
    assert not peft_model.get_base_model().logit_scale.requires_grad


def test_lora_training_saves_adapter_and_merges_to_plain_clip(tiny, tmp_path):
    from peft import PeftModel
    from transformers import CLIPModel, CLIPProcessor

    model, processor = tiny
    base_copy = copy.deepcopy(model)
    args = HardPosTrainingArguments(
        output_dir=str(tmp_path / "run"), use_lora=True, lora_r=4, lora_alpha=8,
        lora_target_modules=["q_proj", "v_proj"], max_steps=3, per_device_train_batch_size=8,
        learning_rate=1e-2, save_strategy="steps", save_steps=3, logging_steps=1, report_to="none",
        disable_tqdm=True, use_cpu=True,
    )
    data = _rows(8)
    trainer = HardPosTrainer(model=model, args=args, train_dataset=data, processor=processor)
    trainer.train()

    peft_model = trainer.model
    frozen = {n: p for n, p in peft_model.get_base_model().named_parameters() if "lora_" not in n}
    for name, param in base_copy.named_parameters():
        # peft moves a wrapped Linear's weights to `<name>.base_layer.*`
        key = name if name in frozen else re.sub(r"\.(weight|bias)$", r".base_layer.\1", name)
        torch.testing.assert_close(frozen[key], param, rtol=0, atol=0, msg=f"{name} changed under LoRA")
    lora_b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in lora_b)  # B starts at zero: the adapters did learn

    checkpoint = tmp_path / "run" / "checkpoint-3"
    assert (checkpoint / "adapter_model.safetensors").is_file() and (checkpoint / "adapter_config.json").is_file()
    assert not (checkpoint / "model.safetensors").exists()
    from huggingface_hub import ModelCard

    adapter_card = ModelCard.load(checkpoint / "README.md")
    assert adapter_card.data.library_name == "peft" and "lora" in adapter_card.data.tags
    assert "rank 4, alpha 8" in adapter_card.text

    expected = _features(peft_model, processor, data)
    merged_dir = trainer.save_merged(str(tmp_path / "merged"))
    merged = CLIPModel.from_pretrained(merged_dir)
    assert type(merged) is CLIPModel
    assert not any("lora" in n for n, _ in merged.named_parameters())
    got = _features(merged, CLIPProcessor.from_pretrained(merged_dir), data)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert ModelCard.load(f"{merged_dir}/README.md").data.library_name == "transformers"
    assert trainer.model is peft_model and any("lora_" in n for n, _ in trainer.model.named_parameters())

    # The saved adapter on top of the base reproduces the same model (SPEC section 8's path).
    reloaded = PeftModel.from_pretrained(copy.deepcopy(base_copy), str(checkpoint)).merge_and_unload()
    for a, b in zip(_features(reloaded, processor, data), expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_merge_lora_rejects_a_plain_model(tiny):
    with pytest.raises(TypeError, match="expects a peft model"):
        merge_lora(tiny[0])
