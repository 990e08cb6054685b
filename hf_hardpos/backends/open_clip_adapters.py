"""The torch-side adapters of the open_clip backend: an open_clip model, tokenizer and transform
behind the calls `ITMScorer` makes of a transformers model and processor.

Apart from `open_clip.py` so the backend table imports no torch (`hardpos eval --help` reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from PIL import Image


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

    def get_text_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.model.encode_text(input_ids)


@dataclass
class _Config:
    max_position_embeddings: int
    model_type: str = "open_clip"


class OpenClipTokenizer:
    """open_clip's tokenizer behind the calls the scorer makes (`tokenizer(texts, truncation=..., ...)`).

    Ids are exactly open_clip's, already padded to the context length and truncated the way that
    tokenizer truncates (CLIP BPE keeps EOT last), whatever `padding` asks: open_clip's towers were
    trained on such rows and derive their own masks from the ids, so no attention mask is produced
    (`model_input_names`). With `truncation=False` it returns the untruncated ids, whose lengths
    find the captions the context cuts.
    """

    model_input_names: ClassVar[list[str]] = ["input_ids"]
    padding_side = "right"

    def __init__(self, tokenizer, context_length: int):
        self.tokenizer = tokenizer
        self.model_max_length = context_length
        inner = getattr(tokenizer, "tokenizer", None)  # open_clip's HF-backed tokenizers wrap a transformers one
        self.pad_token_id = getattr(inner, "pad_token_id", None) if inner is not None else 0

    def __call__(self, texts, padding=True, truncation=True, max_length=None, return_tensors=None, verbose=True,
                 return_attention_mask=None):
        # `return_attention_mask` is accepted as `ITMScorer.tokenize` passes it; no mask is ever made.
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not truncation:
            return {"input_ids": [self._untruncated(text) for text in texts]}
        ids = self.tokenizer(texts, context_length=max_length or self.model_max_length)
        return {"input_ids": ids if return_tensors == "pt" else ids.tolist()}

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
