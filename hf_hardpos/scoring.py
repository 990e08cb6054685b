"""Image-text matching scores for any dual-encoder model, computed once per distinct input.

Why a scorer of our own: REPLACE has 27,443 rows but only 11,723 distinct images, and its captions
repeat too; the reference code encodes every image twice per row. Here each distinct image and each
distinct caption goes through its tower exactly once, images are decoded and preprocessed in
DataLoader workers, texts are batched by length, and the per-row scores are dot products of cached,
L2-normalised embeddings — the cosine similarity of SPEC §2, independent of batch size.

Works with any model exposing `get_image_features` / `get_text_features` (`CLIPModel`, `SiglipModel`,
a peft-wrapped CLIP, ...), whether they return a tensor or a `BaseModelOutputWithPooling`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from datasets import Dataset
from datasets import Image as ImageFeature
from PIL import Image
from tqdm.auto import tqdm

from . import columns


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The requested device, else CUDA, else Apple MPS, else CPU."""
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _features(output) -> torch.Tensor:
    """Projected embeddings from a `get_*_features` call (a tensor, or `.pooler_output` in transformers 5)."""
    if isinstance(output, torch.Tensor):
        return output
    pooled = getattr(output, "pooler_output", None)
    if pooled is None:
        raise TypeError(f"cannot find projected features in a {type(output).__name__}")
    return pooled


@dataclass
class _ImageSource:
    """Where one distinct image comes from: the first row that holds it."""

    row: int
    image_id: str


def _image_key(value, row: int) -> str:
    """A content key for an image cell, so equal images are encoded once whatever their ids say.

    Content (not `image_id`) is the key because SWAP crops several boxes out of one Visual Genome
    image: same id, different pixels.
    """
    if isinstance(value, dict):  # datasets Image feature with decode=False
        if value.get("bytes") is not None:
            return hashlib.blake2b(value["bytes"], digest_size=16).hexdigest()
        if value.get("path"):
            return "path:" + value["path"]
    if isinstance(value, str):
        return "path:" + value
    if isinstance(value, Image.Image):
        return hashlib.blake2b(value.tobytes() + str(value.size).encode(), digest_size=16).hexdigest()
    raise ValueError(f"row {row}: unsupported image value of type {type(value).__name__}")


def _open_image(value) -> Image.Image:
    if isinstance(value, Image.Image):
        return value.convert("RGB")
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return Image.open(io.BytesIO(value["bytes"])).convert("RGB")
        return Image.open(value["path"]).convert("RGB")
    return Image.open(value).convert("RGB")


class _DistinctImages(torch.utils.data.Dataset):
    """Decodes and preprocesses the distinct images; runs inside DataLoader workers."""

    def __init__(self, dataset: Dataset, image_column: str, sources: list[_ImageSource], image_processor):
        self.dataset = dataset
        self.image_column = image_column
        self.sources = sources
        self.image_processor = image_processor

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> torch.Tensor:
        source = self.sources[index]
        value = self.dataset[source.row][self.image_column]
        try:
            image = _open_image(value)
        except Exception as err:  # PIL raises several types; all mean the same to the user
            raise ValueError(
                f"cannot read the image of row {source.row} (image_id={source.image_id!r}): {err}"
            ) from err
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]


