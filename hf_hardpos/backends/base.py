"""The model-backend protocol: the questions every family of models answers for `ModelSource`.

Why: a `--model` argument names its family by its syntax (a folder or Hub id for transformers,
`open_clip:NAME/TAG` for open_clip) and each family differs in how it is resolved, identified,
described and loaded. Each family answers the same questions here, in one module of
`hf_hardpos.backends`, and the table in `hf_hardpos.backends.__init__` picks the family of an
argument; nothing outside that folder asks which family a model belongs to.

A backend is light to import (torch, transformers and the family's library are imported inside its
methods): `hardpos eval --help` reads the table for its `--backend` choices.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import UserInputError
from ..image_processing import DEFAULT_IMAGE_BACKEND


@dataclass(frozen=True)
class ModelOptions:
    """The options that change which model an argument names (`hardpos eval --open-clip-config /
    --activation / --tokenizer`); None means not given. One object for every family: each backend's
    `check_options` refuses those that cannot apply to its arguments."""

    open_clip_config: str | Path | dict | None = None
    activation: str | None = None
    tokenizer: str | Path | None = None

    def given(self) -> dict[str, Any]:
        """The options given, by name (what a backend refuses when it takes none)."""
        values = {
            "open_clip_config": self.open_clip_config,
            "activation": self.activation,
            "tokenizer": self.tokenizer,
        }
        return {name: value for name, value in values.items() if value is not None}


@dataclass(frozen=True)
class TextInputs:
    """What a text tower reads from token ids, declared by its family: `ITMScorer` pads every batch by it.

    Why declared, not guessed by the scorer: the families differ and a wrong guess does not fail, it
    scores other numbers (or, for open_clip, crashes only where open_clip runs). open_clip's text towers add
    their whole positional table to the ids, so they need ids padded to the context length and derive
    their masks from the ids; SigLIP was trained attending to right padding up to its context length;
    CLIP pools at the EOS token, so padding to the longest text in a batch gives the same features.

    Attributes:
        context_length: the text context: longer texts are cut to it, as the tokenizer cuts them.
        pad_to_context: pad every text to `context_length` (else to the longest text of a batch).
        padding_side: where padding goes ("right" or "left").
        pad_token_id: the id padding is made of.
        input_names: what `get_text_features` is given: `input_ids`, and `attention_mask` where the
            tower reads one (those that derive their own masks or attend to their padding get none).
    """

    context_length: int
    pad_to_context: bool
    padding_side: Literal["right", "left"]
    pad_token_id: int
    input_names: tuple[str, ...]

    @property
    def padding(self) -> str:
        """The padding as recorded with every score: "max_length" (to the context) or "longest"."""
        return "max_length" if self.pad_to_context else "longest"


# What `ModelBackend.paper_precision` says of models the paper scored as released (its default rule).
PAPER_FP32_NOTE = "float32: the paper scored open_clip checkpoints in float32"
PAPER_FP16_NOTE = "float16 weights and pixels on CUDA, as clip.load keeps OpenAI's weights"


@dataclass(frozen=True)
class ResolvedModel:
    """One `--model`, resolved once by its backend (`ModelBackend.resolve_model`) and then only asked.

    Typed and picklable (strings, a JSON-able identity, the options object and the backend's name), so
    the same decision is shipped as is to every consumer: the suite's datasets, a sweep's runs and the
    other processes of a distributed run (`evaluation.distributed`), which load it without resolving
    the argument again. Its questions are answered by the backend that resolved it, so nothing outside
    `hf_hardpos.backends` asks which family a model belongs to.

    Attributes:
        name: `--model` as given; reports, output folders and published-figure lookups use it.
        path: what the loaders read: the name itself (Hub id, folder), the conversion-cache folder of
            a checkpoint file, or the family's own spelling with its options folded in (`ModelBackend.resolve`).
        identity: the content identity recorded with every score and part of every resume key
            (`ModelBackend.identity`).
        options: the options it was resolved with.
        backend_name: the key of the backend that resolved it in `BACKENDS`.
    """

    name: str
    path: str
    identity: dict[str, Any] = field(hash=False)
    options: ModelOptions = field(default_factory=ModelOptions, hash=False)
    backend_name: str = "hf"

    @classmethod
    def resolve(
        cls, model: str | Path | ResolvedModel, options: ModelOptions | None = None, progress: bool = True
    ) -> ResolvedModel:
        """Decide what `model` is: its backend (`backends.backend_for`) resolves it (a checkpoint file is
        converted once). A `ResolvedModel` passes through unchanged (then no option may be given), so a
        caller that resolved a model once hands the same decision to everything it calls."""
        if isinstance(model, ResolvedModel):
            if options is not None and options.given():
                raise ValueError("model options apply when resolving a model name, not to a resolved model")
            return model
        from . import backend_for  # the table imports this module

        return backend_for(str(model)).resolve_model(str(model), options or ModelOptions(), progress)

    @property
    def backend(self) -> ModelBackend:
        """The family that resolved it and answers the questions below (`hf_hardpos.backends.BACKENDS`)."""
        from . import BACKENDS

        return BACKENDS[self.backend_name]

    @property
    def known(self) -> bool:
        """Whether the content is identified: False for a Hub id whose commit is unknown offline, so
        nothing saved can be proven to come from the same model."""
        return None not in (self.identity.get("sha256"), self.identity.get("revision", "local"))

    @property
    def location(self) -> str | None:
        """Where the model comes from (its folder or Hub id), whatever its content."""
        return model_location(self.identity)

    def describe(self) -> str:
        """How a report names the model: its name with content digest or Hub commit (`describe_model`)."""
        from . import describe_model

        return describe_model(self.name, self.identity)

    def holds_openai_release(self, preset: str | None = None) -> bool:
        """Whether it holds OpenAI's released CLIP weights (the paper scored those through `clip.load`):
        as its backend tells from the argument or its identity, or as the `clip` preset says."""
        return preset == "clip" or any(
            self.backend.holds_openai_release(argument, self.identity) for argument in (self.name, self.path)
        )

    def paper_precision(self, device_type: str, preset: str | None = None) -> tuple[str, str]:
        """The precision the paper's code scored it in on `device_type`, and why (`--protocol paper`)."""
        return self.backend.paper_precision(self.holds_openai_release(preset), device_type)

    def context_length(self) -> int:
        """The text tower's context length: captions longer than it are truncated (and reported)."""
        return self.backend.context_length(self.path)

    def image_processor_settings(self, image_backend: str = DEFAULT_IMAGE_BACKEND) -> dict[str, Any]:
        """The image processor it will be scored with, described without loading the model."""
        return self.backend.image_processor_settings(self.path, image_backend)

    def load(self, image_backend: str = DEFAULT_IMAGE_BACKEND):
        """`(model, processor)` for `ITMScorer`, in float32 (`ModelBackend.load`)."""
        return self.backend.load(self.path, image_backend)


def model_location(identity: Mapping[str, Any]) -> str | None:
    """Where a model comes from (its folder or Hub id), whatever its content: a folder whose weights were
    replaced is the same model, re-evaluated; another folder is another model."""
    return identity.get("path") or identity.get("hub_id") or identity.get("checkpoint_sha256")


class ModelBackend(ABC):
    """One family of models. `resolved` below is what `resolve` returned: the string the loaders read.

    Attributes:
        name: the key in `BACKENDS` and the value of `hardpos eval --backend`.
        prefix: the model arguments this family recognises start with it (`recognises`); None for
            the family every other argument belongs to (`DEFAULT_BACKEND`).
        summary: one line for `hardpos zoo`: what the family scores and what it needs installed.
    """

    name: str
    prefix: str | None = None
    summary: str = ""

    def recognises(self, model_argument: str) -> bool:
        """Whether `model_argument` (as given, or as `resolve` returned it) belongs to this family."""
        return self.prefix is not None and model_argument.startswith(self.prefix)

    def holds_openai_release(self, model_argument: str, identity: Mapping[str, Any]) -> bool:
        """Whether the argument (as given or resolved) or its identity names OpenAI's released CLIP
        weights (the paper scored those through `clip.load`: `ResolvedModel.holds_openai_release`)."""
        return False

    def paper_precision(self, openai_release: bool, device_type: str) -> tuple[str, str]:
        """`--protocol paper`: the precision the paper's code scored such a model in on `device_type`, and
        the note saying why. The rule of Kamath et al.'s loaders (hard_positives@33addaa,
        `model_zoo/__init__.py`): OpenAI's weights through `clip.load` (float16 on CUDA, float32
        elsewhere), every other checkpoint in float32. A family the paper loaded otherwise overrides it."""
        if not openai_release:
            return "fp32", PAPER_FP32_NOTE
        if device_type == "cuda":
            return "fp16-weights", PAPER_FP16_NOTE
        return "fp32", (
            f"float32 on {device_type}: clip.load converts OpenAI's weights to float32 off CUDA; the paper's "
            "float16 GPU arithmetic needs a CUDA device"
        )

    def describe(self, model: str, identity: Mapping[str, Any]) -> str | None:
        """How a report names `model` scored with `identity`, when the identity is this family's own
        (None: not this family's; the default backend names every other one)."""
        return None

    def resolve_model(
        self, model_argument: str, options: ModelOptions, progress: bool = True
    ) -> ResolvedModel:
        """`model_argument` with `options`, resolved once: the object every consumer asks (`ResolvedModel`)."""
        self.require_exists(model_argument)
        path = self.resolve(model_argument, options, progress=progress)
        return ResolvedModel(model_argument, path, self.identity(path), options, self.name)

    def require_exists(self, model_argument: str) -> None:  # noqa: B027 (a hook: most backends check nothing)
        """Refuse, in milliseconds, an argument naming a local file or folder that is not there."""

    def checkpoint_model(self, checkpoint: str, open_clip_config: str | None) -> tuple[str, str | None]:
        """`hardpos eval --model FILE --backend NAME [--open-clip-config C]`: the model argument that
        scores the checkpoint file with this family, and the `--open-clip-config` still to apply."""
        raise UserInputError(
            f"--backend {self.name} does not score checkpoint files; pass --model {self.prefix}..."
        )

    @abstractmethod
    def check_options(self, model_argument: str, options: ModelOptions) -> None:
        """Refuse, without loading anything, options that cannot apply to `model_argument`."""

    @abstractmethod
    def resolve(self, model_argument: str, options: ModelOptions, progress: bool = True) -> str:
        """What the loaders read for `model_argument` with `options` (converting or downloading as needed)."""

    @abstractmethod
    def identity(self, resolved: str) -> dict[str, Any]:
        """The content identity recorded with every score and hashed into every resume key.

        It must not change between releases for the same model: saved runs and caches are found by it.
        """

    @abstractmethod
    def context_length(self, resolved: str) -> int:
        """The text context its tokenizer pads and truncates to."""

    @abstractmethod
    def image_processor_settings(self, resolved: str, image_backend: str) -> dict[str, Any]:
        """The image processor it is scored with, described without loading the model (recorded in
        metrics.json and part of its keys)."""

    @abstractmethod
    def load(self, resolved: str, image_backend: str) -> tuple[Any, Any]:
        """`(model, processor)` for `ITMScorer`, in float32: the model has `get_image_features` /
        `get_text_features` and a `config` with the text context; the processor `.tokenizer` and
        `.image_processor`. A tokenizer that is not a transformers one declares `text_inputs` (a
        `TextInputs`), which the scorer obeys; a transformers model's is read from it by
        `hf.transformers_text_inputs`."""
