"""The model-backend table: each family of models `hardpos eval --model` scores, behind one protocol.

`backend_for(argument)` picks the family of a model argument: the first backend that recognises it
(by its prefix, e.g. `open_clip:`), else `DEFAULT_BACKEND` (Hub ids, folders, checkpoint files).
`model_source.ModelSource` asks the chosen backend everything else (`base.ModelBackend`). A new family
is a module in this folder and its line in `BACKENDS` (docs/architecture.md, "Add a model family").
"""

from __future__ import annotations

from .base import ModelBackend, ModelOptions, TextInputs
from .hf import HFBackend, transformers_text_inputs
from .open_clip import OpenClipBackend

DEFAULT_BACKEND = HFBackend.name
BACKENDS: dict[str, ModelBackend] = {
    backend.name: backend
    for backend in (
        HFBackend(),
        OpenClipBackend(),
    )
}

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "ModelBackend",
    "ModelOptions",
    "TextInputs",
    "backend_for",
    "text_inputs_of",
]


def backend_for(model_argument: object) -> ModelBackend:
    """The backend of a model argument as given or as resolved (`ModelBackend.recognises`)."""
    argument = str(model_argument)
    for backend in BACKENDS.values():
        if backend.recognises(argument):
            return backend
    return BACKENDS[DEFAULT_BACKEND]


def text_inputs_of(model, tokenizer) -> TextInputs:
    """What `model` reads from `tokenizer`'s ids: what the tokenizer declares (`TextInputs`; the open_clip
    backend's does), else what a transformers model reads (`hf.transformers_text_inputs`)."""
    declared = getattr(tokenizer, "text_inputs", None)
    return declared if isinstance(declared, TextInputs) else transformers_text_inputs(model, tokenizer)
