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
from hf_hardpos.training import (
    HardPosTrainer,
    HardPosTrainingArguments,
    apply_lora,
    merge_lora,
)


def _rows(n: int) -> Dataset:
    rng = np.random.default_rng(0)
    data = {
        "image": [PILImage.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(n)],
        "caption": [f"a red cube and a blue sphere number {i}" for i in range(n)],
        columns.HARD_POSITIVE_REPLACE: [f"a red block and a blue sphere number {i}" for i in range(n)],
        columns.HARD_POSITIVE_SWAP: [
            None if i % 2 else f"a blue sphere and a red cube number {i}" for i in range(n)
        ],
        columns.HARD_NEGATIVE_REPLACE: [f"a green cube and a blue sphere number {i}" for i in range(n)],
        columns.HARD_NEGATIVE_SWAP: [f"a blue cube and a red sphere number {i}" for i in range(n)],
    }
    features = Features({"image": Image(), **{k: Value("string") for k in data if k != "image"}})
    return Dataset.from_dict(data, features=features)


def _features(model, processor, data: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = processor(
        text=list(data["caption"]), images=list(data["image"]), return_tensors="pt", padding=True
    )
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
        output_dir=str(tmp_path / "run"),
        use_lora=True,
        lora_r=4,
        lora_alpha=8,
        lora_target_modules=["q_proj", "v_proj"],
        max_steps=3,
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        save_strategy="steps",
        save_steps=3,
        logging_steps=1,
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
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
    assert (checkpoint / "adapter_model.safetensors").is_file() and (
        checkpoint / "adapter_config.json"
    ).is_file()
    assert not (checkpoint / "model.safetensors").exists()
    from huggingface_hub import ModelCard

    from hf_hardpos.training.model_card import card_contents

    adapter_card = ModelCard.load(checkpoint / "README.md")
    assert adapter_card.data.library_name == "peft" and "lora" in adapter_card.data.tags
    lora = card_contents(trainer, trainer.model_card_data)[1]["lora"]
    assert lora["summary"] == "rank 4, alpha 8, dropout 0.0, target modules ['q_proj', 'v_proj']"
    trainable, total = peft_model.get_nb_trainable_parameters()
    assert (lora["trainable_parameters"], lora["total_parameters"]) == (f"{trainable:,}", f"{total:,}")
    assert lora["summary"] in adapter_card.text

    expected = _features(peft_model, processor, data)
    merged_dir = trainer.save_merged(str(tmp_path / "merged"))
    merged = CLIPModel.from_pretrained(merged_dir)
    assert type(merged) is CLIPModel
    assert not any("lora" in n for n, _ in merged.named_parameters())
    got = _features(merged, CLIPProcessor.from_pretrained(merged_dir), data)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    merged_card = ModelCard.load(f"{merged_dir}/README.md")
    assert merged_card.data.library_name == "transformers" and "lora" in merged_card.data.tags
    # The merged export still says how its weights were trained: rank, alpha, targets, trainable counts.
    assert card_contents(trainer, trainer.model_card_data, is_adapter=False)[1]["lora"] == lora
    assert lora["summary"] in merged_card.text
    assert (
        f"trainable parameters: {lora['trainable_parameters']} of {lora['total_parameters']}"
        in merged_card.text
    )
    assert trainer.model is peft_model and any("lora_" in n for n, _ in trainer.model.named_parameters())

    # The saved adapter on top of the base reproduces the same model (peft's loading path).
    reloaded = PeftModel.from_pretrained(copy.deepcopy(base_copy), str(checkpoint)).merge_and_unload()
    for a, b in zip(_features(reloaded, processor, data), expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_merge_lora_rejects_a_plain_model(tiny):
    with pytest.raises(TypeError, match="expects a peft model"):
        merge_lora(tiny[0])


def test_one_target_module_is_a_module_name_not_a_regex(tiny):
    """peft reads a bare string as a full-match regex: ["q_proj"] must stay a list of names."""
    from hf_hardpos.errors import UserInputError

    model, _ = tiny
    peft_model = apply_lora(copy.deepcopy(model), r=2, alpha=4, target_modules=["q_proj"])
    wrapped = sorted({n.split(".lora_A")[0].rsplit(".", 1)[-1] for n, _ in peft_model.named_parameters()
                      if ".lora_A" in n})  # fmt: skip
    assert wrapped == ["q_proj"]
    layers = model.config.text_config.num_hidden_layers + model.config.vision_config.num_hidden_layers
    assert sum(1 for n, _ in peft_model.named_parameters() if n.endswith("lora_A.default.weight")) == layers
    with pytest.raises(UserInputError, match=r"\['qproj'\] matches no module .*'q_proj'"):
        apply_lora(copy.deepcopy(model), target_modules=["qproj"])


def test_the_training_seed_fixes_the_adapters_whatever_the_global_generator_holds(tiny, tmp_path):
    """peft draws lora_A from torch's global generator; the trainer draws it from `args.seed` instead."""
    model, processor = tiny

    def adapters(global_seed: int, seed: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(global_seed)  # what the caller happened to do before building the trainer
        args = HardPosTrainingArguments(
            output_dir=str(tmp_path),
            use_lora=True,
            lora_r=4,
            lora_alpha=8,
            seed=seed,
            report_to="none",
            use_cpu=True,
        )
        trainer = HardPosTrainer(
            model=copy.deepcopy(model), args=args, train_dataset=_rows(4), processor=processor
        )
        return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_A" in n}

    first, second, other_seed = adapters(1, seed=7), adapters(2, seed=7), adapters(1, seed=8)
    assert first and first.keys() == second.keys() == other_seed.keys()
    for name in first:
        torch.testing.assert_close(first[name], second[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(first[name], other_seed[name]) for name in first)
    # The caller's generator is left where it was: the draw after apply_lora is the same as without it.
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    apply_lora(copy.deepcopy(model), r=4, alpha=8, seed=5)
    torch.testing.assert_close(torch.rand(4), expected, rtol=0, atol=0)
