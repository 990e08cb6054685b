"""The weighted loss terms of the objective, each declared once: ``L = L_clip + sum_t w_t L_t``.

Why a registry: the objective, the training arguments (their `--<weight>` fields, checks and "has no
effect" notes), the training-data validation, the trainer and the model card all need to know the same
facts about a term: its weight option, the inputs it reads, the paper or upstream code it follows and
whether it carries state. Declared here once, each of them iterates `TERMS`; a new term is its module
under `training/losses/` plus one `LossTerm(...)` entry below (docs/architecture.md, "A new loss
term", walks through one).

The contrastive term ``L_clip`` is always on (weight 1) and has no entry: whether it reads hard negatives
follows from the others (`contrastive_reads_negatives`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from hf_hardpos.training.losses.cmr import CMRLoss
from hf_hardpos.training.losses.hard_negative import HardNegativeLoss
from hf_hardpos.training.losses.hard_positive import (
    HARD_POSITIVE_MODES,
    HardPositiveLoss,
)
from hf_hardpos.training.losses.imc import IMC_FORMS, IMCLoss
from hf_hardpos.training.options import describe_choices, one_of

__all__ = [
    "HARD_NEGATIVES",
    "HARD_POSITIVES",
    "TERMS",
    "TYPED_NEGATIVES",
    "LossTerm",
    "TermOption",
    "active_terms",
    "argument_fields",
    "build_terms",
    "check_settings",
    "contrastive_reads_negatives",
    "describe",
    "inert_options",
    "inputs_read",
    "settings_of",
    "term",
    "weights_reading",
]

# What a term may read from a batch (besides the images and their captions, which every term reads).
HARD_POSITIVES = "hard_positives"
HARD_NEGATIVES = "hard_negatives"
# One hard-negative slot per negative column, in column order (a per-type statistic such as CMR's
# thresholds); a batch that draws one untyped negative per row (`hard_example_sampling=one_per_row`) has none.
TYPED_NEGATIVES = "typed_negatives"


@dataclass(frozen=True)
class TermOption:
    """A setting of one term besides its weight, e.g. ``imc_form``; its type is its default's."""

    name: str
    default: Any
    help: str
    choices: Mapping[str, str] | None = None  # {value: what it does}, for `--help` and the checks

    def field(self) -> tuple[str, type, dataclasses.Field]:
        """`(name, type, field)` for `dataclasses.make_dataclass` (HfArgumentParser reads `choices`)."""
        metadata: dict[str, Any] = {"help": self.help}
        if self.choices is not None:
            metadata = {"help": describe_choices(self.help, self.choices), "choices": list(self.choices)}
        return self.name, type(self.default), dataclasses.field(default=self.default, metadata=metadata)


@dataclass(frozen=True)
class LossTerm:
    """One weighted loss term.

    Attributes:
        key: short name: the objective's output ``loss_<key>`` and state-dict prefix ``terms.<key>``.
        symbol: its name in the loss formula (``L_hn``).
        weight: the weight option (``hard_negative_weight``): an argument of `HardPosObjective`, a
            `--<weight>` training argument; 0 leaves the term out (not built, not computed).
        default_weight, help: the option's default and `--help`.
        reads: the inputs it reads besides images and captions (`HARD_POSITIVES`, `HARD_NEGATIVES`,
            `TYPED_NEGATIVES`).
        reads_when: ``((option, value, inputs), ...)``: further inputs read when an option has a value.
        citation: the paper (with equation) or upstream file@commit the term restates.
        build: ``build(settings, negative_types) -> nn.Module``; the module maps
            ``(EmbeddingBatch, logit_scale)`` to the unweighted term and has ``citation`` and
            ``get_config_dict()``.
        options: the term's other settings (`TermOption`).
        state: what state the term keeps across steps, or None. A stateful module has
            ``start_epoch(epoch)``, ``defer_updates`` and ``apply_pending()`` (the trainer's hooks, through
            the objective) and keeps its state in buffers, so checkpoints carry it.
        state_log: ``state_log(module) -> {name: float}``: the state the objective reports each step.
    """

    key: str
    symbol: str
    weight: str
    default_weight: float
    help: str
    reads: frozenset[str]
    citation: str
    build: Callable[[Mapping[str, Any], tuple[str, ...]], nn.Module]
    options: tuple[TermOption, ...] = ()
    reads_when: tuple[tuple[str, Any, frozenset[str]], ...] = ()
    state: str | None = None
    state_log: Callable[[nn.Module], dict[str, float]] | None = None

    def reads_with(self, settings: Mapping[str, Any]) -> frozenset[str]:
        """The inputs this term reads under `settings` (whether or not its weight is 0)."""
        extra = [inputs for option, value, inputs in self.reads_when if settings.get(option) == value]
        return self.reads.union(*extra)


