"""CE-CLIP's cross-modal rank (CMR) loss with adaptive, per-type thresholds, as CE-CLIP's released code runs it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from hf_hardpos.citations import CE_CLIP, cite
from hf_hardpos.training.distributed import all_reduce_sum
from hf_hardpos.training.losses.batch import EmbeddingBatch
from hf_hardpos.training.losses.term import HARD_NEGATIVES, TYPED_NEGATIVES, LossTerm, TermOption

__all__ = ["CMRLoss"]

_TYPE_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")
NOT_STARTED = -1  # the epoch recorded before the first `start_epoch`


class CMRLoss(nn.Module):
    """CE-CLIP eq. 4-7 in the form of its released code (``Clip_DALoss.get_cmr_loss`` and ``train_one_epoch``,
    github.com/lezhang7/Enhance-FineGrained @ef87eb7)::

        L_cmr = mean over all B x K (row i, type k) of  mask_ik * max(0, Th_k + S(I_i, T_ik) - S(I_i, T_i))

    S is cosine similarity times the logit scale (u = 10 is on that scale). A missing negative counts as
    a zero *in* the mean over B x K, as the code multiplies by the validity mask before ``.mean()``; this
    is not a sum over types of per-type means (K times larger).

    ``Th_k`` is state, not a gradient path. After each optimiser step it becomes, from that step's global
    batch, ``clamp(mean_i S(I_i, T_i) - mean_{i with a type-k negative} S(I_i, T_ik), 0, u)`` (the first
    mean over every row, the second over rows that have the type, as the code computes them); it is 0 at
    the start of every epoch (the code's thresholds live inside ``train_one_epoch``).

    State handling:
      * buffers ``threshold_<type>`` and ``threshold_epoch`` (the epoch the thresholds belong to), so
        ``state_dict()`` saves them in checkpoints and ``load_state_dict()`` restores them on resume;
        :meth:`start_epoch` resets the thresholds only when the epoch differs from the recorded one, so a
        resume in the middle of an epoch keeps the restored thresholds and a new epoch starts from 0;
      * statistics are taken only in training mode (``eval()`` passes leave them alone; the trainer puts
        the objective in the model's mode at every step), also under ``torch.no_grad``, and summed over processes, so every rank holds the same (global-batch) thresholds;
      * by default each forward call applies its own statistics at once, which is "after the step" when
        every forward is followed by an optimiser step. With ``defer_updates`` (the trainer under gradient
        accumulation) the statistics of the forward calls are summed and :meth:`apply_pending` applies
        them, so a threshold is the mean over the whole optimiser step's batch;
      * a type with no valid negative in the step keeps its previous threshold (the code divides 0 by 0
        and carries a NaN; a non-finite value is never stored here).
    """

    # What the registry, the arguments, the checks and the model card know of this term.
    TERM: ClassVar[LossTerm] = LossTerm(
        key="cmr", symbol="L_cmr", weight="cmr_weight", default_weight=0.0,
        help="Weight beta of CE-CLIP's cross-modal rank loss (paper: 0.4).",
        reads=frozenset({HARD_NEGATIVES, TYPED_NEGATIVES}),
        citation="CE-CLIP (Zhang et al., CVPR 2024) eq. 4-7 as Clip_DALoss.get_cmr_loss and train_one_epoch run "
        "them, github.com/lezhang7/Enhance-FineGrained @ef87eb7",
        build=lambda settings, negative_types: CMRLoss(negative_types, upper_bound=settings["cmr_upper_bound"]),
        options=(TermOption("cmr_upper_bound", 10.0, "Upper clamp u of CE-CLIP's adaptive CMR thresholds, on the "
                            "logit scale (paper: 10)."),),
        state="one adaptive threshold per negative type and the epoch they belong to (buffers "
        "terms.cmr.threshold_<type>, terms.cmr.threshold_epoch); 0 at every epoch start, updated after each "
        "optimiser step",
        state_log=lambda module: {f"cmr_threshold/{name}": value for name, value in module.threshold_dict().items()},
    )  # fmt: skip

    def __init__(self, negative_types: Sequence[str] = ("hard_negative",), upper_bound: float = 10.0) -> None:
        super().__init__()
        negative_types = tuple(negative_types)
        if not negative_types or len(set(negative_types)) != len(negative_types):
            raise ValueError(f"negative_types must be non-empty and unique; got {negative_types}")
        for name in negative_types:
            if not isinstance(name, str) or not _TYPE_NAME.match(name):
                raise ValueError(
                    f"negative type {name!r} must be a non-empty name of letters, digits, '_' or '-'"
                )
        if not torch.isfinite(torch.tensor(float(upper_bound))):
            raise ValueError(f"cmr upper_bound must be finite; got {upper_bound}")
        self.negative_types = negative_types
        self.upper_bound = float(upper_bound)
        self.defer_updates = False
        self._pending: torch.Tensor | None = None  # summed statistics not applied yet (never checkpointed)
        for name in negative_types:
            # float64, as the statistics are summed: a float64 objective (or reference) sees them unrounded
            self.register_buffer(self._buffer_name(name), torch.zeros((), dtype=torch.float64))
        self.register_buffer("threshold_epoch", torch.tensor(NOT_STARTED, dtype=torch.long))

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

    def start_epoch(self, epoch: int) -> None:
        """Zero the thresholds when ``epoch`` is not the epoch they belong to (CE-CLIP resets them at every
        epoch start); keep them when it is, i.e. when a run resumes inside that epoch."""
        if int(self.threshold_epoch) == int(epoch):
            return
        for name in self.negative_types:
            getattr(self, self._buffer_name(name)).zero_()
        self.threshold_epoch.fill_(int(epoch))
        self._pending = None

    def forward(self, batch: EmbeddingBatch, logit_scale: torch.Tensor) -> torch.Tensor:
        batch.require("CMRLoss", "negative")
        if batch.negatives.shape[1] != len(self.negative_types):
            raise ValueError(
                f"negative_embeds has {batch.negatives.shape[1]} slots but CMR was configured with "
                f"{len(self.negative_types)} negative types {self.negative_types}"
            )
        original = logit_scale * (batch.image * batch.text).sum(-1)  # S(I_i, T_i), [b]
        negative = logit_scale * torch.einsum("bd,bkd->bk", batch.image, batch.negatives)  # S(I_i, T_ik)
        thresholds = self.thresholds.to(device=original.device, dtype=original.dtype)
        hinge = torch.relu(thresholds + negative - original[:, None])
        mask = batch.negative_mask
        local_sum = torch.where(mask, hinge, torch.zeros_like(hinge)).sum()
        loss = batch.reduce(local_sum, batch.global_negative_mask.numel())
        if self.training:
            self._record(original.detach(), negative.detach(), mask)
        return loss

    @torch.no_grad()
    def _record(self, original: torch.Tensor, negative: torch.Tensor, mask: torch.Tensor) -> None:
        """Global sums for the threshold update: [sum_i S(I,T), rows, sum_i S(I,T_ik) per k, count per k]."""
        original, negative = original.double(), negative.double()
        stats = torch.cat([
            original.sum()[None],
            original.new_tensor([original.shape[0]]),
            torch.where(mask, negative, torch.zeros_like(negative)).sum(0),
            mask.double().sum(0),
        ])  # fmt: skip
        stats = all_reduce_sum(stats)
        self._pending = stats if self._pending is None else self._pending + stats.to(self._pending.device)
        if not self.defer_updates:
            self.apply_pending()

    @torch.no_grad()
    def apply_pending(self) -> None:
        """Apply the statistics recorded since the last update (nothing recorded: nothing changes)."""
        if self._pending is None:
            return
        stats, self._pending = self._pending, None
        num_types = len(self.negative_types)
        rows, counts = stats[1], stats[2 + num_types :]
        if rows <= 0:
            return
        mean_original = stats[0] / rows
        for k, name in enumerate(self.negative_types):
            if counts[k] <= 0:
                continue  # no type-k negative in the step: keep the previous threshold
            value = (mean_original - stats[2 + k] / counts[k]).clamp(min=0.0, max=self.upper_bound)
            if torch.isfinite(value):
                buffer = getattr(self, self._buffer_name(name))
                buffer.copy_(value.to(buffer.device, buffer.dtype))

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "negative_types": list(self.negative_types),
            "upper_bound": self.upper_bound,
            "reduction": "mean over all (row, type) entries, missing negatives as zeros (CE-CLIP's code)",
            "thresholds": "clamp(mean S(I,T) - mean over valid rows S(I,T_k), 0, u) after each optimiser step; "
            "0 at every epoch start",
        }

    @property
    def citation(self) -> str:
        return cite(CE_CLIP)
