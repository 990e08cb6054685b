"""`ModelSource`: what `--model` names, decided once and carried to every consumer.

Why: a model string can be a Hub id, a local Hugging Face folder, a checkpoint *file* (converted once
into the conversion cache) or a model of another family scored by its own library. Deciding that anew
in each place (evaluation, suite, multi-model sweep, distributed workers, image-processor description)
let the places disagree. `ModelSource.resolve` decides it once: the backend table (`hf_hardpos.backends`)
picks the family, which converts a checkpoint if needed and identifies the content, and returns the
typed, picklable `backends.ResolvedModel` that every later question (context length, image processor,
loading, protocol facts, how a report names it) is asked of. `ModelSource` is its public name.
"""

from __future__ import annotations

from pathlib import Path

from .backends import ModelOptions, ResolvedModel, backend_for, model_location

ModelSource = ResolvedModel

__all__ = ["ModelOptions", "ModelSource", "check_model_options", "model_location", "require_model_exists"]


def require_model_exists(name_or_path: str) -> None:
    """Refuse a path-like model name that does not exist ("not found", not a Hub id error); cheap, so
    `hardpos eval` runs it before reading any data."""
    backend_for(name_or_path).require_exists(str(name_or_path))


def check_model_options(model: str | Path, options: ModelOptions | None = None) -> None:
    """Refuse, without loading or converting anything, options that cannot apply to `model` (its
    backend's `check_options`): `hardpos eval` runs it before reading any data."""
    backend_for(model).check_options(str(model), options or ModelOptions())
