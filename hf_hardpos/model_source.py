"""`ModelSource`: what `--model` names, decided once and carried to every consumer.

Why: a model string can be a Hub id, a local Hugging Face folder, an open_clip / OpenAI / TSVLC
checkpoint *file* (converted once into the conversion cache) or a model of another family, such as
`open_clip:NAME/TAG` scored by open_clip itself. Deciding that anew in each place (evaluation, suite,
multi-model sweep, distributed workers, image-processor description) let the places disagree.
`ModelSource.resolve` decides it once: the backend table (`hf_hardpos.backends`) picks the family, which
converts a checkpoint if needed and identifies the content (sha256 of local files, Hub commit, the
checkpoint's sha256 and activation for a converted file, open_clip's own facts for an open_clip model);
every later question (context length, image processor, loading, how a report names it) is answered
from what it decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends import ModelBackend, ModelOptions, backend_for
from .image_processing import DEFAULT_IMAGE_BACKEND
from .provenance import describe_model


def require_model_exists(name_or_path: str) -> None:
    """Refuse a path-like model name that does not exist ("not found", not a Hub id error); cheap, so
    `hardpos eval` runs it before reading any data."""
    backend_for(name_or_path).require_exists(str(name_or_path))


def check_model_options(
    model: str | Path,
    open_clip_config: str | Path | dict | None = None,
    activation: str | None = None,
    tokenizer: str | Path | None = None,
) -> None:
    """Refuse, without loading or converting anything, options that cannot apply to `model` (its
    backend's `check_options`): `hardpos eval` runs it before reading any data."""
    backend_for(model).check_options(str(model), ModelOptions(open_clip_config, activation, tokenizer))


def model_location(identity: Mapping[str, Any]) -> str | None:
    """Where a model comes from (its folder or Hub id), whatever its content: a folder whose weights were
    replaced is the same model, re-evaluated; another folder is another model."""
    return identity.get("path") or identity.get("hub_id") or identity.get("checkpoint_sha256")


@dataclass(frozen=True)
class ModelSource:
    """One evaluated model: the name the user gave, what loads, and the identity of its content.

    Attributes:
        name: `--model` as given; reports, output folders and published-figure lookups use it.
        path: what the loaders read: the name itself (Hub id, folder), the conversion-cache folder of
            a checkpoint file, or an `open_clip:` spec with its options folded in (`ModelBackend.resolve`).
        identity: the content identity recorded with every score and part of every resume key
            (`ModelBackend.identity`).
        options: the conversion options it was resolved with (`open_clip_config`, `activation`,
            `tokenizer`), so another process can resolve the same model (`evaluation.distributed`).
    """

    name: str
    path: str
    identity: dict[str, Any] = field(hash=False)
    options: dict[str, Any] = field(default_factory=dict, hash=False)

    @classmethod
    def resolve(
        cls,
        model: str | Path | ModelSource,
        open_clip_config: str | Path | dict | None = None,
        activation: str | None = None,
        tokenizer: str | Path | None = None,
        progress: bool = True,
    ) -> ModelSource:
        """Decide what `model` is; its backend resolves it (a checkpoint file is converted once).

        A `ModelSource` passes through unchanged (then no conversion option may be given), so a
        caller that resolved a model once hands the same decision to everything it calls.
        """
        if isinstance(model, ModelSource):
            if any(o is not None for o in (open_clip_config, activation, tokenizer)):
                raise ValueError(
                    "conversion options apply when resolving a model name, not to a resolved ModelSource"
                )
            return model
        name = str(model)
        backend = backend_for(name)
        options = ModelOptions(open_clip_config, activation, tokenizer)
        backend.require_exists(name)
        path = backend.resolve(name, options, progress=progress)
        return cls(name, path, backend.identity(path), options.given())

    @property
    def backend(self) -> ModelBackend:
        """The family that resolved it and answers the questions below (`hf_hardpos.backends`)."""
        return backend_for(self.path)

    @property
    def known(self) -> bool:
        """Whether the content is identified: False for a Hub id whose commit is unknown offline, so
        nothing saved can be proven to come from the same model."""
        return None not in (self.identity.get("sha256"), self.identity.get("revision", "local"))

    @property
    def location(self) -> str | None:
        """`model_location` of this model."""
        return model_location(self.identity)

    def describe(self) -> str:
        """How a report names the model: its name with content digest or Hub commit (`describe_model`)."""
        return describe_model(self.name, self.identity)

    def context_length(self) -> int:
        """The text tower's context length: captions longer than it are truncated (and reported)."""
        return self.backend.context_length(self.path)

    def image_processor_settings(self, image_backend: str = DEFAULT_IMAGE_BACKEND) -> dict[str, Any]:
        """The image processor it will be scored with, described without loading the model."""
        return self.backend.image_processor_settings(self.path, image_backend)

    def load(self, image_backend: str = DEFAULT_IMAGE_BACKEND):
        """`(model, processor)` for `ITMScorer`, in float32 (`ModelBackend.load`): transformers'
        `AutoModel` + `AutoProcessor` (CLIP, SigLIP, ...), or open_clip's own model."""
        return self.backend.load(self.path, image_backend)
