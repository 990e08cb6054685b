"""A generation run: the generator interface, and the driver that resumes it where it stopped.

Why: generating hard positives for all 591,753 COCO captions with a 70B model takes days; a run
that is killed (pre-emption, OOM, Ctrl-C, `kill -9`) must continue where it stopped when restarted
with the same command, with no duplicate and no lost row, and must never mix two different runs
in one file. The output that makes this possible (its manifest, its lock, one line per (caption,
kind)) is `run_output.GenerationOutput`; this module holds what runs into it: `CaptionGenerator`
(what every generator provides), `generate_into` (the one driver, which generates only the (caption, kind)
pairs not yet in the output), and `caption_rng` (per-caption seeding, so a resumed or sharded run
writes what an uninterrupted one would).

The captions come from `caption_file.read_captions`, in file order: a caption's position is its `index`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation.run_output import GenerationOutput
from hf_hardpos.generation.validation import EMPTY_INPUT


def caption_rng(seed: int, caption: str, *, stream: str = "") -> random.Random:
    """The random choices for one caption, seeded by (seed, caption text) only.

    Why: a caption's output must not depend on which other captions were processed in this run (or
    on which shard it fell into), so a resumed or sharded run writes exactly what an uninterrupted
    one would have. `stream` gives independent draws per purpose (e.g. one per negative type, so
    `--kind attribute` makes the same records as the attribute column of `--kind all`).
    """
    return random.Random(f"{seed}\x00{stream}\x00{caption}" if stream else f"{seed}\x00{caption}")


# ---- what a generator returns ------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """What a generator says about one input: the raw text, the cleaned output, and the verdict.

    `extra` holds generator-specific fields written to the record as they are (e.g. the masked-LM
    path's ranked `candidates`).
    """

    raw: str | None
    output: str | None
    reason: str | None  # None when valid
    extra: Mapping[str, object] | None = None

    @property
    def valid(self) -> bool:
        return self.reason is None and self.output is not None


class CaptionGenerator:
    """What the resumable driver needs of a generator (rules, LLM, masked LM).

    Subclasses set `method`, `polarity` ("positive"/"negative"), `kind` (what the user asked for),
    `kinds` (one record per caption and kind: `kind` itself, or its parts such as the four types of
    "all"), `batch_size` and `progress`, and implement `generate` (one kind) or `generate_kinds`
    (several kinds per caption), and `options`.
    """

    method: str
    polarity: str
    kind: str
    kinds: tuple[str, ...]
    batch_size: int
    progress: bool

    def options(self) -> dict:
        """Everything that decides the records (written to the manifest, compared on resume);
        subclasses add theirs (model, seed, ...) to these."""
        return {"method": self.method, "polarity": self.polarity, "kind": self.kind}

    def settings(self) -> dict:
        """What decides the records but is known only once the model is loaded (its resolved
        generation config, the digest of its files, ...): the manifest's `settings`, refused on a
        resume when they differ. Generators without a model have none."""
        return {}

    def precheck(self, caption: str) -> str | None:
        """A reason to skip a caption without generating (the row is still written, with it)."""
        return None

    def generate(self, captions: Sequence[str]) -> list[Candidate]:
        """One candidate per caption, in order (single-kind generators)."""
        raise NotImplementedError

    def generate_kinds(self, captions: Sequence[str]) -> list[dict[str, Candidate]]:
        """One candidate per caption and kind, in order."""
        (kind,) = self.kinds
        return [{kind: candidate} for candidate in self.generate(captions)]

    def generate_rows(self, rows: Sequence[int], captions: Sequence[str]) -> list[dict[str, Candidate]]:
        """`generate_kinds` for the inputs at positions `rows` (what the driver calls): a generator
        whose random draws are keyed by input position (the LLM's row-seeded sampling) overrides it."""
        return self.generate_kinds(captions)

    def generate_to_jsonl(
        self, inputs: Sequence[str | None], output_path: str | Path, *, overwrite: bool = False
    ) -> dict:
        """Generate for every (input, kind) not yet in `output_path` (see `generate_into`)."""
        with GenerationOutput(output_path, self.options(), inputs, overwrite=overwrite) as output:
            return generate_into(self, inputs, output)


# ---- the driver --------------------------------------------------------------------------------


def _record(
    generator: CaptionGenerator, index: int, caption: str | None, kind: str, candidate: Candidate
) -> dict:
    return {
        "index": index,
        "input": caption,
        "output": candidate.output,
        "valid": candidate.valid,
        "reason": candidate.reason,
        "raw": candidate.raw,
        "method": generator.method,
        "kind": kind,
        "polarity": generator.polarity,
        **(candidate.extra or {}),
    }


# Rows the model does not need (empty, or refused by `precheck`) wait at most this many before they
# are written anyway, so a run over mostly-skipped rows still flushes regularly.
MAX_PENDING_ROWS = 4096


def generate_into(
    generator: CaptionGenerator,
    inputs: Sequence[str | None],
    output: GenerationOutput,
    *,
    indices: Sequence[int] | None = None,
) -> dict:
    """Run the generator over the (input, kind) pairs not yet in `output`, appending one line each.

    `indices` restricts the run to some input positions (a shard); records keep the global index.
    An empty caption, or one the generator's `precheck` refuses (e.g. SWAP on a caption with no
    "and"), is written with its reason without generating, so every (index, kind) appears exactly
    once. Model batches are cut from the rows that need the model: a SWAP run where four captions in
    five have no "and" still gives the model full batches of `batch_size` (cutting first and
    filtering after would hand it batches of two). Records are written in index order, each batch's
    skipped rows with it. The generator's `settings()` are checked against (or recorded in) the
    manifest first. Returns a summary: total (captions), already_done and written (records), valid,
    reason counts, model_calls and generated_rows (the rows the model saw), and the indices of the
    empty captions.
    """
    if generator.batch_size < 1:
        raise UserInputError(f"batch size must be >= 1, got {generator.batch_size}")
    output.confirm_settings(generator.settings())
    indices = range(len(inputs)) if indices is None else indices
    already = sum((i, k) in output.done for i in indices for k in generator.kinds)
    todo = [i for i in indices if any((i, k) not in output.done for k in generator.kinds)]
    reasons: Counter[str] = Counter()
    counts = {"valid": 0, "written": 0, "model_calls": 0, "generated_rows": 0}
    description = f"hard {generator.polarity}s ({'/'.join(generator.kinds)}, {generator.method})"
    batch = _Batch()
    with tqdm(
        total=len(indices),
        initial=len(indices) - len(todo),
        desc=description,
        disable=not generator.progress,
        unit="caption",
    ) as bar:

        def flush() -> None:
            records = batch.records(generator, inputs, output, counts)
            output.append(records)
            for record in records:
                counts["valid"] += record["valid"]
                if record["reason"] is not None:
                    reasons[record["reason"]] += 1
            counts["written"] += len(records)
            bar.update(len(batch.rows))
            batch.clear()

        for index in todo:
            caption = inputs[index]
            batch.add(index, EMPTY_INPUT if not caption else generator.precheck(caption))
            if len(batch.to_generate) == generator.batch_size or len(batch.rows) >= max(
                generator.batch_size, MAX_PENDING_ROWS
            ):
                flush()
        if batch.rows:
            flush()
    return {
        "total": len(indices),
        "already_done": already,
        **counts,
        "reasons": dict(reasons),
        "empty_rows": [i for i in indices if not inputs[i]],
    }


@dataclass
class _Batch:
    """The rows read since the last write, in index order: those the model must see, and those skipped
    (with the reason their records carry)."""

    rows: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    to_generate: list[int] = field(default_factory=list)

    def add(self, index: int, skip: str | None) -> None:
        self.rows.append(index)
        if skip is not None:
            self.skipped[index] = skip
        else:
            self.to_generate.append(index)

    def records(
        self,
        generator: CaptionGenerator,
        inputs: Sequence[str | None],
        output: GenerationOutput,
        counts: dict,
    ) -> list[dict]:
        """One model call for the rows that need it (counted in `counts`), then the record of every
        (row, kind) of the batch not yet in `output`, in index order."""
        results: dict[int, dict[str, Candidate]] = {
            i: {k: Candidate(raw=None, output=None, reason=self.skipped[i]) for k in generator.kinds}
            for i in self.rows
            if i in self.skipped
        }
        if self.to_generate:
            generated = generator.generate_rows(list(self.to_generate), [inputs[i] for i in self.to_generate])
            if len(generated) != len(self.to_generate):
                raise RuntimeError(
                    f"generator returned {len(generated)} results for {len(self.to_generate)} inputs"
                )
            results.update(zip(self.to_generate, generated))
            counts["model_calls"] += 1
            counts["generated_rows"] += len(self.to_generate)
        return [
            _record(generator, index, inputs[index], kind, results[index][kind])
            for index in self.rows
            for kind in generator.kinds
            if (index, kind) not in output.done
        ]

    def clear(self) -> None:
        self.rows.clear()
        self.skipped.clear()
        self.to_generate.clear()