TERMS: tuple[LossTerm, ...] = (
    LossTerm(
        key="hn", symbol="L_hn", weight="hard_negative_weight", default_weight=1.0,
        help="Weight of the hard-negative (SVLC) loss; the paper sweeps 0, 0.25, 0.5, 0.75, 1.",
        reads=frozenset({HARD_NEGATIVES}),
        citation="SVLC (Doveh et al., CVPR 2023): TSVLC ClipLoss.get_loss_neg_only, "
        "github.com/SivanDoveh/TSVLC @90b18e7",
        build=lambda settings, negative_types: HardNegativeLoss(),
    ),
    LossTerm(
        key="hp", symbol="L_hp", weight="hard_positive_weight", default_weight=1.0,
        help="Weight of the hard-positive loss; 0 trains on hard negatives only.",
        reads=frozenset({HARD_POSITIVES}),
        reads_when=(("hard_positive_mode", "ranking", frozenset({HARD_NEGATIVES})),),
        citation="Kamath et al. (ECCV 2024) with SVLC's positive loss: TSVLC ClipLoss.get_loss_pos_only, "
        "github.com/SivanDoveh/TSVLC @90b18e7",
        build=lambda settings, negative_types: HardPositiveLoss(mode=settings["hard_positive_mode"]),
        options=(TermOption("hard_positive_mode", "contrastive", "How the hard-positive loss is formed",
                            HARD_POSITIVE_MODES),),
    ),
    LossTerm(
        key="imc", symbol="L_imc", weight="imc_weight", default_weight=0.0,
        help="Weight alpha of CE-CLIP's intra-modal contrastive loss (paper: 0.2).",
        reads=frozenset({HARD_NEGATIVES}),
        citation="CE-CLIP (Zhang et al., CVPR 2024) eq. 3; released form: Clip_DALoss.get_imc_loss, "
        "github.com/lezhang7/Enhance-FineGrained @ef87eb7",
        build=lambda settings, negative_types: IMCLoss(form=settings["imc_form"]),
        options=(TermOption("imc_form", "paper", "CE-CLIP's IMC loss", IMC_FORMS),),
    ),
    LossTerm(
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
    ),
)  # fmt: skip


def term(key: str) -> LossTerm:
    """The registered term called `key` (``"hn"``, ``"cmr"``, ...)."""
    for entry in TERMS:
        if entry.key == key:
            return entry
    raise KeyError(f"no loss term {key!r}; registered: {[t.key for t in TERMS]}")


def argument_fields() -> list[tuple[str, type, dataclasses.Field]]:
    """Every term's weight and options as `make_dataclass` fields, in registry order: the loss part of
    `HardPosTrainingArguments` (so `--help`, JSON/YAML recipes and `training_args.bin` know them)."""
    fields = []
    for entry in TERMS:
        weight = dataclasses.field(default=entry.default_weight, metadata={"help": entry.help})
        fields.append((entry.weight, float, weight))
        fields.extend(option.field() for option in entry.options)
    return fields


def settings_of(source: Any) -> dict[str, Any]:
    """``{weight or option name: value}`` of every term, read from a mapping or an object (training
    arguments); a name it lacks takes the registry's default (e.g. arguments saved before a term existed)."""
    get = source.get if isinstance(source, Mapping) else lambda name, default: getattr(source, name, default)
    settings = {}
    for entry in TERMS:
        settings[entry.weight] = get(entry.weight, entry.default_weight)
        settings.update((option.name, get(option.name, option.default)) for option in entry.options)
    return settings


