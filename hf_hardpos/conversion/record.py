"""The record a conversion leaves in its output folder (`conversion.json`), and how to read it back.

Its own module because two sides need it: the converter writes it, and model identification
(the hf backend's `identity`, through `converted_from`) reads it to name the checkpoint a folder came
from. Keeping it apart from the converter keeps that dependency one-way and light (no torch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UserInputError

MARKER = "conversion.json"

# The kinds of checkpoint file (`checkpoint_kind` in `conversion.json`), as `state_dict.load_state_dict` names them.
OPENAI_ARCHIVE = "OpenAI TorchScript archive"
PLAIN_STATE_DICT = "plain state dict"
TRAINING_CHECKPOINT = "open_clip training checkpoint"
DDP_PREFIX_REMOVED = (
    " (DDP, module. prefix removed)"  # appended to the kind when `module.` prefixes were dropped
)


def load_conversion_facts(folder: str | Path) -> dict:
    """The `conversion.json` of a converted folder."""
    path = Path(folder) / MARKER
    if not path.is_file():
        raise UserInputError(f"{folder}: not a converted model folder (no {MARKER})")
    return json.loads(path.read_text())


def converted_from(folder: str | Path) -> dict[str, Any] | None:
    """The checkpoint a converted model folder was made from, from its `conversion.json`; None for other
    folders. Part of the folder's identity: its keys must stay as they are (saved runs are found by them)."""
    if not (Path(folder) / MARKER).is_file():
        return None
    facts = load_conversion_facts(folder)
    return {
        "checkpoint": facts[
            "checkpoint"
        ],  # the file name when first converted (the cache is keyed by content)
        "checkpoint_sha256": facts["sha256"],
        "checkpoint_kind": facts["checkpoint_kind"],
        "open_clip_config": facts["open_clip_config"]["source"],
        "activation": facts["activation"],
        "lora": facts["lora"],
        "tokenizer": facts["tokenizer"],
    }
