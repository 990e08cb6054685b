"""Content keys of images: which rows of a dataset hold the same image, found without decoding it.

Why by content: REPLACE repeats each Visual Genome image on ~2.3 rows and SWAP crops several boxes out
of one image id, so neither the row nor the id says which pixels a row holds; equal bytes do. Each
distinct image is then decoded and encoded once (`scoring.ITMScorer`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from . import columns

if TYPE_CHECKING:  # only annotations: `evaluation.decode_ahead` keys images before datasets is imported
    from datasets import Dataset


@dataclass
class ImageSource:
    """Where one distinct image comes from: the first row that holds it, and its content key."""

    row: int
    image_id: str
    key: str


def image_key(value, row: int) -> str:
    """A content key for an image cell, so equal images are encoded once whatever their ids say.

    Content (not `image_id`) is the key because SWAP crops several boxes out of one Visual Genome
    image: same id, different pixels.
    """
    if isinstance(value, dict):  # datasets Image feature with decode=False
        if value.get("bytes") is not None:
            return hashlib.blake2b(value["bytes"], digest_size=16).hexdigest()
    if isinstance(value, str):
        value = {"path": value}
    if isinstance(value, dict) and value.get("path"):
        try:  # by content, not path: a file replaced in place is a different image
            with open(value["path"], "rb") as handle:
                return hashlib.blake2b(handle.read(), digest_size=16).hexdigest()
        except OSError as err:
            raise ValueError(f"row {row}: cannot read image file {value['path']!r}: {err}") from err
    if isinstance(value, Image.Image):
        return hashlib.blake2b(value.tobytes() + str(value.size).encode(), digest_size=16).hexdigest()
    raise ValueError(f"row {row}: unsupported image value of type {type(value).__name__}")


class _RecentImages:
    """The content keys of the last few images, by image id, so that rows repeating an image (REPLACE
    has 2.3 rows per image, mostly adjacent) compare bytes (a memcmp) instead of hashing them again.

    A key is reused only when the cell's bytes equal the remembered ones: an id is a hint, never trusted
    (SWAP crops several boxes out of one image id). Bounded, so memory stays a few MB."""

    SIZE = 256

    def __init__(self) -> None:
        self._seen: dict[str, tuple[bytes, str]] = {}

    @staticmethod
    def bytes_of(value) -> bytes | None:
        return value.get("bytes") if isinstance(value, dict) else None

    def key_of(self, image_id: str | None, value) -> str | None:
        data = self.bytes_of(value)
        known = self._seen.get(image_id) if image_id is not None and data is not None else None
        return known[1] if known is not None and known[0] == data else None

    def remember(self, image_id: str | None, value, key: str) -> None:
        data = self.bytes_of(value)
        if image_id is None or data is None:
            return
        self._seen.pop(image_id, None)
        self._seen[image_id] = (data, key)
        if len(self._seen) > self.SIZE:
            del self._seen[next(iter(self._seen))]  # the least recently stored


def distinct_images(dataset: Dataset, image_column: str) -> tuple[list[ImageSource], np.ndarray]:
    """The distinct images of `dataset` (by content) and, per row, the index of its image among them.

    Keyed on every call, not remembered per dataset: a dataset's `_fingerprint` is not unique enough to
    stand for its content (two different local folders loaded in one process were seen to share one).
    """
    image_ids = (
        [str(v) for v in dataset[columns.IMAGE_ID][:]] if columns.IMAGE_ID in dataset.column_names else None
    )
    key_to_slot: dict[str, int] = {}
    sources: list[ImageSource] = []
    image_slot = np.empty(len(dataset), dtype=np.int64)
    images_only = dataset.select_columns([image_column])
    cells = (cell for batch in images_only.iter(batch_size=1024) for cell in batch[image_column])
    recent = _RecentImages()
    for row, value in enumerate(cells):  # streamed: never all image bytes in memory at once
        if value is None:
            raise ValueError(f"row {row} has no image (column {image_column!r} is null)")
        image_id = image_ids[row] if image_ids else None
        key = recent.key_of(image_id, value)
        if key is None:
            key = image_key(value, row)
            recent.remember(image_id, value, key)
        if key not in key_to_slot:
            key_to_slot[key] = len(sources)
            sources.append(ImageSource(row, image_ids[row] if image_ids else str(row), key))
        image_slot[row] = key_to_slot[key]
    return sources, image_slot
