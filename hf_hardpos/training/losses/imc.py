"""CE-CLIP's intra-modal contrastive (IMC) loss: separate a caption from its own hard negatives in text space."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from hf_hardpos.citations import CE_CLIP, cite
from hf_hardpos.training.losses.batch import EmbeddingBatch
from hf_hardpos.training.losses.term import HARD_NEGATIVES, LossTerm, TermOption
from hf_hardpos.training.options import one_of

__all__ = ["IMC_FORMS", "IMCLoss"]

# Each form of the IMC loss, with what it is (`--help` of `imc_form`).
IMC_FORMS = {
    "paper": "eq. 3",
    "released_code": "the cross-entropy of CE-CLIP's released get_imc_loss, target column 0 of the batch's negatives",
}


class IMCLoss(nn.Module):
    """Two forms, chosen by ``form``; S is cosine similarity times the logit scale.

    ``"paper"`` (default; CE-CLIP eq. 3), per row with at least one valid hard negative::

        L_imc = -log( exp S(I, T) / sum_k exp S(T, T_k) ) = logsumexp_k S(T, T_k) - S(I, T)

    over the row's valid hard negatives T_k (one per type), mean over such rows. The numerator is
    cross-modal while the denominator is text-text and does not contain it, so this is not a softmax
    cross-entropy and can be negative; minimising it raises S(I, T) and lowers the similarity of T to its
    hard negatives.

    ``"released_code"`` (CE-CLIP's ``Clip_DALoss.get_imc_loss``, github.com/lezhang7/Enhance-FineGrained
    @ef87eb7): a cross-entropy of each caption T_i over the hard negatives of the *whole* (global) batch,
    ``S(T_i, T_jk)`` for every row j and type k in row-major order, with column 0 as the target for every
    row; mean over the rows.

    Missing negatives: CE-CLIP's code encodes its placeholder text ``###`` (a relation swap that does not
    exist) as a real caption and scores it in IMC; here a missing negative is masked out of every term
    (left out of the paper form's sum; a ``-inf`` column in the released form, whose target is then the
    first *valid* negative column of the global batch, the code's column 0 when that one exists).
    """

    # What the registry, the arguments, the checks and the model card know of this term.
    TERM: ClassVar[LossTerm] = LossTerm(
        key="imc", symbol="L_imc", weight="imc_weight", default_weight=0.0,
        help="Weight alpha of CE-CLIP's intra-modal contrastive loss (paper: 0.2).",
        reads=frozenset({HARD_NEGATIVES}),
        citation="CE-CLIP (Zhang et al., CVPR 2024) eq. 3; released form: Clip_DALoss.get_imc_loss, "
        "github.com/lezhang7/Enhance-FineGrained @ef87eb7",
        build=lambda settings, negative_types: IMCLoss(form=settings["imc_form"]),
        options=(TermOption("imc_form", "paper", "CE-CLIP's IMC loss", IMC_FORMS),),
    )  # fmt: skip

    def __init__(self, form: Literal["paper", "released_code"] = "paper") -> None:
        super().__init__()
        self.form = one_of("imc_form", form, IMC_FORMS)

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        batch.require("IMCLoss", "negative")
        if self.form == "released_code":
            return self._released_code(batch, logit_scale)
        image_text = logit_scale * (batch.image * batch.text).sum(-1)  # [b]
        text_negative = logit_scale * torch.einsum("bd,bkd->bk", batch.text, batch.negatives)
        text_negative = text_negative.masked_fill(~batch.negative_mask, float("-inf"))
        rows = batch.negative_mask.any(dim=1)  # rows without any hard negative drop out (no all--inf rows)
        row_losses = torch.logsumexp(text_negative[rows], dim=1) - image_text[rows]
        return batch.reduce(row_losses.sum(), batch.global_negative_mask.any(dim=1).sum())

    def _released_code(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        valid = batch.global_negative_mask.flatten()  # column j = (row j // K, type j % K)
        if not bool(valid.any()):
            return batch.reduce(batch.text.sum() * 0, 0)
        logits = logit_scale * batch.text @ batch.global_negatives.flatten(0, 1).T  # [b, N*K]
        logits = logits.masked_fill(~valid[None, :], float("-inf"))
        target = torch.full((logits.shape[0],), int(valid.nonzero()[0, 0]), device=logits.device)
        local_sum = F.cross_entropy(logits, target, reduction="sum")
        return batch.reduce(local_sum, batch.global_image.shape[0])

    def get_config_dict(self) -> dict[str, Any]:
        formula = {
            "paper": "CE-CLIP eq. 3",
            "released_code": "CE-CLIP's released get_imc_loss (target column 0 of the batch's negatives)",
        }[self.form]
        return {"form": self.form, "formula": formula, "missing_negatives": "masked (upstream scores '###')"}

    @property
    def citation(self) -> str:
        return cite(CE_CLIP)
