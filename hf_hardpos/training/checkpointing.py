"""Checkpoint folders of `HardPosTrainer`: how one is written, what it holds beside the Trainer's files,
and which one a resume may use.

Written atomically. A kill during a save used to leave `checkpoint-N/` with only `config.json`;
`transformers.trainer_utils.get_last_checkpoint` picks the highest N whatever it holds, so
`--resume_from_checkpoint True` failed instead of falling back. `HardPosTrainer` writes each checkpoint
under `_incomplete-checkpoint-N/checkpoint-N` (`staging_folder`) and renames it when every part is
written (`publish_staged`); a leading "_" keeps it out of Hub pushes and out of the Trainer's
`checkpoint-*` rotation.

What it holds beside the Trainer's files (`save_extras` / `load_extras`): the loss state
(`LOSS_STATE_NAME`: CE-CLIP's CMR thresholds, with the optimizer state, so a resumed run computes the
same loss) and the latest section of each eval set (`EVAL_SECTIONS_NAME`, in every checkpoint, so a
resumed run's card still shows it and `load_best_model_at_end` finds the best one's). The epoch and the
sampler need nothing of their own: the collator's draws and crops are seeded by (seed, epoch, row
index) and the epoch is the Trainer's `state.epoch`.

Which one a resume may use (`resolve_checkpoint`): only complete ones, saying which it skipped. A
folder is checked before it is trusted (which also covers folders written by older versions): every
part present, and none corrupt or truncated (a disk that filled up, a copy cut short), checked cheaply
from each file's own framing (safetensors header offsets, zip central directory, JSON syntax) without
loading any tensor.

The Trainer records the best checkpoint by path while the checkpoint is still being written, i.e. under
its staging name; `final_checkpoint_path` maps such a path to the folder's final name, and
`repair_best_checkpoint` fixes a `trainer_state.json` written that way before a resume reads it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import torch
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .. import output_folder
from ..errors import UserInputError
from ..evaluation.section import EVAL_SECTIONS_NAME

logger = logging.getLogger(__name__)

INCOMPLETE_PREFIX = "_incomplete-"
LOSS_STATE_NAME = "hardpos_loss_state.pt"
# Any one of these holds the weights: full model (single or sharded) or a peft adapter.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)
_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")
# `<run>/_incomplete-checkpoint-N/checkpoint-N[/...]`: a path recorded while checkpoint N was staged.
_STAGED = re.compile(
    rf"^(?P<run>.*?)/?{re.escape(INCOMPLETE_PREFIX)}(?P<name>{PREFIX_CHECKPOINT_DIR}-\d+)/(?P=name)(?P<rest>/.*)?$"
)
_LAST = ("true", "last")
# What a resume takes from the checkpoint, said in the log.
_REUSED = "weights, optimizer and scheduler, RNG states, step and log, loss state, latest eval sections"
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save's format since torch 1.6 is a zip archive


def staging_folder(run_dir: str, name: str) -> str:
    """`run_dir/_incomplete-<name>`: where checkpoint `name` is written before `publish_staged` names it."""
    return os.path.join(run_dir, INCOMPLETE_PREFIX + name)


def publish_staged(run_dir: str, name: str) -> str:
    """Rename the staged `_incomplete-<name>/<name>` to `run_dir/<name>` (a second save of the same step
    replaces the first); returns the final folder. Called on the saving process once every part is there."""
    staging = staging_folder(run_dir, name)
    final = os.path.join(run_dir, name)
    if os.path.isdir(final):
        replaced = os.path.join(run_dir, INCOMPLETE_PREFIX + "replaced-" + name)
        os.replace(final, replaced)
        shutil.rmtree(replaced)
    os.replace(os.path.join(staging, name), final)
    os.rmdir(staging)
    return final


def save_extras(
    folder: str, objective: torch.nn.Module, eval_sections: dict[str, dict], training_state: bool
) -> None:
    """Write what a checkpoint holds beside the Trainer's files: the latest eval sections always (also
    with `save_only_model`), the loss state when `training_state` (the optimizer state is saved too)."""
    with open(os.path.join(folder, EVAL_SECTIONS_NAME), "w", encoding="utf-8") as file:
        json.dump(eval_sections, file, indent=2, default=_json_number)
    if training_state:
        torch.save(objective.state_dict(), os.path.join(folder, LOSS_STATE_NAME))


def read_eval_sections(folder: str) -> dict[str, dict] | None:
    """The eval sections saved in `folder`, or None for a checkpoint written before they were saved."""
    path = os.path.join(folder, EVAL_SECTIONS_NAME)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def load_loss_state(folder: str, objective: torch.nn.Module, device: torch.device | str) -> None:
    """Restore `objective`'s state (CMR thresholds) from `folder`, so a resumed run computes the same loss.

    A stateless objective resumes from any checkpoint; one with state refuses a checkpoint without it.
    """
    path = os.path.join(folder, LOSS_STATE_NAME)
    if not os.path.isfile(path):
        if objective.state_dict():
            raise FileNotFoundError(
                f"{path} is missing: the checkpoint has no loss state (CMR thresholds), so resuming "
                "would change the loss. Was it written by HardPosTrainer?"
            )
        return
    objective.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    logger.info("Restored the loss state from %s", path)


def _json_number(value: Any) -> Any:
    """numpy scalars in a section, as Python numbers."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def missing_parts(folder: str | os.PathLike) -> list[str]:
    """What a resume needs that `folder` lacks (empty for a complete checkpoint)."""
    folder = Path(folder)
    missing = []
    if not (folder / TRAINER_STATE_NAME).is_file():
        missing.append(TRAINER_STATE_NAME)
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        missing.append("model weights (" + " or ".join(WEIGHT_FILES[::2]) + ")")
    return missing


