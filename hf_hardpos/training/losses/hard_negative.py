"""SVLC's hard-negative loss: each image must prefer its caption over all of that caption's hard negatives."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from hf_hardpos.citations import SVLC, cite
from hf_hardpos.training.losses.batch import EmbeddingBatch
from hf_hardpos.training.losses.term import HARD_NEGATIVES, LossTerm

__all__ = ["HardNegativeLoss"]


class HardNegativeLoss(nn.Module):
    """SVLC's negative loss (TSVLC ``ClipLoss.get_loss_neg_only``, github.com/SivanDoveh/TSVLC @90b18e7):
    per image, one cross-entropy over ``[s(v_i, t_i), s(v_i, t_i^n1), ..., s(v_i, t_i^nK)]`` (scaled by the
    logit scale) with the original caption as target, averaged over the images that have at least one
    hard negative.

    One softmax per row over all of its valid negatives, not one two-way term per negative: with several
    negatives the row's loss is ``logsumexp([s_c, s_n1..]) - s_c``. Missing negatives (mask ``False``) are
    left out of the row's softmax; a row with none drops out of the mean, as TSVLC's
    ``pos_that_have_negs`` does. Unlike the contrastive term, the comparison is only between an image's
    own caption and its own hard negatives, which is what the benchmarks' Original Accuracy counts.
    """

    # What the registry, the arguments, the checks and the model card know of this term.
    TERM: ClassVar[LossTerm] = LossTerm(
        key="hn", symbol="L_hn", weight="hard_negative_weight", default_weight=1.0,
        help="Weight of the hard-negative (SVLC) loss; the paper sweeps 0, 0.25, 0.5, 0.75, 1.",
        reads=frozenset({HARD_NEGATIVES}),
        citation="SVLC (Doveh et al., CVPR 2023): TSVLC ClipLoss.get_loss_neg_only, "
        "github.com/SivanDoveh/TSVLC @90b18e7",
        build=lambda settings, negative_types: HardNegativeLoss(),
    )  # fmt: skip

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        batch.require("HardNegativeLoss", "negative")
        original = (batch.image * batch.text).sum(-1, keepdim=True)  # [b, 1]
        negative = torch.einsum("bd,bkd->bk", batch.image, batch.negatives)
        logits = logit_scale * torch.cat([original, negative], dim=1)  # [b, 1 + K], target column 0
        logits = logits.masked_fill(torch.cat([torch.zeros_like(original, dtype=torch.bool), ~batch.negative_mask], 1),
                                    float("-inf"))  # fmt: skip
        rows = batch.negative_mask.any(dim=1)
        row_losses = torch.logsumexp(logits[rows], dim=1) - logits[rows, 0]
        return batch.reduce(row_losses.sum(), batch.global_negative_mask.any(dim=1).sum())

    def get_config_dict(self) -> dict[str, Any]:
        return {"form": "one softmax per row over [caption, its hard negatives] (TSVLC get_loss_neg_only)"}

    @property
    def citation(self) -> str:
        return cite(SVLC)
