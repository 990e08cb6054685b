"""`ModelSource`: what `--model` names, decided once and carried to every consumer.

Why: a model string can be a Hub id, a local Hugging Face folder, an open_clip / OpenAI / TSVLC
checkpoint *file* (converted once into the conversion cache) or an `open_clip:NAME/TAG` spec scored by
open_clip itself. Deciding that anew in each place (evaluation, suite, multi-model sweep, distributed
workers, image-processor description) let the places disagree. `ModelSource.resolve` decides it once:
it converts a checkpoint if needed, identifies the content (sha256 of local files, Hub commit, the
checkpoint's sha256 and activation for a converted file, open_clip's own facts for a native model) and
then answers every later question (context length, image processor, loading, how a report names it)
from what it decided.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import open_clip_native
from .errors import UserInputError, first_line
from .image_processing import (
    DEFAULT_IMAGE_BACKEND,
    image_processor_settings,
    load_image_processor,
)
from .provenance import describe_model, looks_like_path, model_identity


def require_model_exists(name_or_path: str) -> None:
    """Refuse a path-like model name that does not exist ("not found", not a Hub id error); cheap, so
    `hardpos eval` runs it before reading any data."""
    if looks_like_path(name_or_path) and not open_clip_native.is_native(name_or_path) \
            and not Path(name_or_path).expanduser().exists():
        raise UserInputError(f"model not found: {name_or_path} (no such folder)")


def missing_model_message(name: str, path: str, err: Exception) -> str:
    """What is wrong with a model that cannot be loaded, and what to run (one line)."""
    folder = Path(path).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            return (f"model {name}: the folder has no config.json, so it is no saved Hugging Face model (an open_clip "
                    "or OpenAI checkpoint is a file: pass that file with --open-clip-config NAME, or convert it once with "
                    "`hardpos convert`)")
        return f"model {name}: its config.json cannot be read as a CLIP-like model ({first_line(err)})"
    if folder.is_file():
        return (f"model {name} is a file: a checkpoint needs --open-clip-config NAME (open_clip) or is converted "
                "with `hardpos convert`; a Hugging Face model is a folder or a Hub id")
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    reach = "HF_HUB_OFFLINE is set" if offline else "the Hub did not answer or has no such model"
    return (f"model {name!r} is not a local folder and not in the Hugging Face cache, and {reach}: check the id "
            f"(owner/name), or download it once online (`hf download {name}`) and rerun, or pass a local folder")


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
            a checkpoint file, or an `open_clip:` spec with its options folded in.
        identity: the content identity recorded with every score and part of every resume key
            (`provenance.model_identity`, or `open_clip_native.identity`).
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
        """Decide what `model` is; a checkpoint file is converted once (`conversion.resolve_model`).

        A `ModelSource` passes through unchanged (then no conversion option may be given), so a
        caller that resolved a model once hands the same decision to everything it calls.
        """
        if isinstance(model, ModelSource):
            if any(o is not None for o in (open_clip_config, activation, tokenizer)):
                raise ValueError("conversion options apply when resolving a model name, not to a resolved ModelSource")
            return model
        from .conversion import resolve_model

        name = str(model)
        require_model_exists(name)
        path = resolve_model(name, open_clip_config, activation, tokenizer, progress=progress)
        identity = open_clip_native.identity(path) if open_clip_native.is_native(path) else model_identity(path)
        options = {"open_clip_config": open_clip_config, "activation": activation, "tokenizer": tokenizer}
        return cls(name, path, identity, {k: v for k, v in options.items() if v is not None})

    @property
    def native(self) -> bool:
        """Scored by open_clip itself (`open_clip_native`), with its own transforms and tokenizer."""
        return open_clip_native.is_native(self.path)

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
        from transformers import AutoConfig

        from .scoring import text_context_length

        if self.native:
            return open_clip_native.context_length(self.path)
        try:
            return text_context_length(AutoConfig.from_pretrained(self.path))
        except (OSError, ValueError) as err:
            raise UserInputError(missing_model_message(self.name, self.path, err)) from err

    def image_processor_settings(self, image_backend: str = DEFAULT_IMAGE_BACKEND) -> dict[str, Any]:
        """The image processor it will be scored with, described without loading the model."""
        return image_processor_settings(self.path, image_backend)

    def load(self, image_backend: str = DEFAULT_IMAGE_BACKEND):
        """`AutoModel` + `AutoProcessor` (CLIP, SigLIP, ...) in float32, or open_clip's own model.

        float32 whatever dtype the weights were saved in: transformers 5 loads `dtype="auto"`, so a
        checkpoint saved in half precision would otherwise be scored in half precision (outcomes of
        near-tied rows flip) while the report says fp32; `--dtype` is the one switch for lower
        precision. Refuses, with a one-line reason naming the file to add, a model that is not a dual
        encoder (the scorer needs `get_image_features` and `get_text_features`), a missing or
        degenerate tokenizer and a missing image processor (`model_checks`).
        """
        import torch
        from transformers import AutoModel, AutoProcessor

        from .model_checks import check_image_processor, check_tokenizer

        if self.native:
            return open_clip_native.load(self.path)
        where = "local folder" if Path(self.path).expanduser().exists() else "Hub id (offline: it must be in the local cache)"
        try:
            model = AutoModel.from_pretrained(self.path, dtype=torch.float32)
        except (OSError, ValueError, KeyError) as err:
            raise UserInputError(f"cannot load model {self.path!r} as a {where}: {first_line(err)}") from err
        if not all(hasattr(model, m) for m in ("get_image_features", "get_text_features")):
            raise UserInputError(
                f"{self.path} is a {type(model).__name__}, not a dual encoder (needs get_image_features/get_text_features)"
            )
        try:
            processor = AutoProcessor.from_pretrained(self.path)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserInputError(
                f"cannot load the processor of model {self.path!r} ({where}): add preprocessor_config.json (or "
                f"processor_config.json) and the tokenizer files from the base model ({first_line(err)})"
            ) from err
        if getattr(processor, "image_processor", None) is not None:  # pinned, not the backend AutoProcessor picked
            processor.image_processor = load_image_processor(self.path, image_backend)
        check_image_processor(self.path, processor)
        text_config = getattr(model.config, "text_config", model.config)
        check_tokenizer(self.path, getattr(processor, "tokenizer", None), text_config)
        return model, processor