def corrupt_parts(folder: str | os.PathLike) -> list[str]:
    """The files of `folder` that are damaged (empty, truncated, unparsable), each with what is wrong.

    Cheap checks from each format's own framing, no tensor loaded: a safetensors file must be exactly
    as long as its header's largest data offset says; a zip-format torch file (`optimizer.pt`,
    `rng_state.pth`, `*.bin`) must have its central directory, which sits at the very end; JSON files
    must parse; a sharded index must name shards that exist.
    """
    folder = Path(folder)
    problems = []
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        problem = _damage(path)
        if problem:
            problems.append(f"{path.name} {problem}")
    return problems


def _damage(path: Path) -> str | None:
    size = path.stat().st_size
    if size == 0 and path.suffix in (".safetensors", ".json", ".pt", ".pth", ".bin"):
        return "is empty"
    try:
        if path.suffix == ".safetensors":
            return _safetensors_damage(path, size)
        if path.suffix == ".json":
            content = json.loads(path.read_text(encoding="utf-8"))
            if path.name.endswith(".index.json") and isinstance(content, dict):
                shards = sorted(set((content.get("weight_map") or {}).values()))
                absent = [s for s in shards if not (path.parent / s).is_file()]
                return f"names missing shard(s) {absent}" if absent else None
            return None
        if path.suffix in (".pt", ".pth", ".bin"):
            with path.open("rb") as file:
                magic = file.read(4)
            if magic == _ZIP_MAGIC and not zipfile.is_zipfile(path):
                return "is truncated (its zip directory is missing)"
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return f"cannot be read ({type(error).__name__}: {str(error)[:80]})"
    return None


def _safetensors_damage(path: Path, size: int) -> str | None:
    """safetensors layout: 8-byte little-endian header length, JSON header, then the tensors' bytes."""
    with path.open("rb") as file:
        head = file.read(8)
        if len(head) < 8:
            return f"is truncated ({size} bytes, shorter than its header)"
        (header_length,) = struct.unpack("<Q", head)
        if 8 + header_length > size:
            return f"is truncated ({size} of at least {8 + header_length} bytes)"
        header = json.loads(file.read(header_length))
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + header_length + max(ends, default=0)
    if size != expected:
        return f"is {'truncated' if size < expected else 'longer than its header says'} ({size} of {expected} bytes)"
    return None


def final_checkpoint_path(path: str | None) -> str | None:
    """`path` with a staging folder `_incomplete-checkpoint-N/checkpoint-N` replaced by `checkpoint-N`."""
    if path is None:
        return None
    match = _STAGED.match(str(path).replace(os.sep, "/"))
    if match is None:
        return path
    return os.path.join(match["run"], match["name"]) + (match["rest"] or "")


def repair_best_checkpoint(checkpoint: str | os.PathLike) -> None:
    """Rewrite `checkpoint/trainer_state.json` if it names the best checkpoint by its staging path.

    Why: checkpoints written by earlier versions record the best checkpoint as
    `_incomplete-checkpoint-N/checkpoint-N`; transformers drops a recorded best checkpoint that does
    not exist on resume, after which checkpoint rotation deletes the real best one and
    `load_best_model_at_end` loads nothing.
    """
    path = Path(checkpoint) / TRAINER_STATE_NAME
    state = json.loads(path.read_text(encoding="utf-8"))
    recorded = state.get("best_model_checkpoint")
    fixed = final_checkpoint_path(recorded)
    if fixed == recorded:
        return
    state["best_model_checkpoint"] = fixed
    output_folder.write_text(path, json.dumps(state, indent=2, sort_keys=True) + "\n")
    logger.warning(
        "%s named the best checkpoint by its staging path %s; corrected to %s.", path, recorded, fixed
    )


