"""Which checkpoint a resume may use: only complete ones, and it says which it skipped.

Why: a kill during a save used to leave `checkpoint-N/` with only `config.json`;
`transformers.trainer_utils.get_last_checkpoint` picks the highest N whatever it holds, so
`--resume_from_checkpoint True` failed instead of falling back. `HardPosTrainer` now writes each
checkpoint under `_incomplete-checkpoint-N/` and renames it when every part is written (a leading
"_" keeps it out of Hub pushes and out of the Trainer's `checkpoint-*` rotation), and a resume checks
the parts before it trusts a folder (which also covers folders written by older versions).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..errors import UserInputError

logger = logging.getLogger(__name__)

INCOMPLETE_PREFIX = "_incomplete-"
TRAINER_STATE = "trainer_state.json"
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
_LAST = ("true", "last")


def missing_parts(folder: str | os.PathLike) -> list[str]:
    """What a resume needs that `folder` lacks (empty for a complete checkpoint)."""
    folder = Path(folder)
    missing = []
    if not (folder / TRAINER_STATE).is_file():
        missing.append(TRAINER_STATE)
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        missing.append("model weights (" + " or ".join(WEIGHT_FILES[::2]) + ")")
    return missing


def checkpoints_by_step(output_dir: str | os.PathLike) -> list[Path]:
    """`checkpoint-N` folders of `output_dir`, highest step first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in output_dir.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
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
        logger.warning("Ignoring %s: left by a save that was interrupted (safe to delete).", ", ".join(leftovers))
    if requested is True or (isinstance(requested, str) and requested.lower() in _LAST):
        skipped = []
        for folder in checkpoints_by_step(output_dir):
            missing = missing_parts(folder)
            if not missing:
                if skipped:
                    logger.warning(
                        "Resuming from %s, the last complete checkpoint: skipped %s.", folder.name, "; ".join(skipped)
                    )
                return str(folder)
            skipped.append(f"{folder.name} (incomplete: no {', '.join(missing)})")
        detail = f"; incomplete: {'; '.join(skipped)}" if skipped else ""
        raise UserInputError(
            f"--resume_from_checkpoint: no complete checkpoint in {output_dir}{detail}. "
            "Start without --resume_from_checkpoint, or point it at a complete checkpoint folder."
        )
    folder = Path(requested)
    if not folder.is_dir():
        raise UserInputError(f"--resume_from_checkpoint: {requested} is not a folder")
    missing = missing_parts(folder)
    if missing:
        complete = [p.name for p in checkpoints_by_step(folder.parent) if not missing_parts(p)]
        hint = f" The last complete one there is {complete[0]}." if complete else ""
        raise UserInputError(
            f"--resume_from_checkpoint: {requested} is incomplete (no {', '.join(missing)}), probably an "
            f"interrupted save.{hint} Pass `--resume_from_checkpoint last` to use the last complete checkpoint."
        )
    return str(folder)