def check_settings(settings: Mapping[str, Any], error: type[Exception] = ValueError) -> None:
    """Every weight a finite number >= 0 and every option with choices one of them; `error` otherwise."""
    for entry in TERMS:
        value = settings[entry.weight]
        if not math.isfinite(float(value)) or float(value) < 0:
            raise error(f"{entry.weight} must be a finite number >= 0; got {value!r}")
        for option in entry.options:
            if option.choices is not None:
                one_of(option.name, settings[option.name], option.choices, error)


def active_terms(settings: Mapping[str, Any]) -> list[LossTerm]:
    """The terms with a non-zero weight, in registry order."""
    return [entry for entry in TERMS if float(settings[entry.weight]) > 0]


def inputs_read(settings: Mapping[str, Any]) -> frozenset[str]:
    """What the weighted terms read under `settings` (the contrastive term aside)."""
    return frozenset().union(*(entry.reads_with(settings) for entry in active_terms(settings)))


def contrastive_reads_negatives(settings: Mapping[str, Any], contrastive_hard_negatives: bool | None) -> bool:
    """Whether ``L_clip`` takes the hard negatives as extra columns: as set, or (None) exactly when a
    weighted term reads them, so that all hard-negative weights 0 means no hard negative in any form
    (Kamath et al., ECCV 2024, Table 3's "0 HN")."""
    if contrastive_hard_negatives is None:
        return HARD_NEGATIVES in inputs_read(settings)
    return bool(contrastive_hard_negatives)


def inert_options(settings: Mapping[str, Any]) -> dict[str, str]:
    """``{option: message}`` for term options set away from their default while the term's weight is 0."""
    found = {}
    for entry in TERMS:
        if float(settings[entry.weight]):
            continue
        for option in entry.options:
            value = settings[option.name]
            if value != option.default:
                found[option.name] = f"{option.name}={value!r} has no effect with {entry.weight}=0"
    return found


def weights_reading(settings: Mapping[str, Any], inputs: str) -> list[str]:
    """The non-zero weight options whose terms read `inputs` under `settings`: what to set to 0 to train
    without them (for messages)."""
    return [entry.weight for entry in active_terms(settings) if inputs in entry.reads_with(settings)]


def describe(source: Any, contrastive_hard_negatives: bool | None = None) -> list[dict[str, Any]]:
    """The objective's terms as the model card states them: ``L_clip`` first, then every term with a
    non-zero weight, each ``{"key", "symbol", "weight", "weight_option", "citation", "reads", "state"}``
    (``reads`` sorted; ``weight_option`` None for ``L_clip``).

    `source`: training arguments, an objective's `get_config_dict()` or a settings mapping;
    `contrastive_hard_negatives` defaults to the one `source` holds.
    """
    settings = settings_of(source)
    if contrastive_hard_negatives is None:
        contrastive_hard_negatives = (
            source.get("contrastive_hard_negatives") if isinstance(source, Mapping)
            else getattr(source, "contrastive_hard_negatives", None)
        )  # fmt: skip
    clip_reads = [HARD_NEGATIVES] if contrastive_reads_negatives(settings, contrastive_hard_negatives) else []
    rows = [{
        "key": "clip", "symbol": "L_clip", "weight": 1.0, "weight_option": None, "reads": clip_reads, "state": None,
        "citation": "CLIP (Radford et al., ICML 2021); hard negatives as extra image->text columns: SVLC "
        "(Doveh et al., CVPR 2023), NegCLIP (Yuksekgonul et al., ICLR 2023)",
    }]  # fmt: skip
    for entry in active_terms(settings):
        rows.append({
            "key": entry.key, "symbol": entry.symbol, "weight": float(settings[entry.weight]),
            "weight_option": entry.weight, "citation": entry.citation,
            "reads": sorted(entry.reads_with(settings)), "state": entry.state,
        })  # fmt: skip
    return rows


def build_terms(settings: Mapping[str, Any], negative_types: Sequence[str]) -> dict[str, nn.Module]:
    """``{key: module}`` of the weighted terms under `settings`, in registry order."""
    return {entry.key: entry.build(settings, tuple(negative_types)) for entry in active_terms(settings)}
