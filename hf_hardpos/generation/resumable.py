"""Append-only JSONL output keyed by input index, so an interrupted generation run can resume.

Why: generating hard positives for all 591,753 COCO captions with a 70B model takes days; a run
that is killed (pre-emption, OOM, Ctrl-C) must continue where it stopped when restarted with the
same command, with no duplicate and no lost row. Each record is one line
`{"index", "input", "output", "valid", "reason", "raw"}`; lines are flushed and fsynced after every
batch, so at most the batch in flight is lost, and a half-written last line (the process died in
`write`) is cut off on restart.

`output` holds the cleaned candidate even when it failed validation (for auditing); consumers must
use it only where `valid` is true.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

EMPTY_INPUT = "empty input"


@dataclass(frozen=True)
class Candidate:
    """What a generator says about one input: the raw text, the cleaned output, and the verdict."""

    raw: str | None
    output: str | None
    reason: str | None  # None when valid

    @property
    def valid(self) -> bool:
        return self.reason is None and self.output is not None


# A batch generator maps captions (never None) to one Candidate each, in order.
BatchGenerator = Callable[[list[str]], list[Candidate]]


def read_done(path: str | Path, inputs: Sequence[str | None]) -> dict[int, dict]:
    """Records already in `path`, by index; repairs a truncated last line in place.

    Raises ValueError when a complete line is not JSON, or when a record does not belong to these
    inputs (index out of range, or a different input text at that index): resuming onto another
    input file would silently mix two runs.
    """
    path = Path(path)
    if not path.exists():
        return {}
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n")
    if tail.strip():
        # The last write was interrupted: drop the fragment so appends start on a fresh line.
        logger.warning("%s: dropping a truncated last line (%d bytes) from an interrupted run", path, len(tail))
        with path.open("r+b") as handle:
            handle.truncate(len(complete) + 1 if complete or data.startswith(b"\n") else 0)
    done: dict[int, dict] = {}
    for number, line in enumerate(complete.split(b"\n") if complete else [], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} line {number}: not valid JSON ({error.msg}); the file is corrupt") from error
        index = record.get("index") if isinstance(record, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(inputs):
            raise ValueError(f"{path} line {number}: index {index!r} is not a position in the {len(inputs)} inputs")
        if record.get("input") != inputs[index]:
            raise ValueError(
                f"{path} line {number}: written for input {record.get('input')!r} at index {index}, but the input "
                f"now has {inputs[index]!r}; this output belongs to another input file (choose another --output)"
            )
        done.setdefault(index, record)
    return done


def _record(index: int, caption: str | None, candidate: Candidate) -> dict:
    return {
        "index": index,
        "input": caption,
        "output": candidate.output,
        "valid": candidate.valid,
        "reason": candidate.reason,
        "raw": candidate.raw,
    }


def generate_to_jsonl(
    inputs: Sequence[str | None],
    output_path: str | Path,
    generate_batch: BatchGenerator,
    *,
    batch_size: int = 8,
    precheck: Callable[[str], str | None] | None = None,
    progress: bool = True,
    desc: str = "generating",
) -> dict:
    """Run `generate_batch` over the inputs not yet in `output_path`, appending one line each.

    `precheck(caption)` may return a reason to skip a caption without generating (e.g. SWAP on a
    caption with no "and"); such rows are still written, with that reason, so every index appears
    exactly once. Returns a summary: total, already_done, written, valid, and reason counts.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    done = read_done(output_path, inputs)
    todo = [i for i in range(len(inputs)) if i not in done]
    reasons: Counter[str] = Counter()
    valid = 0
    with output_path.open("a", encoding="utf-8") as handle, tqdm(
        total=len(inputs), initial=len(inputs) - len(todo), desc=desc, disable=not progress, unit="caption"
    ) as bar:
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            candidates: dict[int, Candidate] = {}
            to_generate = []
            for index in chunk:
                caption = inputs[index]
                skip = EMPTY_INPUT if not caption else (precheck(caption) if precheck else None)
                if skip is not None:
                    candidates[index] = Candidate(raw=None, output=None, reason=skip)
                else:
                    to_generate.append(index)
            if to_generate:
                generated = generate_batch([inputs[i] for i in to_generate])
                if len(generated) != len(to_generate):
                    raise RuntimeError(f"generator returned {len(generated)} results for {len(to_generate)} inputs")
                candidates.update(zip(to_generate, generated))
            for index in chunk:
                candidate = candidates[index]
                handle.write(json.dumps(_record(index, inputs[index], candidate), ensure_ascii=False) + "\n")
                valid += candidate.valid
                if candidate.reason is not None:
                    reasons[candidate.reason] += 1
            handle.flush()
            os.fsync(handle.fileno())
            bar.update(len(chunk))
    return {
        "total": len(inputs),
        "already_done": len(done),
        "written": len(todo),
        "valid": valid,
        "reasons": dict(reasons),
    }
