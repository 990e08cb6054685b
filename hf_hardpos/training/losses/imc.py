"""CE-CLIP's intra-modal contrastive (IMC) loss: separate a caption from its own hard negatives in text space."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hf_hardpos.citations import CE_CLIP, cite
from hf_hardpos.training.losses.batch import EmbeddingBatch

__all__ = ["IMCLoss"]


class IMCLoss(nn.Module):
    """The paper's formula (CE-CLIP, eq. 3), per row with at least one valid hard negative:

        L_imc = -log( exp S(I, T) / sum_k exp S(T, T_k) ) = logsumexp_k S(T, T_k) - S(I, T)

    where T_k are the row's valid hard negatives (one per type), S is cosine similarity times the logit
    scale, and the loss is the mean over such rows. The numerator is cross-modal while the denominator is
    text-text and does not contain the numerator, so this is not a softmax cross-entropy and can be
    negative; minimising it raises S(I, T) and lowers the similarity of T to its hard negatives.

    Note: the public CE-CLIP code (github.com/lezhang7/Enhance-FineGrained) does not compute this formula
    exactly; this module implements the formula as written in the paper, on purpose, so results are
    attributable to the published method.
    """

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        if batch.negatives is None:
            raise ValueError("IMCLoss needs negative_embeds")
        image_text = logit_scale * (batch.image * batch.text).sum(-1)  # [b]
        text_negative = logit_scale * torch.einsum("bd,bkd->bk", batch.text, batch.negatives)
        text_negative = text_negative.masked_fill(~batch.negative_mask, float("-inf"))
        rows = batch.negative_mask.any(dim=1)  # rows without any hard negative drop out (no all--inf rows)
        row_losses = torch.logsumexp(text_negative[rows], dim=1) - image_text[rows]
        return batch.reduce(row_losses.sum(), batch.global_negative_mask.any(dim=1).sum())

    def get_config_dict(self) -> dict[str, Any]:
        return {"formula": "paper (CE-CLIP eq. 3)"}

    @property
    def citation(self) -> str:
        return cite(CE_CLIP)