def checkpoints_by_step(output_dir: str | os.PathLike) -> list[Path]:
    """`checkpoint-N` folders of `output_dir`, highest step first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in output_dir.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))
    ]
    return [p for _, p in sorted(found, reverse=True)]


def resolve_checkpoint(output_dir: str, requested: str | bool | None) -> str | None:
    """The checkpoint folder to resume from, or None to start afresh.

    `requested` is what `--resume_from_checkpoint` / `train(resume_from_checkpoint=...)` holds: None or
    False (start afresh), True / "true" / "last" (the last *complete* checkpoint of `output_dir`,
    skipping incomplete ones with a warning that names each and what it lacks), or a folder (which
    must be complete: falling back silently from a folder the user named would resume another run).
    """
    if requested is None or requested is False or requested == "":
        return None
    leftovers = sorted(p.name for p in Path(output_dir).glob(f"{INCOMPLETE_PREFIX}{PREFIX_CHECKPOINT_DIR}-*"))
    if leftovers:
        logger.warning(
            "Ignoring %s: left by a save that was interrupted (safe to delete).", ", ".join(leftovers)
        )
    if requested is True or (isinstance(requested, str) and requested.lower() in _LAST):
        skipped = []
        for folder in checkpoints_by_step(output_dir):
            problem = _unusable(folder)
            if problem is None:
                if skipped:
                    logger.warning(
                        "Resuming from %s, the last complete checkpoint: skipped %s.",
                        folder.name,
                        "; ".join(skipped),
                    )
                else:
                    logger.info(
                        "Resuming from %s, the last checkpoint of %s (%s).", folder.name, output_dir, _REUSED
                    )
                return str(folder)
            skipped.append(f"{folder.name} ({problem})")
        detail = f"; unusable: {'; '.join(skipped)}" if skipped else ""
        raise UserInputError(
            f"--resume_from_checkpoint: no complete checkpoint in {output_dir}{detail}. "
            "Start without --resume_from_checkpoint, or point it at a complete checkpoint folder."
        )
    folder = Path(requested)
    if not folder.is_dir():
        raise UserInputError(f"--resume_from_checkpoint: {requested} is not a folder")
    problem = _unusable(folder)
    if problem is not None:
        complete = [p.name for p in checkpoints_by_step(folder.parent) if _unusable(p) is None]
        hint = f" The last complete one there is {complete[0]}." if complete else ""
        raise UserInputError(
            f"--resume_from_checkpoint: {requested} is unusable ({problem}), probably an interrupted save or a full disk."
            f"{hint} Pass `--resume_from_checkpoint last` to use the last complete checkpoint."
        )
    logger.info("Resuming from %s, as requested (%s).", folder, _REUSED)
    return str(folder)


def checkpoint_to_resume(output_dir: str | os.PathLike, requested: str | bool | None) -> str | bool | None:
    """What a run writing into `output_dir` resumes from, as transformers' example scripts decide it.

    `requested` (`--resume_from_checkpoint`) when given; else "last" when `output_dir` holds a complete
    checkpoint (a rerun of an interrupted command goes on from it, and the log says so); else None (start
    afresh) for a folder with no trace of a run. A folder that holds a run but no complete checkpoint is
    refused: starting from step 0 would write new checkpoints beside the old ones.
    """
    if requested not in (None, False, ""):
        return requested
    output_dir = Path(output_dir)
    complete = [p for p in checkpoints_by_step(output_dir) if _unusable(p) is None]
    if complete:
        logger.warning("%s holds %s from an earlier run of this command: resuming from it (give another "
                       "--output_dir to start afresh).", output_dir, complete[0].name)  # fmt: skip
        return "last"
    traces = [p.name for p in checkpoints_by_step(output_dir)]
    traces += [name for name in (TRAINER_STATE_NAME, "model.safetensors") if (output_dir / name).is_file()]
    if traces:
        raise UserInputError(f"{output_dir} already holds a run ({', '.join(traces)}) and no complete checkpoint "
                             "to resume from; give another --output_dir (nothing there is deleted)")  # fmt: skip
    return None


def _unusable(folder: Path) -> str | None:
    """Why a resume cannot use `folder` ("incomplete: no ...", "corrupt: ..."), or None."""
    missing = missing_parts(folder)
    if missing:
        return f"incomplete: no {', '.join(missing)}"
    corrupt = corrupt_parts(folder)
    if corrupt:
        return f"corrupt: {'; '.join(corrupt)}"
    return None
