"""Hard-positive loss: captions that keep the meaning must stay matched to the image.

Hard-negative fine-tuning alone makes CLIP *oversensitive*: it learns that any small edit lowers the score,
so meaning-preserving edits (hard positives) fall below the hard negatives too (Kamath et al., 2024). This
term pulls the hard positives back.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from hf_hardpos.citations import HARD_POSITIVES, SVLC, cite
from hf_hardpos.training.losses.batch import EmbeddingBatch
from hf_hardpos.training.losses.term import HARD_NEGATIVES, LossTerm, TermOption
from hf_hardpos.training.losses.term import HARD_POSITIVES as READS_HARD_POSITIVES
from hf_hardpos.training.options import one_of

__all__ = ["HARD_POSITIVE_MODES", "HardPositiveLoss"]

# Each way of forming the hard-positive loss, with what it does (`--help` of `hard_positive_mode`).
HARD_POSITIVE_MODES = {
    "contrastive": "image->c_p over the batch plus c->c_p text contrastive, as SVLC",
    "ranking": "target c_p over [c_p, c_n] per image, which directly optimises the augmented criterion",
}


class HardPositiveLoss(nn.Module):
    """Two variants, chosen by ``mode``:

    ``"contrastive"`` (SVLC's positive loss, TSVLC ``ClipLoss.get_loss_pos_only``, github.com/SivanDoveh/
    TSVLC @90b18e7, as used by Kamath et al.): for every valid hard positive ``t_i^p`` of a local row,
    (a) image->hard-positive cross-entropy of ``v_i`` over all valid hard positives of the global batch
    with ``t_i^p`` as target, and (b) the same with the original caption ``t_i`` in place of ``v_i``
    (text->text), which keeps the paraphrase close to the caption it paraphrases. The value is the
    **mean** of the two, ``((a) + (b)) / 2``, each a mean over valid hard positives, as TSVLC divides
    their sum by 2. With one hard positive per row (the svlc recipe draws one per row) this is TSVLC's
    formula; with several, other hard positives of the *same* row are also correct answers, so they are
    left out of that row's candidates rather than treated as negatives. Deviation from TSVLC: under data
    parallelism TSVLC computes this term on each GPU's own rows; here the candidates are the gathered
    global batch, like the contrastive term's.

    ``"ranking"``: for every valid (hard positive, hard negative) pair of a row, the two-way cross-entropy
    over ``[s(v_i, t_i^p), s(v_i, t_i^n)]`` with the hard positive as target, i.e. ``softplus(s_n - s_p)``.
    It directly optimises the second half of the benchmarks' Augmented Accuracy (``s_p > s_n``); it needs
    hard negatives.

    Scores are cosine similarities times the logit scale. Missing hard positives/negatives (mask
    ``False``) contribute nothing.
    """

    # What the registry, the arguments, the checks and the model card know of this term.
    TERM: ClassVar[LossTerm] = LossTerm(
        key="hp", symbol="L_hp", weight="hard_positive_weight", default_weight=1.0,
        help="Weight of the hard-positive loss; 0 trains on hard negatives only.",
        reads=frozenset({READS_HARD_POSITIVES}),
        reads_when=(("hard_positive_mode", "ranking", frozenset({HARD_NEGATIVES})),),
        citation="Kamath et al. (ECCV 2024) with SVLC's positive loss: TSVLC ClipLoss.get_loss_pos_only, "
        "github.com/SivanDoveh/TSVLC @90b18e7",
        build=lambda settings, negative_types: HardPositiveLoss(mode=settings["hard_positive_mode"]),
        options=(TermOption("hard_positive_mode", "contrastive", "How the hard-positive loss is formed",
                            HARD_POSITIVE_MODES),),
    )  # fmt: skip

    def __init__(self, mode: Literal["contrastive", "ranking"] = "contrastive") -> None:
        super().__init__()
        self.mode = one_of("hard_positive_mode", mode, HARD_POSITIVE_MODES)

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        batch.require("HardPositiveLoss", "positive")
        return getattr(self, f"_{self.mode}")(batch, logit_scale)  # _contrastive or _ranking

    def _contrastive(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        num_rows, num_slots = batch.global_positive_mask.shape
        candidates = batch.global_positives.flatten(0, 1)  # [N*P, D], column j is (row j // P, slot j % P)
        device = candidates.device
        column = torch.arange(num_rows * num_slots, device=device)
        targets = batch.local_rows[:, None] * num_slots + torch.arange(num_slots, device=device)  # [b, P]
        same_row_other_slot = (column // num_slots == batch.local_rows[:, None, None]) & (
            column != targets[..., None]
        )
        excluded = same_row_other_slot | ~batch.global_positive_mask.flatten()  # [b, P, N*P]
        valid = batch.positive_mask
        local_sum = 0
        for anchor in (batch.image, batch.text):
            logits = (logit_scale * anchor @ candidates.T)[:, None, :].expand(excluded.shape)
            logits = logits.masked_fill(excluded, float("-inf"))
            local_sum = local_sum + F.cross_entropy(logits[valid], targets[valid], reduction="sum")
        return batch.reduce(local_sum / 2, batch.global_positive_mask.sum())

    def _ranking(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        if batch.negatives is None:
            raise ValueError('hard_positive_mode="ranking" needs negative_embeds as well as positive_embeds')
        positive = torch.einsum("bd,bpd->bp", batch.image, batch.positives)
        negative = torch.einsum("bd,bkd->bk", batch.image, batch.negatives)
        pair_losses = F.softplus(logit_scale * (negative[:, None, :] - positive[:, :, None]))  # [b, P, K]
        valid = batch.positive_mask[:, :, None] & batch.negative_mask[:, None, :]
        global_count = (batch.global_positive_mask.sum(1) * batch.global_negative_mask.sum(1)).sum()
        return batch.reduce(pair_losses[valid].sum(), global_count)

    def get_config_dict(self) -> dict[str, Any]:
        return {"mode": self.mode}

    @property
    def citation(self) -> str:
        return cite(HARD_POSITIVES, SVLC)
