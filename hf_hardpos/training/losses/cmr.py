"""CE-CLIP's cross-modal rank (CMR) loss with adaptive, per-type thresholds."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hf_hardpos.citations import CE_CLIP, cite
from hf_hardpos.training.distributed import all_reduce_sum
from hf_hardpos.training.losses.batch import EmbeddingBatch

__all__ = ["CMRLoss"]

_TYPE_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


class CMRLoss(nn.Module):
    """CE-CLIP eq. 4-7: ``sum_k max(0, S(I, T_k) - S(I, T) + Th_k)``, mean over rows, per hard-negative type k.

    S is cosine similarity times the logit scale (the paper's upper bound u = 10 is on that scale).
    ``Th_k`` is *state*, not a gradient path: at step t it is the batch mean of ``S(I, T) - S(I, T_k)``
    measured at step t-1 (rows without a type-k negative excluded), clamped to ``[0, upper_bound]`` as
    CE-CLIP's code does (docs/reference.md, Losses): a negative mean gap (negatives still winning) asks for no
    margin rather than tolerating a violation.
    Early in training the model separates T from T_k by little, so the threshold is small and only
    violations count; as the gap grows the required margin grows with it (a curriculum), up to u.

    State handling:
      * one registered buffer per type, ``threshold_<type>``, so ``state_dict()`` saves it in checkpoints
        and ``load_state_dict()`` restores it on resume. All start at 0 (no previous step);
      * updated under ``torch.no_grad`` only in training mode with grad enabled (evaluation passes leave it
        alone), once per forward call, i.e. per micro-batch under gradient accumulation;
      * under data parallelism the batch sums and counts are all-reduced, so every rank holds the same
        thresholds (the global-batch mean);
      * a type with no valid row in a step keeps its previous threshold.

    The value is the sum over types of the per-type mean over rows that have that type, which equals the
    paper's row-wise ``sum_k`` when every row has every type.
    """

    def __init__(self, negative_types: Sequence[str] = ("hard_negative",), upper_bound: float = 10.0) -> None:
        super().__init__()
        negative_types = tuple(negative_types)
        if not negative_types or len(set(negative_types)) != len(negative_types):
            raise ValueError(f"negative_types must be non-empty and unique; got {negative_types}")
        for name in negative_types:
            if not isinstance(name, str) or not _TYPE_NAME.match(name):
                raise ValueError(f"negative type {name!r} must be a non-empty name of letters, digits, '_' or '-'")
        if not torch.isfinite(torch.tensor(float(upper_bound))):
            raise ValueError(f"cmr upper_bound must be finite; got {upper_bound}")
        self.negative_types = negative_types
        self.upper_bound = float(upper_bound)
        for name in negative_types:
            self.register_buffer(self._buffer_name(name), torch.zeros((), dtype=torch.float32))

    @staticmethod
    def _buffer_name(negative_type: str) -> str:
        return f"threshold_{negative_type}"

    @property
    def thresholds(self) -> torch.Tensor:
        """``[K]`` current thresholds, in ``negative_types`` order."""
        return torch.stack([getattr(self, self._buffer_name(name)) for name in self.negative_types])

    def threshold_dict(self) -> dict[str, float]:
        """Current thresholds as Python floats, for logging."""
        return {name: float(getattr(self, self._buffer_name(name))) for name in self.negative_types}

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        if batch.negatives is None:
            raise ValueError("CMRLoss needs negative_embeds")
        if batch.negatives.shape[1] != len(self.negative_types):
            raise ValueError(
                f"negative_embeds has {batch.negatives.shape[1]} slots but CMR was configured with "
                f"{len(self.negative_types)} negative types {self.negative_types}"
            )
        original = (batch.image * batch.text).sum(-1)
        negative = torch.einsum("bd,bkd->bk", batch.image, batch.negatives)
        gap = logit_scale * (original[:, None] - negative)  # S(I,T) - S(I,T_k), [b, K]
        thresholds = self.thresholds.to(device=gap.device, dtype=gap.dtype)
        hinge = torch.relu(thresholds - gap)
        mask = batch.negative_mask
        local_sums = torch.where(mask, hinge, torch.zeros_like(hinge)).sum(0)  # [K]
        loss = batch.reduce(local_sums, batch.global_negative_mask.sum(0)).sum()
        if self.training and torch.is_grad_enabled():
            self._update_thresholds(gap.detach(), mask)
        return loss

    @torch.no_grad()
    def _update_thresholds(self, gap: torch.Tensor, mask: torch.Tensor) -> None:
        gap = gap.float()
        stats = torch.stack([torch.where(mask, gap, torch.zeros_like(gap)).sum(0), mask.float().sum(0)])
        stats = all_reduce_sum(stats)
        means = (stats[0] / stats[1].clamp_min(1)).clamp(min=0.0, max=self.upper_bound)
        for k, name in enumerate(self.negative_types):
            buffer = getattr(self, self._buffer_name(name))
            updated = torch.where(stats[1, k] > 0, means[k], buffer.to(means.device))
            buffer.copy_(updated.to(buffer.device, buffer.dtype))

    def get_config_dict(self) -> dict[str, Any]:
        return {"negative_types": list(self.negative_types), "upper_bound": self.upper_bound}

    @property
    def citation(self) -> str:
        return cite(CE_CLIP)
