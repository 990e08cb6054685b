"""Input checks whose errors name the file, the row and the field, and say what to do.

Upstream files are plain JSON kept in step by hand (an original file and a hard-positive file that
must align row by row); a silent off-by-one would pair every caption with another row's hard
positive, so alignment is checked on every row before anything is built. Every error here is a
:class:`~hf_hardpos.errors.UserInputError`: ``hardpos build`` prints it as one line and exits 2.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..errors import UserInputError


class DataValidationError(UserInputError):
    """Upstream data is not what the builder can turn into a faithful dataset."""


class AlignmentError(DataValidationError):
    """The original and the hard-positive files disagree on some rows."""


class MissingImageError(DataValidationError):
    """An image the annotations refer to is not in the image source."""


class MissingSourceError(UserInputError, FileNotFoundError):
    """A local upstream file or folder the user pointed at is not there."""


def load_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataValidationError(f"{path}: not valid JSON ({error})") from error
    except UnicodeDecodeError as error:
        raise DataValidationError(f"{path}: not UTF-8 text ({error})") from error


def check_rows(
    path: Path, rows: Sequence, required: Sequence[str], *, labels: Sequence | None = None
) -> None:
    """Every row is an object with the ``required`` fields; ``labels`` name rows (default: index)."""
    for index, row in enumerate(rows):
        label = labels[index] if labels is not None else index
        if not isinstance(row, dict):
            raise DataValidationError(f"{path}: row {label} is a {type(row).__name__}, expected an object")
        missing = [name for name in required if name not in row]
        if missing:
            raise DataValidationError(f"{path}: row {label} lacks field(s) {', '.join(missing)}")


def load_json_list(path: Path, required: Sequence[str]) -> list[dict]:
    """Read a JSON list of objects and check every row has the ``required`` fields."""
    rows = load_json(path)
    if not isinstance(rows, list):
        raise DataValidationError(f"{path}: expected a JSON list of rows, got {type(rows).__name__}")
    check_rows(path, rows, required)
    return rows


def load_aligned_pair(
    original_path: Path,
    positive_path: Path,
    original_fields: Sequence[str],
    positive_fields: Sequence[str],
) -> tuple[list[dict], list[dict]]:
    """Read an upstream (c, c_n) file and its hard-positive twin, and check they align row by row.

    Upstream pairs rows by index only; every hard-positive file repeats the image id and the hard
    negative of its original row, so those two fields are what alignment is checked on.
    """
    original = load_json_list(original_path, original_fields)
    positive = load_json_list(positive_path, positive_fields)
    check_aligned(
        original,
        positive,
        keys=("image_id", "false_caption"),
        original_name=str(original_path),
        positive_name=str(positive_path),
    )
    return original, positive


def check_aligned(
    original: Sequence[dict],
    positive: Sequence[dict],
    *,
    keys: Sequence[str],
    original_name: str,
    positive_name: str,
    max_reported: int = 10,
) -> None:
    """Raise :class:`AlignmentError` unless both files have the same length and agree on ``keys`` per row.

    The message lists the first ``max_reported`` misaligned row indices with the differing values, so
    the bad rows can be found in either file directly.
    """
    if len(original) != len(positive):
        raise AlignmentError(
            f"{original_name} has {len(original)} rows but {positive_name} has {len(positive)}; "
            "the files must align row by row"
        )
    bad = []
    for index, (left, right) in enumerate(zip(original, positive)):
        for key in keys:
            if str(left[key]) != str(right[key]):
                bad.append(f"row {index}: {key} {left[key]!r} != {right[key]!r}")
                break
    if bad:
        shown = "; ".join(bad[:max_reported])
        more = f" (and {len(bad) - max_reported} more)" if len(bad) > max_reported else ""
        raise AlignmentError(
            f"{original_name} and {positive_name} are misaligned on {len(bad)} row(s): {shown}{more}"
        )


def selected(kind: str, chosen: Sequence[str] | None, available: Sequence[str]) -> list[str]:
    """The ``kind`` names the user chose (default: all ``available``), an unknown one refused by name."""
    names = list(chosen or available)
    unknown = [name for name in names if name not in available]
    if unknown:
        raise DataValidationError(f"unknown {kind} {unknown}; expected some of {list(available)}")
    return names
