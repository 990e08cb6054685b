"""The record a conversion leaves in its output folder (`conversion.json`), and how to read it back.

Its own module because two sides need it: the converter writes it, and model identification
(`hf_hardpos.provenance`) reads it to name the checkpoint a folder came from. Keeping it apart from
the converter keeps that dependency one-way.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import UserInputError

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
