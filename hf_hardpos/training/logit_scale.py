"""Keep CLIP's learned temperature where CLIP keeps it."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["MAX_LOGIT_SCALE", "clamp_logit_scale", "unwrap_model"]

#: CLIP caps the exp'd logit scale at 100, i.e. the ``logit_scale`` parameter (a log) at ln(100).
MAX_LOGIT_SCALE = math.log(100.0)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The model that owns ``logit_scale``: accelerate peels off DDP / DataParallel / FSDP / DeepSpeed and
    ``torch.compile`` wrappers, then peft's ``get_base_model()`` reaches the model under a ``PeftModel``."""
    from accelerate.utils import extract_model_from_parallel
    from peft import PeftModel

    model = extract_model_from_parallel(model, keep_torch_compile=False)
    return model.get_base_model() if isinstance(model, PeftModel) else model


def clamp_logit_scale(model: nn.Module, max_value: float = MAX_LOGIT_SCALE) -> None:
    """Clamp ``logit_scale`` to ``[0, max_value]`` in place, as CLIP does after each optimiser step.

    Without the cap the temperature can run away during fine-tuning with hard negatives and the
    contrastive logits saturate. Raises ``AttributeError`` naming the class when the unwrapped model has
    no ``logit_scale`` parameter.
    """
    base = unwrap_model(model)
    logit_scale = getattr(base, "logit_scale", None)
    if not isinstance(logit_scale, torch.Tensor):
        raise AttributeError(
            f"{type(base).__name__} (unwrapped from {type(model).__name__}) has no logit_scale tensor"
        )
    with torch.no_grad():
        logit_scale.clamp_(0.0, max_value)
