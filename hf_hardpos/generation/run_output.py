"""The append-only JSONL a generation run owns: its manifest, its lock, the records already written.

Why: a run that is killed (pre-emption, OOM, Ctrl-C, `kill -9`) must continue where it stopped when
restarted with the same command, with no duplicate and no lost row, and must never mix two different
runs in one file (`resumable` runs the generators into it). So the output *owns* its run:

- a manifest beside it (`<output>.manifest.json`: the options that decide the records, the input's
  sha256 and row count, the package version), written with the first record; a resume whose
  options or input differ is refused with the differences spelled out (or `overwrite=True`);
- a lock file (`<output>.lock`, `output_folder.exclusive`: a `filelock` lock, the writer's pid beside it): a second concurrent
  writer is refused instead of appending duplicates. The kernel drops the lock when the process
  dies, so a `kill -9` never leaves a stale lock; the file itself is left in place on purpose
  (deleting it would let two writers lock two different files of the same name);
- one line per (caption, kind): `{"index", "input", "output", "valid", "reason", "raw", "method",
  "kind", "polarity"}` (+ generator-specific fields such as the ranked `candidates` of the
  masked-LM path), flushed and fsynced after every batch, so at most the batch in flight is lost;
  a half-written last line (the process died in `write`) is cut off on restart.

`output` holds the cleaned candidate even when it failed validation (for auditing); consumers must
use it only where `valid` is true.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hf_hardpos import __version__, output_folder
from hf_hardpos.errors import UserInputError

logger = logging.getLogger(__name__)

MANIFEST_FORMAT = "hf_hardpos.generate/1"


def input_fingerprint(inputs: Sequence[str | None]) -> str:
    """sha256 of the captions as read (one JSON value per line), whatever file they came from."""
    digest = hashlib.sha256()
    for caption in inputs:
        digest.update(json.dumps(caption, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def manifest_path(output_path: str | Path) -> Path:
    output_path = Path(output_path)
    return output_path.with_name(output_path.name + ".manifest.json")


def read_manifest(manifest_file: Path, advice: str) -> dict:
    """The manifest `hardpos generate` wrote beside an output, refused with `advice` when unreadable or foreign."""
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserInputError(f"{manifest_file}: not a valid manifest ({error}); {advice}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise UserInputError(f"{manifest_file}: format {found!r}, expected {MANIFEST_FORMAT!r}; {advice}")
    source = manifest.get("input")
    problem = (
        "field options must be an object"
        if not isinstance(manifest.get("options"), dict)
        else "field settings must be an object"
        if not isinstance(manifest.get("settings", {}), dict)
        else "field input must be an object"
        if not isinstance(source, dict)
        else f"field input.rows must be a whole number >= 0, got {source.get('rows')!r}"
        if isinstance(source.get("rows"), bool)
        or not isinstance(source.get("rows"), int)
        or source["rows"] < 0
        else f"field input.sha256 must be text, got {source.get('sha256')!r}"
        if not isinstance(source.get("sha256"), str)
        else None
    )
    if problem is not None:
        raise UserInputError(f"{manifest_file}: {problem}; {advice}")
    return manifest


def lock_path(output_path: str | Path) -> Path:
    output_path = Path(output_path)
    return output_path.with_name(output_path.name + ".lock")


def read_done(
    path: str | Path, inputs: Sequence[str | None], *, repair: bool = True
) -> dict[tuple[int, str | None], dict]:
    """Records already in `path`, by (index, kind); repairs a truncated last line in place (with
    `repair=False` it is only skipped: a reader that does not own the file).

    Raises UserInputError when a complete line is not JSON, or when a record does not belong to
    these inputs (index out of range, or a different input text at that index): resuming onto
    another input file would silently mix two runs.
    """
    path = Path(path)
    if not path.exists():
        return {}
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n")
    if tail.strip() and repair:
        # The last write was interrupted: drop the fragment so appends start on a fresh line.
        logger.warning(
            "%s: dropping a truncated last line (%d bytes) from an interrupted run", path, len(tail)
        )
        with path.open("r+b") as handle:
            handle.truncate(len(complete) + 1 if complete or data.startswith(b"\n") else 0)
    done: dict[tuple[int, str | None], dict] = {}
    first_line: dict[tuple[int, str | None], int] = {}
    for number, line in enumerate(complete.split(b"\n") if complete else [], start=1):
        if line.strip():
            record = parse_record(path, number, line, inputs)
            key = (record["index"], record.get("kind"))
            if key in done:
                raise UserInputError(
                    f"{path} line {number}: a second record for caption index {key[0]}, type {key[1]} (the first is "
                    f"on line {first_line[key]}); the file is not one run's output (choose another --output)"
                )
            done[key], first_line[key] = record, number
    return done


def parse_record(
    path: Path,
    number: int,
    line: bytes | str,
    inputs: Sequence[str | None],
    *,
    advice: str = "this output belongs to another input file (choose another --output)",
) -> dict:
    """One output line -> its record, checked against `inputs`.

    Why shared: the resume (`read_done`) and every consumer that joins the records back to the
    source captions (e.g. the COCO builder's CE-CLIP columns) must refuse the same mismatches the
    same way. Raises UserInputError naming `path` and the 1-based line `number` when the line is not
    JSON, its index is not a position in `inputs`, or its input text is not the caption at that index
    (`advice`, what to do about the latter, ends that message).
    """
    try:
        record = json.loads(line, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise UserInputError(
            f"{path} line {number}: not valid JSON ({error.msg}); the file is corrupt"
        ) from None
    except (
        UnicodeDecodeError,
        RecursionError,
        ValueError,
    ) as error:  # not UTF-8; nested too deeply; a key twice
        raise UserInputError(
            f"{path} line {number}: not a record ({str(error)[:120] or 'nested too deeply'}); the "
            "file is corrupt"
        ) from None
    index = record.get("index") if isinstance(record, dict) else None
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(inputs):
        raise UserInputError(
            f"{path} line {number}: index {index!r} is not a position in the {len(inputs)} inputs"
        )
    if record.get("input") != inputs[index]:
        raise UserInputError(
            f"{path} line {number}: written for input {record.get('input')!r} at index {index}, but the input "
            f"now has {inputs[index]!r}; {advice}"
        )
    for name, types, expected in (
        ("valid", (bool,), "true or false"),
        ("kind", (str, type(None)), "text or null"),
        ("output", (str, type(None)), "text or null"),
    ):
        if name in record and not isinstance(record[name], types):
            raise UserInputError(
                f"{path} line {number}: field {name} must be {expected}, got {record[name]!r}"
            )
    if "valid" not in record:
        raise UserInputError(f"{path} line {number}: field valid is missing; the file is corrupt")
    return record


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every key appears once: with a key twice, which value counts is up to the reader."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"field {twice} appears twice")
    return record


def _flatten(value: Mapping, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}: nested settings compared key by key."""
    flat = {}
    for key, item in value.items():
        if isinstance(item, Mapping):
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat


def describe_differences(before: Mapping, after: Mapping) -> list[str]:
    """'key: A (output) vs B (this run)' for every key whose value differs."""
    return [
        f"{key}: {before.get(key, '<unset>')!r} (output) vs {after.get(key, '<unset>')!r} (this run)"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


class GenerationOutput:
    """The locked output of one run: checks the manifest on entry, writes it with the first record.

    Open it *before* loading a model: a refused resume or a second writer then fails in seconds.
    """

    def __init__(
        self,
        path: str | Path,
        options: Mapping[str, object],
        inputs: Sequence[str | None],
        *,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(path)
        self.manifest = {
            "format": MANIFEST_FORMAT,
            "options": dict(options),
            "input": {"sha256": input_fingerprint(inputs), "rows": len(inputs)},
            "hf_hardpos": __version__,
        }
        self.inputs = inputs
        self.overwrite = overwrite
        self.done: dict[tuple[int, str | None], dict] = {}
        self._lock = contextlib.ExitStack()
        self._manifest_written = False
        self._existing_settings: dict | None = None  # the resumed output's manifest `settings`

    def __enter__(self) -> GenerationOutput:
        def refuse(holder: str) -> None:
            raise UserInputError(
                f"{self.path} is being written by another process ({holder}, lock {lock_path(self.path)}); "
                "wait for it to finish or choose another --output"
            )

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.enter_context(output_folder.exclusive(lock_path(self.path), refuse))
        except OSError as error:
            raise UserInputError(
                f"cannot write the output {self.path}: {error.strerror}; choose another --output"
            ) from None
        try:
            self._open_existing()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _open_existing(self) -> None:
        manifest_file = manifest_path(self.path)
        if self.overwrite:
            self.path.unlink(missing_ok=True)
            manifest_file.unlink(missing_ok=True)
            return
        has_records = self.path.exists() and self.path.stat().st_size > 0
        if not has_records:
            return  # nothing to mix with: a stale manifest is replaced with the first record
        if not manifest_file.exists():
            raise UserInputError(
                f"{self.path} has records but no manifest ({manifest_file.name}), so its options are unknown; "
                "use --overwrite to start again or choose another --output"
            )
        existing = read_manifest(manifest_file, "use --overwrite to start again or choose another --output")
        differences = describe_differences(existing.get("options", {}), self.manifest["options"])
        differences += [
            f"input {d}" for d in describe_differences(existing.get("input", {}), self.manifest["input"])
        ]
        if differences:
            raise UserInputError(
                f"{self.path} was written with other options or input, refusing to mix two runs: "
                + "; ".join(differences)
                + " (re-run with the output's options, use --overwrite to start again, or choose another --output)"
            )
        if existing.get("hf_hardpos") != __version__:
            logger.warning(
                "%s was started by hf_hardpos %s, resumed by %s",
                self.path,
                existing.get("hf_hardpos"),
                __version__,
            )
        self._existing_settings = existing.get("settings")
        self._manifest_written = True
        self.done = read_done(self.path, self.inputs)

    def confirm_settings(self, settings: Mapping[str, object]) -> None:
        """Record the generator's resolved `settings` (call after the model is loaded, before the
        first append); refuse them when the output was written with others (another model at the
        same folder, another revision of a Hub id, another generation config)."""
        settings = json.loads(json.dumps(dict(settings), default=str))  # as the manifest will hold them
        previous = self._existing_settings
        if previous is not None and previous != settings:
            differences = describe_differences(_flatten(previous), _flatten(settings))
            raise UserInputError(
                f"{self.path} was written with another model or generation settings, refusing to mix two runs: "
                + "; ".join(differences)
                + " (use the model it was written with, --overwrite to start again, or choose another --output)"
            )
        self.manifest["settings"] = settings
        self._existing_settings = (
            settings  # a later call (e.g. the generator after adopted shards) must agree
        )
        if self._manifest_written and previous is None:
            self._write_manifest()  # records written before the settings were known: record them now

    def __exit__(self, *exc_info) -> None:
        self._lock.close()

    def _write_manifest(self) -> None:
        output_folder.write_text(
            manifest_path(self.path), json.dumps(self.manifest, indent=2, ensure_ascii=False) + "\n"
        )
        self._manifest_written = True

    def append(self, records: Sequence[dict]) -> None:
        """Append records and make them durable (manifest first, before the first record)."""
        if not self._manifest_written:
            self._write_manifest()
        with self.path.open("a", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        for record in records:
            self.done.setdefault((record["index"], record["kind"]), record)
