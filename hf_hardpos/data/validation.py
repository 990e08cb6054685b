"""Input checks with errors that name the file, the row and the field, and the build report.

Upstream files are plain JSON lists kept in step by hand (an original file and a hard-positive file
that must align row by row); a silent off-by-one would pair every caption with another row's hard
positive, so alignment is checked on every row before anything is built.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Row counts of the paper / SPEC §3, printed next to what a build measures.
PAPER_COUNTS = {
    "replace/attributes": 10_575,
    "replace/relations": 16_868,
    "swap": 28_748,
    "finetune/captions": 591_753,
    "finetune/swap_hard_positives": 119_071,
}


class DataValidationError(ValueError):
    """Base class: upstream data is not what the builder can turn into a faithful dataset."""


class AlignmentError(DataValidationError):
    """The original and the hard-positive files disagree on some rows."""


class MissingImageError(DataValidationError):
    """An image the annotations refer to is not in the image source."""


def load_json_list(path: Path, required: Sequence[str]) -> list[dict]:
    """Read a JSON list of objects and check every row has the ``required`` fields."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataValidationError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(rows, list):
        raise DataValidationError(f"{path}: expected a JSON list of rows, got {type(rows).__name__}")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataValidationError(f"{path}: row {index} is a {type(row).__name__}, expected an object")
        missing = [name for name in required if name not in row]
        if missing:
            raise DataValidationError(f"{path}: row {index} lacks field(s) {', '.join(missing)}")
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


@dataclass
class BuildReport:
    """What a build read, wrote and skipped; saved next to the shards as ``build_report.json``."""

    dataset: str
    counts: dict[str, int] = field(default_factory=dict)
    expected_counts: dict[str, int] = field(default_factory=dict)
    skipped_missing_images: dict[str, list[str]] = field(default_factory=dict)
    skipped_rows: dict[str, int] = field(default_factory=dict)
    flags: dict[str, dict[str, int]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def count_lines(self) -> list[str]:
        """One line per built config: measured rows against the paper's."""
        lines = []
        for name, count in self.counts.items():
            expected = self.expected_counts.get(name)
            if expected is None:
                lines.append(f"{name}: {count:,} rows")
            else:
                verdict = "matches the paper" if count == expected else f"DIFFERS by {count - expected:+,}"
                lines.append(f"{name}: {count:,} rows (paper: {expected:,}; {verdict})")
        return lines

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", encoding="utf-8")
