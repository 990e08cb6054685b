"""The hard-positive columns of the COCO fine-tuning set: upstream's released files or your own.

Two formats, one caption per position of COCO's ``captions_train2017.json`` ``annotations`` list:

- upstream's ``hard_positives_ft/{replace,swap}_hp.jsonl`` (amitakamath/hard_positives @33addaa,
  README "Finetuning data"): one JSON string per line, ``"None"`` where no hard positive exists. A
  file must have exactly one line per caption (blank lines count: a stray line must not shift every
  later caption onto another's hard positive);
- ``hardpos generate`` outputs (``--hard-positives FILE``), one per kind (``replace``, ``swap``, or
  the relation-targeted ``replace-verb`` / ``replace-spatial`` for the replace column), generated
  over the build's captions in annotation order. They are joined by caption: the manifest beside the
  file must show these captions in this order (row count and sha256), each record's ``input`` must
  be the caption at its index, and every caption must have exactly one record
  (`generation_outputs`). A row's ``caption_id`` is then the COCO annotation id of that caption.
  Only a record marked ``valid`` gives a value (null otherwise).

Every refusal is one line naming the file (and line) and both counts where they differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import columns
from ..generation.run_output import manifest_path
from .checks import DataValidationError, MissingSourceError
from .generation_outputs import checked_manifest, read_records

# The column each kind of `hardpos generate` hard positive fills.
COLUMN_OF_KIND = {
    "replace": columns.HARD_POSITIVE_REPLACE,
    "replace-verb": columns.HARD_POSITIVE_REPLACE,
    "replace-spatial": columns.HARD_POSITIVE_REPLACE,
    "swap": columns.HARD_POSITIVE_SWAP,
}
HOW_TO_GENERATE = (
    "export the captions of a default build (every caption is a row) in its row order, e.g. "
    "datasets.load_dataset(FOLDER, split='train').select_columns(['caption']).to_json('captions.jsonl'), then "
    "run `hardpos generate --kind replace (or swap) --model MODEL --input captions.jsonl --output FILE.jsonl`"
)


def parse_hard_positive(line: str, path: Path, line_number: int) -> str | None:
    """One jsonl line -> the hard positive, or ``None`` where upstream wrote "None" (as a JSON string or
    bare), null, or nothing (a blank line)."""
    if line.strip() in ("", "None"):
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataValidationError(f"{path}: line {line_number} is not valid JSON ({error})") from error
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataValidationError(
            f"{path}: line {line_number} holds a {type(value).__name__}, expected a JSON string (upstream's format; "
            "a `hardpos generate` output needs its manifest beside it)"
        )
    value = value.strip()
    return None if value in ("", "None") else value


def read_hard_positive_lines(path: Path) -> Iterator[str | None]:
    """The hard positive of each line of an upstream-format file, in order."""
    with open(path, "rb") as handle:  # decoded line by line, so a bad byte is named by its line
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataValidationError(
                    f"{path}: line {line_number} is not UTF-8 ({error.reason}); re-encode the file as UTF-8"
                ) from None
            yield parse_hard_positive(line, path, line_number)


def count_hard_positives(path: Path) -> int:
    """Parse every line once (so a bad line fails before the build, naming its number) and count them,
    blank lines included: each line is one caption."""
    return sum(1 for _ in read_hard_positive_lines(path))


def check_line_count(path: Path, captions_path: Path, captions: int) -> None:
    """Refuse an upstream-format file whose line count is not the caption count, naming both."""
    lines = count_hard_positives(path)
    if lines != captions:
        raise DataValidationError(
            f"{path} has {lines:,} lines but {captions_path} has {captions:,} captions; the "
            "hard-positive file must have one line per COCO caption, in annotation order (blank lines count)"
        )


@dataclass
class HardPositiveSource:
    """Where one hard-positive column comes from: an upstream-format file (read line by line during the
    build) or a generated one (`values`, read and checked before the build)."""

    column: str
    path: Path
    generated_options: dict | None = None  # the `hardpos generate` manifest's options; None: upstream format
    values: list[str | None] | None = None
    valid: int = field(default=0)

    def rows(self) -> Iterator[str | None]:
        """The column's value per caption, in annotation order."""
        return iter(self.values) if self.values is not None else read_hard_positive_lines(self.path)

    def describe(self) -> str:
        """For the card: which file and, for a generated one, the settings its manifest recorded."""
        if self.generated_options is None:
            return f'file `{self.path.name}` in upstream\'s format (one JSON string per caption, "None" for none)'
        o = self.generated_options
        what = ", ".join(
            f"{key} {o[key]}"
            for key in ("model", "method", "fidelity", "decoding", "acceptance", "seed")
            if key in o
        )
        return f"`hardpos generate --kind {o.get('kind')}` output `{self.path.name}` ({what}); {self.valid:,} valid"


def load_hard_positives(
    paths: Sequence[str | Path], captions: Sequence[str], captions_path: Path
) -> dict[str, HardPositiveSource]:
    """The hard-positive columns supplied by `paths` (column -> source), every file checked against the
    captions (annotation order, whitespace stripped) before anything is built. A file with a manifest
    beside it is a `hardpos generate` output; one without is upstream's format, its column named by its
    file name (``replace`` or ``swap`` in it)."""
    inputs = [caption or None for caption in captions]  # what `hardpos generate` reads for an empty caption
    found: dict[str, HardPositiveSource] = {}
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise MissingSourceError(f"--hard-positives {path}: file not found")
        if manifest_path(path).is_file():
            source = _generated(path, inputs, captions_path)
        else:
            source = _upstream_format(path, captions_path, len(captions))
        if source.column in found:
            raise DataValidationError(
                f"{path}: supplies {source.column}, which {found[source.column].path} supplies too; pass one file per column"
            )
        found[source.column] = source
    return found


def _generated(path: Path, inputs: Sequence[str | None], captions_path: Path) -> HardPositiveSource:
    options = checked_manifest(path, inputs, captions_path, "--hard-positives", HOW_TO_GENERATE)
    kind = options.get("kind")
    if options.get("polarity") != "positive" or kind not in COLUMN_OF_KIND:
        raise DataValidationError(
            f"{path}: written by `hardpos generate` with kind {kind!r} and polarity {options.get('polarity')!r} (its "
            f"manifest); --hard-positives takes hard positives of kind {', '.join(COLUMN_OF_KIND)}"
        )
    column = COLUMN_OF_KIND[kind]
    values: dict[str, list[str | None]] = {column: [None] * len(inputs)}
    valid = read_records(path, {kind: column}, inputs, values, HOW_TO_GENERATE)
    return HardPositiveSource(column, path, dict(options), values[column], valid[kind])


def _upstream_format(path: Path, captions_path: Path, captions: int) -> HardPositiveSource:
    kinds = [kind for kind in ("replace", "swap") if kind in path.name.lower()]
    if len(kinds) != 1:
        raise DataValidationError(
            f"{path}: no manifest beside it, so it is read in upstream's format, whose column is named by the file "
            "name (replace_hp.jsonl or swap_hp.jsonl); rename it, or keep the manifest `hardpos generate` wrote"
        )
    check_line_count(path, captions_path, captions)
    return HardPositiveSource(COLUMN_OF_KIND[kinds[0]], path)
