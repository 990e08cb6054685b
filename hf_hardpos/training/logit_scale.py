"""Keep CLIP's learned temperature where CLIP keeps it."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["MAX_LOGIT_SCALE", "clamp_logit_scale", "unwrap_model"]

#: CLIP caps the exp'd logit scale at 100, i.e. the ``logit_scale`` parameter (a log) at ln(100).
MAX_LOGIT_SCALE = math.log(100.0)


def unwrap_model(model: nn.Module) -> nn.Module:
    """Peel off DDP/DataParallel (``.module``), ``torch.compile`` (``._orig_mod``) and peft
    (``get_base_model()``) wrappers, in any nesting, to reach the model that owns ``logit_scale``."""
    seen = set()
    while id(model) not in seen:
        seen.add(id(model))
        if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
        elif hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
            model = model._orig_mod
        elif callable(getattr(model, "get_base_model", None)):
            model = model.get_base_model()
    return model


def clamp_logit_scale(model: nn.Module, max_value: float = MAX_LOGIT_SCALE) -> None:
    """Clamp ``logit_scale`` to ``[0, max_value]`` in place, as CLIP does after each optimiser step.

    Without the cap the temperature can run away during fine-tuning with hard negatives and the
    contrastive logits saturate. Raises ``AttributeError`` naming the class when the unwrapped model has
    no ``logit_scale`` parameter.
    """
    base = unwrap_model(model)
    logit_scale = getattr(base, "logit_scale", None)
    if not isinstance(logit_scale, torch.Tensor):
        raise AttributeError(f"{type(base).__name__} (unwrapped from {type(model).__name__}) has no logit_scale tensor")
    with torch.no_grad():
        logit_scale.clamp_(0.0, max_value)
