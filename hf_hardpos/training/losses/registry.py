"""The weighted loss terms of the objective, each declared once: ``L = L_clip + sum_t w_t L_t``.

Why a registry: the objective, the training arguments (their `--<weight>` fields, checks and "has no
effect" notes), the training-data validation, the trainer and the model card all need to know the same
facts about a term: its weight option, the inputs it reads, the paper or upstream code it follows and
whether it carries state. Declared here once, each of them iterates `TERMS`; a new term is its module
under `training/losses/` (its class declaring its `LossTerm` as `TERM`) plus its class in `TERMS` and
its fields in `LossArguments` below (docs/architecture.md, "A new loss term", walks through one).

The contrastive term ``L_clip`` is always on (weight 1) and has no entry: whether it reads hard negatives
follows from the others (`contrastive_reads_negatives`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from hf_hardpos.training.losses.cmr import CMRLoss
from hf_hardpos.training.losses.hard_negative import HardNegativeLoss
from hf_hardpos.training.losses.hard_positive import HardPositiveLoss
from hf_hardpos.training.losses.imc import IMCLoss
from hf_hardpos.training.losses.term import (
    HARD_NEGATIVES,
    HARD_POSITIVES,
    TYPED_NEGATIVES,
    LossTerm,
    TermOption,
)
from hf_hardpos.training.options import one_of

__all__ = [
    "HARD_NEGATIVES",
    "HARD_POSITIVES",
    "TERMS",
    "LossArguments",
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

TERMS: tuple[LossTerm, ...] = (HardNegativeLoss.TERM, HardPositiveLoss.TERM, IMCLoss.TERM, CMRLoss.TERM)


@dataclass
class LossArguments:
    """The loss terms' weights and options, one field each, as the terms declare them (a base of
    `HardPosTrainingArguments`, so `--help`, JSON/YAML recipes and `training_args.bin` carry them).
    Written out so type checkers and IDEs see them; a test checks they are `argument_fields()`."""

    hard_negative_weight: float = HardNegativeLoss.TERM.weight_field()
    hard_positive_weight: float = HardPositiveLoss.TERM.weight_field()
    hard_positive_mode: str = HardPositiveLoss.TERM.option("hard_positive_mode").as_field()
    imc_weight: float = IMCLoss.TERM.weight_field()
    imc_form: str = IMCLoss.TERM.option("imc_form").as_field()
    cmr_weight: float = CMRLoss.TERM.weight_field()
    cmr_upper_bound: float = CMRLoss.TERM.option("cmr_upper_bound").as_field()


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
        fields.append((entry.weight, float, entry.weight_field()))
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
