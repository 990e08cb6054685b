"""What the registry knows of one weighted loss term, declared on the term's own class (`TERM`).

Why its own module: each loss module (`hard_negative`, `hard_positive`, `imc`, `cmr`) declares its
`LossTerm` as a class attribute beside the formula it describes, and `registry` lists those classes;
both import these types from here, so neither imports the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from hf_hardpos.training.options import describe_choices

__all__ = ["HARD_NEGATIVES", "HARD_POSITIVES", "TYPED_NEGATIVES", "LossTerm", "TermOption"]

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

    def as_field(self) -> Any:
        """The `dataclasses.field` of `LossArguments` (its default, `--help`; HfArgumentParser reads `choices`)."""
        metadata: dict[str, Any] = {"help": self.help}
        if self.choices is not None:
            metadata = {"help": describe_choices(self.help, self.choices), "choices": list(self.choices)}
        return dataclasses.field(default=self.default, metadata=metadata)

    def field(self) -> tuple[str, type, dataclasses.Field]:
        """`(name, type, field)`, as `registry.argument_fields` lists them."""
        return self.name, type(self.default), self.as_field()


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

    def weight_field(self) -> Any:
        """The `dataclasses.field` of its weight in `LossArguments`."""
        return dataclasses.field(default=self.default_weight, metadata={"help": self.help})

    def option(self, name: str) -> TermOption:
        """Its option called `name`."""
        return next(option for option in self.options if option.name == name)

    def reads_with(self, settings: Mapping[str, Any]) -> frozenset[str]:
        """The inputs this term reads under `settings` (whether or not its weight is 0)."""
        extra = [inputs for option, value, inputs in self.reads_when if settings.get(option) == value]
        return self.reads.union(*extra)
