"""One generation run spread over many processes (and machines), each rank resumable on its own.

Why: the paper's 710,824 hard positives took 36 hours on 32 GPUs. Under `accelerate launch` or
`torchrun` (`WORLD_SIZE` > 1), rank r of n takes the input indices r, r+n, r+2n, ... (interleaved,
so ranks get similar work whatever the caption order) and writes its own resumable shard,
`<output>.shards/rank-RRRRR-of-NNNNN.jsonl`, with its own manifest and lock. When every rank is done
the main process merges the shards into `<output>`, keyed by input index, checking that every
(index, kind) is present exactly once. A rerun of the same command after any rank died resumes
every shard, so only the missing rows are generated. The shards must sit on a filesystem every
machine sees, and a rerun must use the same number of processes (a different one is refused).

Without a launcher (`--num-shards N --shard-index I`, e.g. one process per machine for a model that
needs a whole machine), each process writes the same shard files (`run_shard`); a later run
without those options merges them. Finished work is never redone when switching modes: a single-process run first moves the records
of `<output>.shards/` (when they were written with the same options) into `<output>`, and a sharded
run skips the rows `<output>` already holds; shards or an output of another run are refused with
what to do.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation.resumable import CaptionGenerator, generate_into
from hf_hardpos.generation.run_output import (
    GenerationOutput,
    describe_differences,
    manifest_path,
    read_done,
    read_manifest,
)


def world_size() -> int:
    """Processes in this launch (`WORLD_SIZE`, set by torchrun and accelerate launch); 1 otherwise."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def shard_dir(output_path: str | Path) -> Path:
    output_path = Path(output_path)
    return output_path.with_name(output_path.name + ".shards")


def shard_path(output_path: str | Path, rank: int, world: int) -> Path:
    return shard_dir(output_path) / f"rank-{rank:05d}-of-{world:05d}.jsonl"


def shard_indices(rows: int, rank: int, world: int) -> range:
    """The input positions of one rank: rank, rank + world, ..."""
    return range(rank, rows, world)


def check_world_size(output_path: Path, world: int) -> None:
    """Refuse shards left by a launch with another number of processes (their rows would be lost)."""
    suffix = f"-of-{world:05d}.jsonl"
    others = sorted(
        p.name for p in shard_dir(output_path).glob("rank-*.jsonl") if not p.name.endswith(suffix)
    )
    if others:
        raise UserInputError(
            f"{shard_dir(output_path)} holds shards of a launch with another number of processes ({others[0]}); "
            f"rerun with that number of processes, or use --overwrite to start again"
        )


def _shard_options(path: Path) -> dict | None:
    """The options a shard was written with, without its "shard" entry (None: no manifest, no records)."""
    if not manifest_path(path).exists():
        return None
    manifest = read_manifest(manifest_path(path), "remove the shard folder or use --overwrite to start again")
    return {key: value for key, value in manifest.get("options", {}).items() if key != "shard"}


def _refuse_other_run(where: Path, theirs: dict, ours: dict, advice: str) -> None:
    differences = describe_differences(theirs, ours)
    if differences:
        raise UserInputError(
            f"{where} was written by a run with other options: {'; '.join(differences)}; {advice}"
        )


def merge_shards(
    output_path: str | Path, options: dict, inputs: Sequence[str | None], kinds: Sequence[str], world: int
) -> dict:
    """Write every shard's records into `output_path` in (index, kind) order; return counts.

    Records `output_path` already holds (a single-process run before the launch) count as done.
    Raises UserInputError when an (index, kind) is missing from the shards and the output (a rank
    has not finished: rerun the launch) and RuntimeError when one appears in a shard that does not own it.
    """
    records = {}
    settings = None
    for rank in range(world):
        path = shard_path(output_path, rank, world)
        owned = set(shard_indices(len(inputs), rank, world))
        if manifest_path(path).exists() and settings is None:
            settings = read_manifest(manifest_path(path), "rerun the same launch").get("settings")
        for (index, kind), record in read_done(path, inputs).items():
            if index not in owned:
                raise RuntimeError(f"{path}: index {index} belongs to another rank")
            records[(index, kind)] = record
    with GenerationOutput(output_path, options, inputs) as output:
        missing = [
            (i, k)
            for i in range(len(inputs))
            for k in kinds
            if (i, k) not in records and (i, k) not in output.done
        ]
        if missing:
            raise UserInputError(
                f"cannot merge {shard_dir(output_path)}: {len(missing)} (index, kind) records are missing "
                f"(first: {missing[0]}); a rank did not finish, rerun the same launch to resume it"
            )
        if settings is not None:
            output.confirm_settings(settings)
        todo = [records[(i, k)] for i in range(len(inputs)) for k in kinds if (i, k) not in output.done]
        output.append(todo)
    return {"shards": world, "records": len(inputs) * len(kinds), "merged_now": len(todo)}


