"""Reading `hardpos generate` outputs into a dataset's columns, joined to the captions they were made from.

Why strict: the records are joined to the captions by input index, so a file made from another
caption list (or a shard, or an unfinished run) would pair every caption with another caption's
text. Before a value is used, the output's manifest must show it was generated from exactly these
captions in this order (row count and sha256), every record's `input` must be the caption at its
index, and every (caption, kind) the file should hold must appear exactly once. Every refusal is one
line naming the file (and line). Used by the COCO fine-tuning builder for generated hard positives
(`--hard-positives`) and CE-CLIP's typed negatives (`--mlm-negatives`).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import UserInputError
from ..generation.run_output import input_fingerprint, manifest_path, parse_record, read_manifest
from .checks import DataValidationError, MissingSourceError


def checked_manifest(
    path: Path, inputs: Sequence[str | None], captions_path: Path, flag: str, how_to: str
) -> dict:
    """The manifest options of one generation output, after checking it was made from `inputs` (the
    captions of `captions_path`, in order) by one whole run. `flag` names the option it came from,
    `how_to` says how to make the right file."""
    if not path.is_file():
        raise MissingSourceError(f"{flag} {path}: file not found")
    manifest_file = manifest_path(path)
    if not manifest_file.is_file():
        raise DataValidationError(
            f"{path}: no manifest beside it ({manifest_file.name}), so which captions it was generated from cannot "
            "be checked; keep the manifest `hardpos generate` writes next to its output"
        )
    manifest = read_manifest(manifest_file, "keep the manifest `hardpos generate` wrote beside this output")
    options = manifest.get("options") if isinstance(manifest.get("options"), dict) else {}
    if "shard" in options:
        raise DataValidationError(
            f"{path}: one shard of a sharded run ({options['shard']}); pass the merged output (a run of the same "
            "command without --num-shards, or the file the launch writes)"
        )
    source = manifest.get("input") if isinstance(manifest.get("input"), dict) else {}
    if source.get("rows") != len(inputs):
        raise DataValidationError(
            f"{path}: generated from {source.get('rows')} captions (its manifest) but {captions_path} has "
            f"{len(inputs)}; it belongs to another caption file. To make the right one, {how_to}"
        )
    expected = input_fingerprint(inputs)
    if source.get("sha256") != expected:
        raise DataValidationError(
            f"{path}: generated from other captions than those of {captions_path} in annotation order (input "
            f"sha256 {str(source.get('sha256'))[:12]}... in its manifest, {expected[:12]}... here). To make the "
            f"right one, {how_to}"
        )
    return options


def read_records(
    path: Path,
    column_of: Mapping[str, str],
    inputs: Sequence[str | None],
    values: Mapping[str, list[str | None]],
    how_to: str,
) -> dict[str, int]:
    """Fill `values` (column -> value per caption) from the records of one output; `column_of` maps each
    kind the file holds to its column. Every (caption, kind) must appear exactly once. Only a record
    marked valid gives a value (its `output` holds the rejected candidate otherwise). Returns the
    valid records per kind."""
    first_line = {kind: array("q", bytes(8 * len(inputs))) for kind in column_of}  # 0: no record yet
    valid = dict.fromkeys(column_of, 0)
    advice = f"the file was generated from other captions. To make the right one, {how_to}"
    with path.open("rb") as handle:  # streamed: a full COCO run is hundreds of megabytes
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            if not line.endswith(b"\n"):
                raise DataValidationError(
                    f"{path} line {number}: incomplete last line (the run was interrupted); rerun the same "
                    "`hardpos generate` command to finish it"
                )
            try:
                record = parse_record(path, number, line, inputs, advice=advice)
            except UserInputError as error:  # the builder's own error type, same message
                raise DataValidationError(str(error)) from None
            kind, index = record.get("kind"), record["index"]
            if kind not in first_line:
                raise DataValidationError(
                    f"{path} line {number}: a record of type {kind!r}, but its manifest says it holds "
                    f"{', '.join(column_of)}"
                )
            if first_line[kind][index]:
                raise DataValidationError(
                    f"{path} line {number}: a second record for caption index {index}, type {kind} (the first is "
                    f"on line {first_line[kind][index]}); the file is not one run's output"
                )
            first_line[kind][index] = number
            output = record.get("output")
            if record.get("valid") is True and not (isinstance(output, str) and output.strip()):
                raise DataValidationError(f"{path} line {number}: marked valid but its output is {output!r}")
            values[column_of[kind]][index] = output if record.get("valid") is True else None
            valid[kind] += record.get("valid") is True
    for kind, lines_of in first_line.items():
        missing = [i for i, number in enumerate(lines_of) if not number]
        if missing:
            raise DataValidationError(
                f"{path}: no record for {len(missing)} of the {len(inputs)} captions for type {kind} (first: caption "
                f"index {missing[0]}); the run did not finish: rerun the same `hardpos generate` command to resume it"
            )
    return valid
