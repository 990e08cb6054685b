"""The torch-side adapters of the open_clip backend: an open_clip model, tokenizer and transform
behind the calls `ITMScorer` makes of a transformers model and processor.

Apart from `open_clip.py` so the backend table imports no torch (`hardpos eval --help` reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from PIL import Image

from ..errors import UserInputError
from .base import TextInputs


class OpenClipDualEncoder(torch.nn.Module):
    """An open_clip model behind the interface the scorer calls (`get_image_features` / `get_text_features`).

    Features are open_clip's own `encode_image` / `encode_text`, unnormalised (the scorer
    normalises); the attention mask is not passed because open_clip's text towers derive their
    own from the ids (CLIP: causal mask and EOT pooling; HF towers: ids != pad id).
    """

    def __init__(self, model: torch.nn.Module, context_length: int):
        super().__init__()
        self.model = model
        # What the scorer reads: the text context (it truncates to it) and a model type for reports.
        self.config = _Config(context_length)

    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model.encode_image(pixel_values)

    def get_text_features(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.model.encode_text(input_ids)


@dataclass
class _Config:
    max_position_embeddings: int
    model_type: str = "open_clip"


class OpenClipTokenizer:
    """open_clip's tokenizer behind the calls the scorer makes (`tokenizer(texts, truncation=..., ...)`).

    The ids the model reads are open_clip's own rows (`tokenizer(texts, context_length)`: CLIP BPE cut
    with EOT kept last, an HF tokenizer's `max_length` padding, its cleaning and `strip_sep_token`), and
    `text_inputs` declares how the scorer rebuilds such rows from unpadded ids: padded to the context
    length, on the tokenizer's side, with its pad id, and no attention mask. open_clip's text towers add
    their whole positional table and derive their masks from the ids (CLIP: causal mask and EOT pooling;
    HF towers: ids != pad id), so any other padding either fails or scores other numbers.

    With `truncation=False` each text's ids are its untruncated tokens where the context cuts it (their
    lengths find the captions the context cuts) and, where it does not, open_clip's row without its
    padding — checked to be exactly padding, so a tokenizer whose rows are not ids-then-padding (a
    class token after the padding, a reduction mask) is refused instead of scored differently.
    """

    model_input_names: ClassVar[list[str]] = ["input_ids"]

    def __init__(self, tokenizer, context_length: int):
        self.tokenizer = tokenizer
        self.model_max_length = context_length
        inner = getattr(
            tokenizer, "tokenizer", None
        )  # open_clip's HF-backed tokenizers wrap a transformers one
        self.pad_token_id = 0 if inner is None else int(inner.pad_token_id)  # CLIP BPE pads with zeros
        self.padding_side = "right" if inner is None else inner.padding_side
        self.text_inputs = TextInputs(
            context_length, True, self.padding_side, self.pad_token_id, ("input_ids",)
        )

    def __call__(
        self,
        texts,
        padding=True,
        truncation=True,
        max_length=None,
        return_tensors=None,
        verbose=True,
        return_attention_mask=None,
    ):
        # `padding` and `return_attention_mask` are accepted as the scorer passes them: rows are always
        # open_clip's, padded to the context, and no mask is ever made (`text_inputs`).
        texts = [texts] if isinstance(texts, str) else list(texts)
        rows = self.tokenizer(texts, context_length=max_length or self.model_max_length)
        if truncation:
            return {"input_ids": rows if return_tensors == "pt" else rows.tolist()}
        return {"input_ids": [self._unpadded(text, row) for text, row in zip(texts, rows.tolist())]}

    def _unpadded(self, text: str, row: list[int]) -> list[int]:
        """open_clip's row for `text` without its padding, or the untruncated tokens where the row cuts them."""
        tokens = self._untruncated(text)
        if len(tokens) > len(row):
            return tokens
        split = len(row) - len(tokens) if self.padding_side == "left" else len(tokens)
        ids, pads = (row[split:], row[:split]) if self.padding_side == "left" else (row[:split], row[split:])
        if any(token != self.pad_token_id for token in pads):
            raise UserInputError(
                f"open_clip's {type(self.tokenizer).__name__} makes rows that are not its tokens then padding "
                f"(text {text[:40]!r}); this tokenizer mode is not supported by the open_clip backend"
            )
        return ids

    def _untruncated(self, text: str) -> list[int]:
        inner = getattr(self.tokenizer, "tokenizer", None)
        if inner is not None:
            clean = getattr(self.tokenizer, "clean_fn", lambda t: t)
            return list(inner(clean(text))["input_ids"])
        return [self.tokenizer.sot_token_id, *self.tokenizer.encode(text), self.tokenizer.eot_token_id]


class OpenClipImageProcessor:
    """open_clip's own eval transform behind the call the scorer makes (`image_processor(images=...)`).

    Described by its transform's text (`image_processing.describe_image_processor`): it has no
    transformers `to_dict`; `backend` names where the transform comes from.
    """

    backend = "open_clip"

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, images: Image.Image, return_tensors: str = "pt") -> dict[str, torch.Tensor]:
        return {"pixel_values": self.transform(images).unsqueeze(0)}


@dataclass
class OpenClipProcessor:
    tokenizer: OpenClipTokenizer
    image_processor: OpenClipImageProcessor
