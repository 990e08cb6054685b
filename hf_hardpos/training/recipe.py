"""Named, versioned fine-tuning recipes (`examples/recipes/*.yaml`) and what a run changed in them.

Why: reported numbers for hard-negative fine-tuning often do not reproduce because the schedule, the
batch or the precision went unrecorded (a frequent complaint in the issue trackers of ARO, SugarCrepe, TSVLC and CE-CLIP). A recipe file pins every setting of one
published method (docs/reference.md, Recipes); a run loads it as argument defaults, the command line
may override any of them, and the model card then names the recipe and lists every deviation, the
global batch included (per-device batch x processes x accumulation steps against the recipe's).

A recipe file is YAML (or JSON): a `recipe:` header, then argument names and values exactly as the
command line takes them (any `HardPosTrainingArguments` field, `model_name_or_path`, ...), except where
the run publishes, reports and writes (`COMMAND_LINE_ONLY`: a shared recipe must not push a model to
someone's Hub repo), and each with its flag's type (`check_argument_types`):

    recipe:
      name: svlc
      version: 1
      source: docs/reference.md, Recipes, SVLC column (TSVLC @90b18e7)
      global_batch_size: 128
      notes: [what the recipe cannot reproduce, ...]
    learning_rate: 5.0e-6
    ...
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserInputError
from .training_args import AUTO_WORKERS

__all__ = ["Recipe", "RecipeReport", "batch_layout", "read_arguments_file"]

HEADER = "recipe"
HEADER_KEYS = {"name", "version", "source", "global_batch_size", "data", "notes"}

# Where a run publishes, reports and writes: taken from the command line only, never from a file. A recipe
# is shared and downloaded; one that set `push_to_hub: true` with `hub_model_id: someone/else` and
# `hub_private_repo: false` would publish the model under the user's token (and `report_to: all` send
# the run to every installed tracker).
COMMAND_LINE_ONLY = frozenset(
    {
        "push_to_hub",
        "report_to",
        "output_dir",
        "logging_dir",
        "overwrite_output_dir",
        "resume_from_checkpoint",
        "run_name",
        "project",
    }
)
COMMAND_LINE_ONLY_PREFIXES = ("hub_", "trackio_", "push_to_hub")


def command_line_only(key: str) -> bool:
    """Whether `key` may be given on the command line only (`COMMAND_LINE_ONLY`)."""
    return key in COMMAND_LINE_ONLY or key.startswith(COMMAND_LINE_ONLY_PREFIXES)


@dataclass
class RecipeReport:
    """What the model card says about the recipe of a run (all plain strings, for the template)."""

    name: str
    version: int
    path: str
    source: str
    global_batch: str
    data: str | None = None
    deviations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _resolved_here(key: str, value: Any) -> bool:
    """A recipe value that asks the machine for the number (`dataloader_num_workers: -1`): whatever it
    resolved to on this machine is the recipe's choice, not a deviation."""
    return key == "dataloader_num_workers" and value == AUTO_WORKERS


@dataclass(frozen=True)
class Recipe:
    """One recipe file: its identity, the global batch it was trained with, and its argument values."""

    name: str
    version: int
    path: str
    source: str
    global_batch_size: int | None
    data: str | None
    notes: tuple[str, ...]
    arguments: dict[str, Any]

    def report(
        self, arguments: dict[str, Any], *, per_device: int, processes: int, accumulation: int
    ) -> RecipeReport:
        """Compare a run's final `arguments` (name -> value) with this recipe."""
        deviations = [
            f"`{key}`: {_show(arguments[key])} (recipe: {_show(value)})"
            for key, value in self.arguments.items()
            if key in arguments and not _same(arguments[key], value) and not _resolved_here(key, value)
        ]
        max_steps = arguments.get("max_steps", -1) or -1
        if max_steps > 0 and "num_train_epochs" in self.arguments:
            deviations.append(
                f"`max_steps`: {max_steps} sets the length instead of the recipe's "
                f"{_show(self.arguments['num_train_epochs'])} epochs"
            )
        actual = per_device * processes * accumulation
        global_batch = f"{actual} = {per_device} per device x {processes} process(es) x {accumulation} accumulation step(s)"
        if self.global_batch_size is not None:
            if actual == self.global_batch_size:
                global_batch += f", as the recipe's {self.global_batch_size}"
            else:
                difference = f"global batch {actual} instead of the recipe's {self.global_batch_size}"
                deviations.append(f"{difference} ({actual - self.global_batch_size:+d}; {global_batch})")
                global_batch += (
                    f"; the recipe's is {self.global_batch_size} ({actual - self.global_batch_size:+d})"
                )
        return RecipeReport(
            name=self.name,
            version=self.version,
            path=self.path,
            source=self.source,
            global_batch=global_batch,
            data=self.data,
            deviations=deviations,
            notes=list(self.notes),
        )


