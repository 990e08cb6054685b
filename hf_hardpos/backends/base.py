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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import UserInputError


@dataclass(frozen=True)
class ModelOptions:
    """The options that change which model an argument names (`hardpos eval --open-clip-config /
    --activation / --tokenizer`); None means not given."""

    open_clip_config: str | Path | dict | None = None
    activation: str | None = None
    tokenizer: str | Path | None = None

    def given(self) -> dict[str, Any]:
        """The options given, by name (what `ModelSource.options` records for other processes)."""
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

    def holds_openai_release(self, model_argument: str) -> bool:
        """Whether the argument names OpenAI's released CLIP weights in this family's syntax (the paper
        scored those through `clip.load`: `protocol.is_openai_weights`)."""
        return False

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
