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

from ..errors import UserInputError
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
    seed: int | None = None,
) -> PeftModel:
    """Wrap `model` in a peft `PeftModel` whose only trainable weights are the LoRA adapters.

    `target_modules` matches module names in both towers by default (the attention projections of
    the vision and the text encoder). A list (or tuple) names modules by the end of their name, also
    with one entry (`--lora_target_modules q_proj`): peft reads a list as names but a bare string as a
    regular expression that must match a module's whole name, so a one-entry list is never turned into
    a string. A plain string is passed on as such a regular expression. The logit scale stays frozen,
    as it is not a target module. A target that matches no module is an error naming the candidates.

    `seed`: peft draws each adapter's A matrix from torch's global generator, at whatever state the
    caller left it in, so two runs with the same training seed would start from different adapters
    (`Trainer` seeds only after the model is built). Given a seed, the adapters are drawn from a
    generator seeded with it, and the caller's generator state is restored afterwards.
    """
    if isinstance(target_modules, (list, tuple)):
        target_modules = list(target_modules)
    config = LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none"
    )
    devices = list(range(torch.cuda.device_count())) if seed is not None and torch.cuda.is_available() else []
    try:
        with torch.random.fork_rng(devices=devices, enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)  # the CPU generator and every CUDA device's
            return get_peft_model(model, config)
    except ValueError as error:  # peft: "Target modules ... not found in the base model"
        if "not found" not in str(error) and "NoMatching" not in type(error).__name__:
            raise
        leaves = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                         if isinstance(module, torch.nn.Linear)})  # fmt: skip
        raise UserInputError(
            f"--lora_target_modules {target_modules!r} matches no module of {type(model).__name__}; its linear "
            f"layers are named {leaves}"
        ) from error


def merge_lora(model: torch.nn.Module) -> PreTrainedModel:
    """A plain model with the adapters folded into its weights; the input (maybe DDP-wrapped) is left intact."""
    model = extract_model_from_parallel(model, keep_torch_compile=False)
    if not isinstance(model, PeftModel):
        raise TypeError(f"merge_lora expects a peft model, got {type(model).__name__}")
    return copy.deepcopy(model).merge_and_unload()
