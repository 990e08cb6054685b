"""One dataset of a suite (`SuiteEntry`): read from a suite YAML file field by field, and named as a folder.

Why a module of its own: a suite file is anyone's (shared, hand-edited), so each field is checked for its
type (`configs: default` is one config, not seven letters) and each name for the folder it becomes in
the suite's output (never `..`, `.`, the suite's own `metrics.json`, or another entry's folder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import output_folder
from ..errors import UserInputError
from ..names import folder_name, require_plain_name, unique_folder_names
from .tasks import TASKS


@dataclass
class SuiteEntry:
    """One dataset of a suite. `group` names a set of entries averaged together (e.g. `vtab`)."""

    name: str
    dataset: str
    task: str | None = None  # None: recognised from the data
    configs: list[str] | None = None
    split: str = "test"
    text_only: bool = False  # also SugarCrepe++'s text-only task (TOT) on a hard-positive set
    group: str | None = None


# The type of each suite field as YAML gives it (None allowed where the dataclass default is None).
SUITE_FIELD_TYPES = {
    "name": str,
    "dataset": str,
    "task": str,
    "configs": list,
    "split": str,
    "text_only": bool,
    "group": str,
}


def suite_entry_from_yaml(path: Path, index: int, item) -> SuiteEntry:
    """One `datasets:` item, every field of its type; `configs: default` (one name, not a list) is read as
    `[default]`, never split into letters. Errors name the file, the item and the field."""
    if not isinstance(item, dict) or "dataset" not in item:
        raise UserInputError(f"{path}: datasets[{index}] needs at least a `dataset:` (Hub id or folder)")
    unknown = sorted(set(item) - set(SUITE_FIELD_TYPES), key=str)
    if unknown:
        raise UserInputError(
            f"{path}: datasets[{index}] has unknown field(s) {unknown}; known: {sorted(SUITE_FIELD_TYPES)}"
        )
    item = dict(item)
    if isinstance(item.get("configs"), str):
        item["configs"] = [item["configs"]]
    for name, value in item.items():
        kind = SUITE_FIELD_TYPES[name]
        if value is None and SuiteEntry.__dataclass_fields__[name].default is None:
            continue
        if not isinstance(value, kind) or (kind is str and not value.strip()):
            raise UserInputError(
                f"{path}: datasets[{index}].{name} must be a non-empty {kind.__name__}, got {value!r}"
            )
    for position, config in enumerate(item.get("configs") or []):
        require_plain_name(config, f"{path}: datasets[{index}].configs[{position}]")
    entry = SuiteEntry(**{"name": item["dataset"], **item})
    if entry.task is not None and entry.task not in TASKS:
        raise UserInputError(f"{path}: datasets[{index}].task {entry.task!r} is not one of {list(TASKS)}")
    return entry


def entry_folders(entries: Sequence[SuiteEntry], where: str = "suite") -> dict[str, str]:
    """Each entry's folder name inside the suite's output folder (`names.folder_name`), refused
    in one line when it would leave that folder (`..`), be the folder itself (`.`), be the suite's own
    `metrics.json`, or be another entry's (`x/y` and `x y` both give `x_y`)."""
    folders = {entry.name: folder_name(entry.name, f"{where}: dataset name") for entry in entries}
    for name, folder in folders.items():
        if folder.casefold() in (output_folder.METRICS_FILE.casefold(), output_folder.LOCK_NAME):
            raise UserInputError(
                f"{where}: dataset name {name!r} would name the suite's own {folder}; rename it"
            )
    unique_folder_names(folders, f"{where}: dataset names")
    return folders
