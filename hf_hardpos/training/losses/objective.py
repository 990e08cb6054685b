"""The full training objective: L_clip + w_hn·L_hn + w_hp·L_hp + α·L_imc + β·L_cmr (docs/reference.md, Losses)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn

from hf_hardpos.training.losses.batch import EmbeddingBatch, Slots
from hf_hardpos.training.options import one_of
from hf_hardpos.training.losses.cmr import CMRLoss
from hf_hardpos.training.losses.contrastive import ContrastiveLoss
from hf_hardpos.training.losses.hard_negative import HardNegativeLoss
from hf_hardpos.training.losses.hard_positive import HARD_POSITIVE_MODES, HardPositiveLoss
from hf_hardpos.training.losses.imc import IMC_FORMS, IMCLoss

__all__ = ["HardPosObjective"]


class HardPosObjective(nn.Module):
    """Combines the loss terms on one step's embeddings and reports each term separately.

    Only terms with a non-zero weight are built and computed. The contrastive term is always on; by default
    (``contrastive_hard_negatives=None``) it uses the hard negatives as extra image->text columns exactly when
    another term uses hard negatives (``hard_negative_weight``, ``imc_weight`` or ``cmr_weight`` > 0, or a
    ranking-mode hard-positive term). So ``hard_negative_weight=0`` with the other negative terms off means
    no hard negative reaches the loss in any form: the negatives passed in are dropped before anything reads
    them, and two different sets give the same loss and gradients. That is Kamath et al. (ECCV 2024)
    Table 3's "0 HN" row (hard positives only), and the svlc recipe leaves the flag unset so that
    ``--hard_negative_weight 0 / 0.25 / 0.5 / 0.75`` give the table's ratios. ``contrastive_hard_negatives``
    set explicitly overrides that choice: ``True`` at weight 0 is NegCLIP's loss (the contrastive term with
    hard-negative columns and nothing else), *not* "0 HN".

    With ``gather_across_processes`` and an initialised process group, features of all processes are
    gathered with gradient once per step, so the contrastive candidates are the global batch; every term
    is normalised so that the DDP-averaged gradient equals the single-process full-batch gradient. Each
    process's returned values average (over processes) to the global-batch values.

    State: with CMR on, ``state_dict()`` holds the thresholds (``terms.cmr.threshold_<type>``) and the epoch
    they belong to (``terms.cmr.threshold_epoch``); save it with checkpoints and ``load_state_dict`` it on
    resume. Thresholds only move in ``train()`` mode; :meth:`start_epoch` and
    :meth:`apply_pending` are the trainer's hooks (epoch start, optimiser step).

    Args:
        hard_negative_weight, hard_positive_weight, imc_weight, cmr_weight: w_hn, w_hp, α, β.
        cmr_upper_bound: u, the clamp on the CMR thresholds (logit scale; the paper's best is 10).
        negative_types: names of the hard-negative slots, in the order of ``negative_embeds[:, k]``
            (e.g. ``("hard_negative_replace", "hard_negative_swap")``); CMR keeps one threshold per type
            and then needs exactly these slots. The other terms take any number of slots per row.
        gather_across_processes: gather the global batch under data parallelism.
        hard_positive_mode: ``"contrastive"`` (SVLC-style) or ``"ranking"`` (CE over [c_p, c_n]).
        contrastive_hard_negatives: hard negatives as contrastive columns; None: when another term uses them.
        imc_form: ``"paper"`` (CE-CLIP eq. 3) or ``"released_code"`` (CE-CLIP's released IMC), see `IMCLoss`.
    """

    def __init__(
        self,
        *,
        hard_negative_weight: float = 1.0,
        hard_positive_weight: float = 1.0,
        imc_weight: float = 0.0,
        cmr_weight: float = 0.0,
        cmr_upper_bound: float = 10.0,
        negative_types: Sequence[str] = ("hard_negative",),
        gather_across_processes: bool = True,
        hard_positive_mode: Literal["contrastive", "ranking"] = "contrastive",
        contrastive_hard_negatives: bool | None = None,
        imc_form: Literal["paper", "released_code"] = "paper",
    ) -> None:
        super().__init__()
        weights = {
            "hard_negative_weight": hard_negative_weight,
            "hard_positive_weight": hard_positive_weight,
            "imc_weight": imc_weight,
            "cmr_weight": cmr_weight,
        }
        for name, value in weights.items():
            if not math.isfinite(float(value)) or float(value) < 0:
                raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
        one_of("hard_positive_mode", hard_positive_mode, HARD_POSITIVE_MODES)
        one_of("imc_form", imc_form, IMC_FORMS)
        negative_types = tuple(negative_types)
        if len(set(negative_types)) != len(negative_types):
            raise ValueError(f"negative_types must be unique; got {negative_types}")
        self.hard_negative_weight = float(hard_negative_weight)
        self.hard_positive_weight = float(hard_positive_weight)
        self.imc_weight = float(imc_weight)
        self.cmr_weight = float(cmr_weight)
        self.cmr_upper_bound = float(cmr_upper_bound)
        self.negative_types = negative_types
        self.gather_across_processes = gather_across_processes
        self.hard_positive_mode = hard_positive_mode
        self.imc_form = imc_form

        terms_use_negatives = (
            self.hard_negative_weight > 0
            or self.imc_weight > 0
            or self.cmr_weight > 0
            or (self.hard_positive_weight > 0 and hard_positive_mode == "ranking")
        )
        self.contrastive_hard_negatives = (
            terms_use_negatives if contrastive_hard_negatives is None else bool(contrastive_hard_negatives)
        )
        self.uses_hard_negatives = terms_use_negatives or self.contrastive_hard_negatives
        if self.uses_hard_negatives and not negative_types:
            raise ValueError(
                "this objective uses hard negatives (hard_negative_weight/imc_weight/cmr_weight > 0, ranking "
                "hard positives or contrastive_hard_negatives) but negative_types is empty: name at least one "
                "negative column"
            )
        self.uses_hard_positives = self.hard_positive_weight > 0
        self.contrastive = ContrastiveLoss(use_hard_negatives=self.contrastive_hard_negatives)
        # The active terms by name ("hn", "hp", "imc", "cmr"); a ModuleDict, so .to(device) moves the CMR
        # thresholds and state_dict() carries them as "terms.cmr.threshold_<type>".
        self.terms = nn.ModuleDict()
        self._weights: dict[str, float] = {}
        for name, weight, build in (
            ("hn", self.hard_negative_weight, HardNegativeLoss),
            ("hp", self.hard_positive_weight, lambda: HardPositiveLoss(mode=hard_positive_mode)),
            ("imc", self.imc_weight, lambda: IMCLoss(form=imc_form)),
            ("cmr", self.cmr_weight, lambda: CMRLoss(negative_types, upper_bound=cmr_upper_bound)),
        ):
            if weight > 0:
                self.terms[name] = build()
                self._weights[name] = weight

    def forward(
        self,
        image_embeds: torch.Tensor,
        text_embeds: torch.Tensor,
        logit_scale: torch.Tensor,
        positive_embeds: torch.Tensor | None = None,
        positive_mask: torch.Tensor | None = None,
        negative_embeds: torch.Tensor | None = None,
        negative_mask: torch.Tensor | None = None,
    ) -> dict[str, Any]:
        """Returns ``{"loss": total, "loss_clip": ..., "loss_<term>": ...}`` (unweighted term values, only
        terms with non-zero weight) and, with CMR on, ``{"cmr_threshold/<type>": float}``: the thresholds
        this step's CMR term used (before this step's update).

        image_embeds, text_embeds: ``[B, D]`` L2-normalised (this process's shard); logit_scale: the exp'd
        scale; positive_embeds/negative_embeds ``[B, P, D]`` / ``[B, K, D]`` with masks ``[B, P]`` /
        ``[B, K]`` (``False`` = no such caption; that slot is ignored). ``K == len(negative_types)``.
        """
        if self.uses_hard_negatives and negative_embeds is None:
            raise ValueError(
                "this objective uses hard negatives (hard_negative_weight/imc_weight/cmr_weight > 0 or "
                "ranking hard positives) but no negative_embeds were given"
            )
        if self.uses_hard_positives and positive_embeds is None:
            raise ValueError(
                f"hard_positive_weight={self.hard_positive_weight} but no positive_embeds were given; "
                "pass them or set hard_positive_weight=0"
            )
        num_types = len(self.negative_types)
        if (
            "cmr" in self.terms
            and negative_embeds is not None
            and negative_embeds.ndim == 3
            and negative_embeds.shape[1] != num_types
        ):
            raise ValueError(
                f"negative_embeds has {negative_embeds.shape[1]} slots per row but negative_types is "
                f"{self.negative_types} ({len(self.negative_types)} types)"
            )
        if not torch.is_tensor(logit_scale):
            logit_scale = torch.tensor(float(logit_scale), device=image_embeds.device, dtype=image_embeds.dtype)
        if not self.uses_hard_negatives:  # don't gather what no term reads
            negative_embeds = negative_mask = None
        if not self.uses_hard_positives:
            positive_embeds = positive_mask = None
        batch = EmbeddingBatch.build(
            image_embeds,
            text_embeds,
            Slots.of("positive", positive_embeds, positive_mask),
            Slots.of("negative", negative_embeds, negative_mask),
            gather_across_processes=self.gather_across_processes,
        )
        thresholds = self.terms["cmr"].threshold_dict() if "cmr" in self.terms else {}
        outputs: dict[str, Any] = {"loss_clip": self.contrastive(batch, logit_scale)}
        total = outputs["loss_clip"]
        for name, module in self.terms.items():
            value = module(batch, logit_scale)
            outputs[f"loss_{name}"] = value
            total = total + self._weights[name] * value
        outputs = {"loss": total, **outputs}
        outputs.update({f"cmr_threshold/{name}": value for name, value in thresholds.items()})
        return outputs

    def get_config_dict(self) -> dict[str, Any]:
        """JSON-able settings of the objective and of each active term (for the model card)."""
        return {
            "hard_negative_weight": self.hard_negative_weight,
            "hard_positive_weight": self.hard_positive_weight,
            "imc_weight": self.imc_weight,
            "cmr_weight": self.cmr_weight,
            "cmr_upper_bound": self.cmr_upper_bound,
            "negative_types": list(self.negative_types),
            "gather_across_processes": self.gather_across_processes,
            "hard_positive_mode": self.hard_positive_mode,
            "contrastive_hard_negatives": self.contrastive_hard_negatives,
            "imc_form": self.imc_form,
            "terms": {
                "clip": {"class": type(self.contrastive).__name__, **self.contrastive.get_config_dict()},
                **{
                    name: {"class": type(module).__name__, "weight": self._weights[name], **module.get_config_dict()}
                    for name, module in self.terms.items()
                },
            },
        }

    def start_epoch(self, epoch: int) -> None:
        """Epoch-start hook: CMR thresholds go back to 0 unless they already belong to ``epoch`` (a resume)."""
        if "cmr" in self.terms:
            self.terms["cmr"].start_epoch(epoch)

    def defer_state_updates(self, defer: bool = True) -> None:
        """With ``defer``, loss state (CMR thresholds) changes only in :meth:`apply_pending`, from the
        statistics of every forward call since the last one (one optimiser step under accumulation)."""
        if "cmr" in self.terms:
            self.terms["cmr"].defer_updates = bool(defer)

    def apply_pending(self) -> None:
        """Optimiser-step hook: apply the loss-state statistics recorded since the last step."""
        if "cmr" in self.terms:
            self.terms["cmr"].apply_pending()

    @property
    def citation(self) -> str:
        """BibTeX of every paper behind the active terms, each once."""
        entries: list[str] = []
        for module in (self.contrastive, *self.terms.values()):
            for entry in module.citation.split("\n\n"):
                if entry not in entries:
                    entries.append(entry)
        return "\n\n".join(entries)
