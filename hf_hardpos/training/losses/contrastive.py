"""CLIP's symmetric contrastive loss, with hard negatives as extra image->text columns."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hf_hardpos.citations import CLIP, SVLC, cite
from hf_hardpos.training.losses.batch import EmbeddingBatch

__all__ = ["ContrastiveLoss"]


class ContrastiveLoss(nn.Module):
    """``(L_image->text + L_text->image) / 2`` over the global batch.

    Image->text scores each local image against ``[t ; t^n]``: every original caption of the global batch
    plus every *valid* hard negative of the global batch (SVLC / NegCLIP style), so a hard negative is a
    competitor for its own image and for every other image. Missing hard negatives (mask ``False``) get a
    ``-inf`` logit: they are excluded, never scored as a zero-vector placeholder. Text->image scores each
    local original caption against the global images only (a hard negative has no image of its own).

    Args:
        use_hard_negatives: add the hard-negative columns when the batch carries hard negatives. With
            ``False`` this is plain CLIP.
    """

    def __init__(self, use_hard_negatives: bool = True) -> None:
        super().__init__()
        self.use_hard_negatives = use_hard_negatives

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        labels = batch.local_rows
        logits_per_image = logit_scale * batch.image @ batch.global_text.T
        if self.use_hard_negatives and batch.global_negatives is not None:
            negatives = batch.global_negatives.flatten(0, 1)
            negative_logits = logit_scale * batch.image @ negatives.T
            excluded = ~batch.global_negative_mask.flatten()
            negative_logits = negative_logits.masked_fill(excluded[None, :], float("-inf"))
            logits_per_image = torch.cat([logits_per_image, negative_logits], dim=1)
        logits_per_text = logit_scale * batch.text @ batch.global_image.T
        local_sum = F.cross_entropy(logits_per_image, labels, reduction="sum") + F.cross_entropy(
            logits_per_text, labels, reduction="sum"
        )
        return batch.reduce(local_sum / 2, batch.global_image.shape[0])

    def get_config_dict(self) -> dict[str, Any]:
        return {"use_hard_negatives": self.use_hard_negatives}

    @property
    def citation(self) -> str:
        return cite(CLIP, SVLC) if self.use_hard_negatives else cite(CLIP)