class ITMScorer:
    """Cosine image-text matching scores, one per (row, caption column).

    Args:
        model: a dual encoder with `get_image_features(pixel_values=...)` and
            `get_text_features(input_ids=..., attention_mask=...)`.
        processor: its processor (`.image_processor` and `.tokenizer`).
        batch_size: images / texts per forward pass; results do not depend on it.
        num_workers: DataLoader workers that decode and preprocess images.
        device: defaults to CUDA, then MPS, then CPU.
        autocast_dtype: on CUDA, bf16 by default (fp16 where bf16 is unsupported); ignored elsewhere.
        progress: show tqdm bars.
    """

    def __init__(
        self,
        model,
        processor,
        batch_size: int = 64,
        num_workers: int = 0,
        device: str | torch.device | None = None,
        autocast_dtype: torch.dtype | None = None,
        progress: bool = True,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.processor = processor
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.progress = progress
        if self.device.type == "cuda" and autocast_dtype is None:
            autocast_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        self.autocast_dtype = autocast_dtype if self.device.type == "cuda" else None
        # SigLIP was trained on max-length padded text; CLIP pools at the EOS token, so dynamic
        # padding gives it the same result as padding to 77.
        model_type = getattr(getattr(model, "config", None), "model_type", "")
        self.text_padding = "max_length" if "siglip" in str(model_type) else True

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """L2-normalised text embeddings (float32, CPU), in the order given."""
        tokenizer = self.processor.tokenizer
        lengths = [len(t) for t in texts]
        order = np.argsort(lengths, kind="stable")  # similar lengths together: less padding
        out: torch.Tensor | None = None
        for start in tqdm(
            range(0, len(texts), self.batch_size),
            desc="Encoding texts",
            disable=not self.progress,
            unit="batch",
        ):
            idx = order[start : start + self.batch_size]
            batch = tokenizer(
                [texts[i] for i in idx], padding=self.text_padding, truncation=True, return_tensors="pt"
            )
            batch = {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
            with self._autocast():
                emb = _features(self.model.get_text_features(**batch))
            emb = torch.nn.functional.normalize(emb.float(), dim=-1).cpu()
            if out is None:
                out = torch.empty(len(texts), emb.shape[-1])
            out[torch.as_tensor(idx)] = emb
        assert out is not None
        return out

    @torch.inference_mode()
    def encode_images(self, dataset: Dataset, image_column: str, sources: list[_ImageSource]) -> torch.Tensor:
        """L2-normalised embeddings of the distinct images (float32, CPU), in `sources` order."""
        loader = torch.utils.data.DataLoader(
            _DistinctImages(dataset, image_column, sources, self.processor.image_processor),
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            pin_memory=self.device.type == "cuda",
        )
        chunks = []
        for pixel_values in tqdm(loader, desc="Encoding images", disable=not self.progress, unit="batch"):
            with self._autocast():
                emb = _features(self.model.get_image_features(pixel_values=pixel_values.to(self.device)))
            chunks.append(torch.nn.functional.normalize(emb.float(), dim=-1).cpu())
        return torch.cat(chunks)

    def embed_images(self, dataset: Dataset, image_column: str = columns.IMAGE) -> tuple[torch.Tensor, np.ndarray]:
        """Embeddings of the distinct images of `dataset` and, per row, the index of its image's embedding.

        Images are told apart by content, so a dataset that repeats an image (REPLACE: ~2.3 rows per
        image) encodes it once; the zero-shot tasks use this too.
        """
        dataset = _undecoded(dataset, image_column)
        image_ids = (
            [str(v) for v in dataset[columns.IMAGE_ID]] if columns.IMAGE_ID in dataset.column_names else None
        )
        key_to_slot: dict[str, int] = {}
        sources: list[_ImageSource] = []
        image_slot = np.empty(len(dataset), dtype=np.int64)
        images_only = dataset.select_columns([image_column])
        cells = (cell for batch in images_only.iter(batch_size=1024) for cell in batch[image_column])
        for row, value in enumerate(cells):  # streamed: never all image bytes in memory at once
            if value is None:
                raise ValueError(f"row {row} has no image (column {image_column!r} is null)")
            key = _image_key(value, row)
            if key not in key_to_slot:
                key_to_slot[key] = len(sources)
                sources.append(_ImageSource(row, image_ids[row] if image_ids else str(row)))
            image_slot[row] = key_to_slot[key]
        return self.encode_images(dataset, image_column, sources), image_slot

    def score(
        self,
        dataset: Dataset | dict,
        image_column: str = columns.IMAGE,
        caption_columns: Sequence[str] = columns.EVAL_CAPTION_COLUMNS,
    ) -> dict[str, np.ndarray]:
        """Per-row cosine similarity of the row's image with each caption column.

        Any number of caption columns may be given (several hard negatives, say); a missing caption
        (None) gets a NaN score, which the metrics then refuse rather than miscount.
        """
        if isinstance(dataset, dict):
            dataset = Dataset.from_dict(dataset)
        columns.require_columns(dataset, [image_column, *caption_columns])
        if len(dataset) == 0:
            raise ValueError("the dataset has no rows: there is nothing to score")

        raw = _undecoded(dataset, image_column)
        image_emb, image_slot = self.embed_images(raw, image_column)

        text_to_slot: dict[str, int] = {}
        caption_slots: dict[str, np.ndarray] = {}
        for column in caption_columns:
            slots = np.full(len(raw), -1, dtype=np.int64)
            for row, text in enumerate(raw[column]):
                if text is None:
                    continue
                if not isinstance(text, str):
                    raise ValueError(f"row {row}, column {column!r}: expected a string, got {type(text).__name__}")
                slots[row] = text_to_slot.setdefault(text, len(text_to_slot))
            caption_slots[column] = slots

        text_emb = self.encode_texts(list(text_to_slot))

        scores: dict[str, np.ndarray] = {}
        row_images = image_emb[torch.from_numpy(image_slot)]
        for column, slots in caption_slots.items():
            present = torch.from_numpy(slots >= 0)
            values = torch.full((len(raw),), float("nan"), dtype=torch.float64)
            chosen = text_emb[torch.from_numpy(slots[slots >= 0])]
            values[present] = (row_images[present] * chosen).sum(-1).double()
            scores[column] = values.numpy()
        return scores



def _undecoded(dataset: Dataset, image_column: str) -> Dataset:
    """The dataset with its image column left as bytes/paths: keys are hashed without decoding."""
    if isinstance(dataset.features.get(image_column), ImageFeature) and dataset.features[image_column].decode:
        return dataset.cast_column(image_column, ImageFeature(decode=False))
    return dataset