def batch_layout(args) -> tuple[int, int, int]:
    """(per-device batch, processes, accumulation steps) of `TrainingArguments`."""
    return args.per_device_train_batch_size, args.world_size, args.gradient_accumulation_steps


def read_arguments_file(path: str | Path) -> tuple[dict[str, Any], Recipe | None]:
    """The argument values of a YAML/JSON file, and its `Recipe` when it has a `recipe:` header."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UserInputError(f"cannot read the arguments file {path}: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise UserInputError(f"{path}: not UTF-8 text (byte {error.start}: {error.reason})") from None
    try:
        config = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise UserInputError(
            f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}"
        ) from error
    if not isinstance(config, dict) or not all(isinstance(key, str) for key in config):
        raise UserInputError(f"{path} must hold a mapping of argument names to values")
    refused = sorted(key for key in config if command_line_only(key))
    if refused:
        raise UserInputError(
            f"{path}: field(s) {refused} are taken from the command line only (where a run publishes, reports and "
            "writes is never set by a file); remove them from the file and pass them as flags"
        )
    header = config.pop(HEADER, None)
    if header is None:
        return config, None
    if not isinstance(header, dict) or not {"name", "version", "source"} <= set(header):
        raise UserInputError(f"{path}: the `recipe:` header needs name, version and source")
    unknown = sorted(set(header) - HEADER_KEYS)
    if unknown:
        raise UserInputError(
            f"{path}: unknown key(s) {unknown} in the `recipe:` header; known: {sorted(HEADER_KEYS)}"
        )
    for key, value in config.items():
        if isinstance(value, str) and _looks_numeric(value):
            # PyYAML reads 5e-6 (no dot) as a string; the parser would accept it, the comparison would not.
            raise UserInputError(
                f"{path}: {key}: {value!r} is a string; write numbers with a dot (e.g. 5.0e-6)"
            )
    _check_header(path, header)
    recipe = Recipe(
        name=str(header["name"]),
        version=int(header["version"]),
        path=str(path),
        source=str(header["source"]),
        global_batch_size=None
        if header.get("global_batch_size") is None
        else int(header["global_batch_size"]),
        data=None if header.get("data") is None else str(header["data"]),
        notes=tuple(str(n) for n in header.get("notes") or ()),
        arguments=dict(config),
    )
    return dict(config), recipe


def _check_header(path: Path, header: dict) -> None:
    """The `recipe:` header's fields have their types (YAML reads `version: .nan` as a float)."""
    for key in ("name", "source", "data"):
        if header.get(key) is not None and not isinstance(header[key], str):
            raise UserInputError(f"{path}: recipe.{key}: expected text, got {_show(header[key])[:60]}")
    for key in ("version", "global_batch_size"):
        value = header.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UserInputError(
                f"{path}: recipe.{key}: expected a positive whole number, got {_show(value)[:60]}"
            )
    notes = header.get("notes")
    if notes is not None and (not isinstance(notes, list) or not all(isinstance(n, str) for n in notes)):
        raise UserInputError(f"{path}: recipe.notes: expected a list of texts")


def check_argument_types(path: str | Path, values: dict[str, Any], parser) -> None:
    """Every value of an arguments file is what its flag would parse to (one line naming file and field).

    Why: the file's values become the parser's defaults, which argparse never converts or checks, so
    `learning_rate: [1, 2]` or `seed: 1.5` reached the Trainer and failed there with a traceback. A
    value passes when the flag's own type accepts its text (`int("1.5")` does not) and, for a flag
    taking one value, it is no list or mapping; a list flag takes a list of such values.
    """
    actions = {action.dest: action for action in parser._actions}
    for key, value in values.items():
        action = actions.get(key)
        if action is None or value is None:
            continue
        many = action.nargs in ("+", "*")
        items = value if many and isinstance(value, list) else [value]
        for item in items:
            wrong = isinstance(item, (list, dict)) or (isinstance(item, float) and not math.isfinite(item))
            if not wrong and action.type is not None and not isinstance(item, bool):
                try:
                    action.type(str(item))
                except (TypeError, ValueError, KeyError, argparse.ArgumentTypeError):
                    wrong = True
            if not wrong and action.choices is not None and str(_plain(item)) not in map(str, action.choices):
                wrong = True
            if wrong or (isinstance(item, bool) and action.type in (int, float, str)):
                raise UserInputError(
                    f"{path}: field {key!r}: {_show(value)[:80]} is not a valid value for --{key}"
                )


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    a, b = _plain(a), _plain(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _show(value: Any) -> str:
    return repr(_plain(value)) if isinstance(_plain(value), str) else str(_plain(value))
