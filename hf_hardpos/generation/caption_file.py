"""The captions a generation run reads, in file order: a .txt (one per line) or a .jsonl file.

The position of a caption in the file is its `index` in the output, so a blank line or a null value is
kept as `None` and gets an "empty input" record (rejected by row) rather than being dropped: dropping it
would shift every later index and break the join back to the source data. For the same reason lines are
split only on `\\n` (an optional `\\r` before it is removed): a lone `\\r` stays inside its caption.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from hf_hardpos.errors import UserInputError

_BOM = b"\xef\xbb\xbf"


def read_captions(path: str | Path, field: str = "caption") -> list[str | None]:
    """Captions in file order; `None` for a blank line or a null value (an "empty input" row).

    A UTF-8 byte-order mark is dropped. Raises UserInputError naming the file and line on bytes
    that are not UTF-8, malformed JSON, a missing field or a value that is not a string.
    """
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"input file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix not in (".txt", ".jsonl", ".ndjson"):
        raise UserInputError(
            f"input file {path}: expected a .txt (one caption per line) or .jsonl file, got {suffix!r}"
        )
    captions: list[str | None] = []
    for number, line in _lines(path):
        if suffix == ".txt":
            captions.append(line.strip() or None)
        else:
            captions.append(_jsonl_caption(path, number, line, field))
    return captions


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, decoded line); split on b"\\n" only, "\\r\\n" accepted, BOM dropped."""
    data = path.read_bytes()
    data = data.removeprefix(_BOM)
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()  # the newline that ends the last line does not start another one
    for number, raw in enumerate(pieces, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise UserInputError(
                f"{path} line {number}: byte 0x{raw[error.start]:02x} at column {error.start + 1} is not UTF-8; "
                "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            ) from None


def _jsonl_caption(path: Path, number: int, line: str, field: str) -> str | None:
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise UserInputError(f"{path} line {number}: not valid JSON ({error.msg})") from None
    if not isinstance(row, dict) or field not in row:
        raise UserInputError(
            f"{path} line {number}: no field {field!r} (use --field to name the caption field)"
        )
    value = row[field]
    if value is not None and not isinstance(value, str):
        raise UserInputError(
            f"{path} line {number}: field {field!r} is {type(value).__name__}, expected a string"
        )
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:  # a JSON escape of half a surrogate pair (\ud800): no character
            raise UserInputError(
                f"{path} line {number}: field {field!r} holds {error.object[error.start]!r}, half "
                "of a UTF-16 surrogate pair, which is no character"
            ) from None
    return (value.strip() or None) if isinstance(value, str) else None
