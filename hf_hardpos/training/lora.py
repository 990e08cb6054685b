"""LoRA on both CLIP towers with peft, and the way back to a plain `CLIPModel`.

Why: full fine-tuning on hard negatives is known to erode zero-shot accuracy (a frequent complaint in the issue trackers of ARO, SugarCrepe, TSVLC and CE-CLIP); LoRA
keeps the pretrained weights frozen and saves a few MB per run. Evaluation and export need a plain
`CLIPModel` though (every CLIP consumer loads one), hence `merge_lora`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from accelerate.utils import extract_model_from_parallel
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel

from .training_args import DEFAULT_LORA_TARGET_MODULES


def is_peft_model(model: torch.nn.Module) -> bool:
    """True for a peft wrapper, also when it sits inside a DDP / compile wrapper."""
    return isinstance(extract_model_from_parallel(model, keep_torch_compile=False), PeftModel)


def apply_lora(
    model: PreTrainedModel,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.0,
    target_modules: Sequence[str] | str = DEFAULT_LORA_TARGET_MODULES,
) -> PeftModel:
    """Wrap `model` in a peft `PeftModel` whose only trainable weights are the LoRA adapters.

    `target_modules` matches module names in both towers by default (the attention projections of
    the vision and the text encoder); a single string is a regular expression, as in peft. The
    logit scale stays frozen, as it is not a target module.
    """
    if isinstance(target_modules, (list, tuple)):
        target_modules = target_modules[0] if len(target_modules) == 1 else list(target_modules)
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none")
    return get_peft_model(model, config)


def merge_lora(model: torch.nn.Module) -> PreTrainedModel:
    """A plain model with the adapters folded into its weights; the input (maybe DDP-wrapped) is left intact."""
    model = extract_model_from_parallel(model, keep_torch_compile=False)
    if not isinstance(model, PeftModel):
        raise TypeError(f"merge_lora expects a peft model, got {type(model).__name__}")
    return copy.deepcopy(model).merge_and_unload()
