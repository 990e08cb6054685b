"""The trainer's work that a `TrainerCallback` can do, done as one (the Ctrl-C handler is `interrupt`'s):
CLIP's logit-scale clamp after every optimiser step, and the epoch handed to the objective and the
collator when it starts.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from transformers import TrainerCallback

from .logit_scale import clamp_logit_scale


class LogitScaleClampCallback(TrainerCallback):
    """Clamp CLIP's logit scale to ln(100) after every optimiser step, as CLIP's own training does."""

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is not None:
            clamp_logit_scale(model)


class EpochStateCallback(TrainerCallback):
    """Tell the objective and the collator which epoch starts, and apply the loss state after each step.

    The epoch is `floor(state.epoch)`: 0 on a fresh run, the checkpoint's epoch on a resume inside it, so
    CE-CLIP's CMR thresholds reset only when an epoch really starts (they record the epoch they belong
    to) and the collator's per-row draws repeat on a resume.
    """

    def __init__(self, objective: torch.nn.Module, collator: Any) -> None:
        self.objective = objective
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        epoch = math.floor(state.epoch + 1e-9) if state.epoch else 0
        if callable(getattr(self.objective, "start_epoch", None)):
            self.objective.start_epoch(epoch)
        if callable(getattr(self.collator, "set_epoch", None)):
            self.collator.set_epoch(epoch)

    def on_optimizer_step(self, args, state, control, **kwargs):
        if callable(getattr(self.objective, "apply_pending", None)):
            self.objective.apply_pending()