def adopt_shards(output: GenerationOutput, options: dict, inputs: Sequence[str | None]) -> int:
    """Single-process run: move the finished records of `<output>.shards/` into `output`; return how many.

    Why: a sharded launch that was stopped and is continued in one process must not generate its
    rows again. Shards written with other options are refused (they may be another model's).
    """
    folder = shard_dir(output.path)
    shards = sorted(folder.glob("rank-*-of-*.jsonl")) if folder.is_dir() else []
    adopted = []
    for path in shards:
        theirs = _shard_options(path)
        if theirs is None:
            continue
        _refuse_other_run(
            path,
            theirs,
            options,
            f"rerun with its options, remove {folder} or use --overwrite to start again",
        )
        settings = read_manifest(manifest_path(path), "remove the shard folder").get("settings")
        if settings is not None:
            output.confirm_settings(settings)  # the generator's own settings are then checked against them
        adopted += [record for key, record in read_done(path, inputs).items() if key not in output.done]
    adopted.sort(key=lambda record: (record["index"], str(record.get("kind"))))
    if adopted:
        output.append(adopted)
    return len(adopted)


def finished_in_output(output_path: Path, options: dict, inputs: Sequence[str | None]) -> dict:
    """Sharded run: the records a single-process run already wrote to `output_path`, by (index, kind),
    after checking they were written with the same options (read only: every rank reads it)."""
    if not output_path.exists() or output_path.stat().st_size == 0:
        return {}
    if not manifest_path(output_path).exists():
        raise UserInputError(
            f"{output_path} has records but no manifest, so its options are unknown; use --overwrite to start again"
        )
    manifest = read_manifest(
        manifest_path(output_path), "use --overwrite to start again or choose another --output"
    )
    _refuse_other_run(
        output_path,
        manifest.get("options", {}),
        options,
        "rerun with its options in one process, use --overwrite to start again, or choose another --output",
    )
    return read_done(output_path, inputs, repair=False)


def run_shard(
    build_generator: Callable[[], CaptionGenerator],
    inputs: Sequence[str | None],
    output_path: str | Path,
    options: dict,
    rank: int,
    world: int,
    *,
    overwrite: bool = False,
) -> tuple[dict, CaptionGenerator]:
    """Generate shard `rank` of `world` (input rows rank, rank + world, ...) into its own resumable file.

    Why on its own: a model that needs a whole machine per copy (Llama-2-70B in float16 over 4-8 GPUs
    with `device_map="auto"`) runs one process per machine, and the machines need not share a
    launcher: each runs `hardpos generate --num-shards N --shard-index I`, and a later run without
    them merges the shards (`adopt_shards`). Sampling is seeded per (seed, row), so the shards write
    what one process would have. `build_generator()` is called after the shard is opened (a refused
    resume fails before a model is loaded). Returns the summary and the generator.
    """
    output_path = Path(output_path)
    check_world_size(output_path, world)
    shard_options = {**options, "shard": f"rank {rank} of {world}"}
    indices = shard_indices(len(inputs), rank, world)
    finished = finished_in_output(output_path, options, inputs)  # rows a single-process run already wrote
    path = shard_path(output_path, rank, world)
    with GenerationOutput(path, shard_options, inputs, overwrite=overwrite) as shard:
        owned = set(indices)
        shard.done.update({key: record for key, record in finished.items() if key[0] in owned})
        generator = build_generator()
        summary = generate_into(generator, inputs, shard, indices=indices)
    summary.update(rank=rank, world_size=world, shard=str(path))
    return summary, generator


def generate_sharded(
    build_generator: Callable[[object], CaptionGenerator],
    inputs: Sequence[str | None],
    output_path: str | Path,
    options: dict,
    *,
    overwrite: bool = False,
) -> dict:
    """Under `accelerate launch` / `torchrun`: run this rank's shard, then (main process) merge all
    shards into `output_path`.

    `build_generator(state)` gets the `accelerate.PartialState` (for `state.device`) and is called
    after this rank's shard is opened, so a refused resume fails before a model is loaded.
    """
    import torch
    from accelerate import PartialState

    # Without a GPU, accelerate starts its multi-process (gloo) state only when asked for the CPU.
    state = PartialState(cpu=not torch.cuda.is_available())
    rank, world = state.process_index, state.num_processes
    output_path = Path(output_path)
    if overwrite and state.is_main_process:
        shutil.rmtree(shard_dir(output_path), ignore_errors=True)
        output_path.unlink(missing_ok=True)
        manifest_path(output_path).unlink(missing_ok=True)
    state.wait_for_everyone()
    summary, generator = run_shard(lambda: build_generator(state), inputs, output_path, options, rank, world)
    state.wait_for_everyone()
    if state.is_main_process:
        summary["merge"] = merge_shards(output_path, options, inputs, generator.kinds, world)
    state.wait_for_everyone()
    return summary
