"""LoRA on both CLIP towers with peft, and the way back to a plain `CLIPModel`.

Why: full fine-tuning on hard negatives is known to erode zero-shot accuracy (SPEC section 9); LoRA
keeps the pretrained weights frozen and saves a few MB per run. Evaluation and export need a plain
`CLIPModel` though (every CLIP consumer loads one), hence `merge_lora`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from .training_args import DEFAULT_LORA_TARGET_MODULES


def is_peft_model(model: torch.nn.Module) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # peft is a dependency, but keep plain training usable without it
        return False
    return isinstance(model, PeftModel)


def apply_lora(
    model: PreTrainedModel,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.0,
    target_modules: Sequence[str] | str = DEFAULT_LORA_TARGET_MODULES,
):
    """Wrap `model` in a peft `PeftModel` whose only trainable weights are the LoRA adapters.

    `target_modules` matches module names in both towers by default (the attention projections of
    the vision and the text encoder); a single string is a regular expression, as in peft. The
    logit scale stays frozen, as it is not a target module.
    """
    from peft import LoraConfig, get_peft_model

    if isinstance(target_modules, (list, tuple)) and len(target_modules) == 1:
        target_modules = target_modules[0]
    if isinstance(target_modules, (list, tuple)):
        target_modules = list(target_modules)
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none")
    return get_peft_model(model, config)


def merge_lora(model: torch.nn.Module, *, copy_model: bool = True) -> PreTrainedModel:
    """A plain model with the adapters folded into its weights (the input is left intact by default).

    `copy_model=False` merges in place, which saves memory but turns the input into the merged model.
    """
    model = unwrap_ddp(model)
    if not is_peft_model(model):
        raise TypeError(f"merge_lora expects a peft model, got {type(model).__name__}")
    if copy_model:
        model = copy.deepcopy(model)
    return model.merge_and_unload()


def unwrap_ddp(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside DDP / DataParallel wrappers (peft wrappers are kept)."""
    while hasattr(model, "module") and isinstance(model.module, torch.nn.Module):
        model = model.module
    return model


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts, for logs and the model card."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total
