"""Read the captions to perturb from a .txt (one per line) or .jsonl (one object per line) file.

The position of a caption in the file is its index in the output JSONL, so blank lines and null
values are kept as `None` (they get an "empty input" record) rather than dropped: dropping them
would shift every later index and break the join back to the source data.
"""

from __future__ import annotations

import json
from pathlib import Path


def read_captions(path: str | Path, field: str = "caption") -> list[str | None]:
    """Captions in file order; `None` for a blank line or a null/absent-text value.

    Raises ValueError naming the file, line and field on malformed JSON, a missing field or a
    value that is not a string.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"input file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        with path.open(encoding="utf-8") as handle:
            return [line.rstrip("\r\n").strip() or None for line in handle]
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(path, field)
    raise ValueError(f"input file {path}: expected a .txt (one caption per line) or .jsonl file, got {suffix!r}")


def _read_jsonl(path: Path, field: str) -> list[str | None]:
    captions: list[str | None] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                captions.append(None)
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path} line {number}: not valid JSON ({error.msg})") from error
            if not isinstance(row, dict) or field not in row:
                raise ValueError(f"{path} line {number}: no field {field!r} (use --field to name the caption field)")
            value = row[field]
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{path} line {number}: field {field!r} is {type(value).__name__}, expected a string")
            captions.append(value.strip() or None if isinstance(value, str) else None)
    return captions
