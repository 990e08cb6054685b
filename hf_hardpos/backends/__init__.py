"""The model-backend table: each family of models `hardpos eval --model` scores, behind one protocol.

`backend_for(argument)` picks the family of a model argument: the first backend that recognises it
(by its prefix, e.g. `open_clip:`), else `DEFAULT_BACKEND` (Hub ids, folders, checkpoint files).
The chosen backend resolves it into a `base.ResolvedModel`, which asks that backend everything else
(`base.ModelBackend`: identity, description, protocol facts, loading). A new family
is a module in this folder and its line in `BACKENDS` (docs/architecture.md, "Add a model family").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ModelBackend, ModelOptions, ResolvedModel, TextInputs, model_location
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
    "ResolvedModel",
    "TextInputs",
    "backend_for",
    "describe_model",
    "model_location",
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


def describe_model(model: str, identity: Mapping[str, Any]) -> str:
    """How a report names the model it scored (a live run's or a saved `metrics.json`'s identity): as the
    family whose identity it is describes it (`ModelBackend.describe`), else as the default backend does."""
    for backend in BACKENDS.values():
        if backend.name != DEFAULT_BACKEND and (text := backend.describe(model, identity)) is not None:
            return text
    return BACKENDS[DEFAULT_BACKEND].describe(model, identity) or model
