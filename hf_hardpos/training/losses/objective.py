"""The full training objective: L_clip + the weighted terms of `losses.registry` (w_hn·L_hn + w_hp·L_hp + α·L_imc +
β·L_cmr; docs/reference.md, Losses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hf_hardpos.training.losses import registry
from hf_hardpos.training.losses.batch import EmbeddingBatch, Slots
from hf_hardpos.training.losses.contrastive import ContrastiveLoss

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

    The weighted terms and what they read come from `losses.registry.TERMS`; this class names none of them.

    State: with CMR on, ``state_dict()`` holds the thresholds (``terms.cmr.threshold_<type>``) and the epoch
    they belong to (``terms.cmr.threshold_epoch``); save it with checkpoints and ``load_state_dict`` it on
    resume. Thresholds only move in ``train()`` mode; :meth:`start_epoch` and
    :meth:`apply_pending` are the trainer's hooks (epoch start, optimiser step).

    Args:
        negative_types: names of the hard-negative slots, in the order of ``negative_embeds[:, k]``
            (e.g. ``("hard_negative_replace", "hard_negative_swap")``); a term reading typed negatives (CMR
            keeps one threshold per type) then needs exactly these slots. The other terms take any number
            of slots per row.
        gather_across_processes: gather the global batch under data parallelism.
        contrastive_hard_negatives: hard negatives as contrastive columns; None: when another term uses them.
        **term_settings: each registered term's weight and options (`losses.registry.TERMS`), e.g.
            ``hard_negative_weight, hard_positive_weight, imc_weight, cmr_weight`` (w_hn, w_hp, alpha, beta),
            ``hard_positive_mode`` (``"contrastive"``, SVLC-style, or ``"ranking"``, CE over [c_p, c_n]),
            ``imc_form`` (``"paper"``, CE-CLIP eq. 3, or ``"released_code"``, see `IMCLoss`) and
            ``cmr_upper_bound`` (u, the clamp on the CMR thresholds, logit scale; the paper's best is 10).
            One not given takes the registry's default.
    """

    def __init__(
        self,
        *,
        negative_types: Sequence[str] = ("hard_negative",),
        gather_across_processes: bool = True,
        contrastive_hard_negatives: bool | None = None,
        **term_settings: Any,
    ) -> None:
        super().__init__()
        settings = registry.settings_of({})
        unknown = set(term_settings) - set(settings)
        if unknown:
            raise TypeError(
                f"HardPosObjective got unknown argument(s) {sorted(unknown)}; the loss terms take "
                f"{sorted(settings)}"
            )
        settings.update(term_settings)
        registry.check_settings(settings)
        negative_types = tuple(negative_types)
        if len(set(negative_types)) != len(negative_types):
            raise ValueError(f"negative_types must be unique; got {negative_types}")
        settings = {name: float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
                    for name, value in settings.items()}  # fmt: skip
        for name, value in settings.items():  # self.hard_negative_weight, self.imc_form, ...
            setattr(self, name, value)
        self.settings = settings
        self.negative_types = negative_types
        self.gather_across_processes = gather_across_processes

        terms_use_negatives = registry.HARD_NEGATIVES in registry.inputs_read(settings)
        self.contrastive_hard_negatives = registry.contrastive_reads_negatives(
            settings, contrastive_hard_negatives
        )
        self.uses_hard_negatives = terms_use_negatives or self.contrastive_hard_negatives
        if self.uses_hard_negatives and not negative_types:
            raise ValueError(
                "this objective uses hard negatives (a term reading them has a non-zero weight, or "
                "contrastive_hard_negatives) but negative_types is empty: name at least one negative column"
            )
        self.uses_hard_positives = registry.HARD_POSITIVES in registry.inputs_read(settings)
        self.contrastive = ContrastiveLoss(use_hard_negatives=self.contrastive_hard_negatives)
        # The active terms by key ("hn", "hp", "imc", "cmr"); a ModuleDict, so .to(device) moves loss state
        # (the CMR thresholds) and state_dict() carries it as "terms.<key>.<buffer>".
        self.terms = nn.ModuleDict(registry.build_terms(settings, negative_types))
        self._entries = {entry.key: entry for entry in registry.active_terms(settings)}
        self._weights: dict[str, float] = {
            key: float(settings[entry.weight]) for key, entry in self._entries.items()
        }

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
                "this objective uses hard negatives (a term reading them has a non-zero weight, or "
                "contrastive_hard_negatives) but no negative_embeds were given"
            )
        if self.uses_hard_positives and positive_embeds is None:
            raise ValueError(
                f"{', '.join(registry.weights_reading(self.settings, registry.HARD_POSITIVES))} > 0 but no "
                "positive_embeds were given; pass them or set that weight to 0"
            )
        typed = [
            key
            for key, entry in self._entries.items()
            if registry.TYPED_NEGATIVES in entry.reads_with(self.settings)
        ]
        if (
            typed
            and negative_embeds is not None
            and negative_embeds.ndim == 3
            and negative_embeds.shape[1] != len(self.negative_types)
        ):
            raise ValueError(
                f"negative_embeds has {negative_embeds.shape[1]} slots per row but negative_types is "
                f"{self.negative_types} ({len(self.negative_types)} types)"
            )
        if not torch.is_tensor(logit_scale):
            logit_scale = torch.tensor(
                float(logit_scale), device=image_embeds.device, dtype=image_embeds.dtype
            )
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
        state = {}  # loss state as this step uses it, before this step's update (the CMR thresholds)
        for key, entry in self._entries.items():
            if entry.state_log is not None:
                state.update(entry.state_log(self.terms[key]))
        outputs: dict[str, Any] = {"loss_clip": self.contrastive(batch, logit_scale)}
        total = outputs["loss_clip"]
        for name, module in self.terms.items():
            value = module(batch, logit_scale)
            outputs[f"loss_{name}"] = value
            total = total + self._weights[name] * value
        outputs = {"loss": total, **outputs}
        outputs.update(state)
        return outputs

    def get_config_dict(self) -> dict[str, Any]:
        """JSON-able settings of the objective and of each active term (for the model card)."""
        return {
            **self.settings,
            "negative_types": list(self.negative_types),
            "gather_across_processes": self.gather_across_processes,
            "contrastive_hard_negatives": self.contrastive_hard_negatives,
            "terms": {
                "clip": {"class": type(self.contrastive).__name__, **self.contrastive.get_config_dict()},
                **{
                    name: {
                        "class": type(module).__name__,
                        "weight": self._weights[name],
                        **module.get_config_dict(),
                    }
                    for name, module in self.terms.items()
                },
            },
        }

    def _stateful(self) -> list[nn.Module]:
        """The active terms that keep loss state (`LossTerm.state`)."""
        return [self.terms[key] for key, entry in self._entries.items() if entry.state is not None]

    def start_epoch(self, epoch: int) -> None:
        """Epoch-start hook: CMR thresholds go back to 0 unless they already belong to ``epoch`` (a resume)."""
        for module in self._stateful():
            module.start_epoch(epoch)

    def defer_state_updates(self, defer: bool = True) -> None:
        """With ``defer``, loss state (CMR thresholds) changes only in :meth:`apply_pending`, from the
        statistics of every forward call since the last one (one optimiser step under accumulation)."""
        for module in self._stateful():
            module.defer_updates = bool(defer)

    def apply_pending(self) -> None:
        """Optimiser-step hook: apply the loss-state statistics recorded since the last step."""
        for module in self._stateful():
            module.apply_pending()

    @property
    def citation(self) -> str:
        """BibTeX of every paper behind the active terms, each once."""
        entries: list[str] = []
        for module in (self.contrastive, *self.terms.values()):
            for entry in module.citation.split("\n\n"):
                if entry not in entries:
                    entries.append(entry)
        return "\n\n".join(entries)
