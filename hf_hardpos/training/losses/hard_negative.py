"""SVLC's hard-negative loss: each image must prefer its caption over that caption's hard negative."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hf_hardpos.citations import SVLC, cite
from hf_hardpos.training.losses.batch import EmbeddingBatch

__all__ = ["HardNegativeLoss"]


class HardNegativeLoss(nn.Module):
    """Mean over valid (image, hard-negative type) pairs of the two-way cross-entropy over
    ``[s(v_i, t_i), s(v_i, t_i^n)]`` (scaled by the logit scale) with the original caption as target.

    Unlike the contrastive term, the comparison is only between an image's own caption and its own hard
    negative, which is exactly what the benchmarks' Original Accuracy counts. The two-way cross-entropy
    equals ``softplus(s_n - s_c)``, which is how it is computed. Each hard-negative type (slot) is its own
    pair; rows without a hard negative of a type drop out of the mean.
    """

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        if batch.negatives is None:
            raise ValueError("HardNegativeLoss needs negative_embeds")
        original = (batch.image * batch.text).sum(-1)
        negative = torch.einsum("bd,bkd->bk", batch.image, batch.negatives)
        pair_losses = F.softplus(logit_scale * (negative - original[:, None]))
        return batch.reduce(pair_losses[batch.negative_mask].sum(), batch.global_negative_mask.sum())

    def get_config_dict(self) -> dict[str, Any]:
        return {}

    @property
    def citation(self) -> str:
        return cite(SVLC)
