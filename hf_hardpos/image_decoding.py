"""Decoding a dataset's distinct images into the encoder's pixels, in DataLoader workers.

Why its own module: the scorer (`scoring.ITMScorer`), the pixel store (`pixel_store`) and the training
collator open images the same way (RGB, EXIF orientation ignored, as the papers' loaders do), and a
damaged image is one line naming its row wherever it is read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import torch
from datasets import Dataset
from PIL import Image

from .errors import UserInputError
from .image_keys import ImageSource

# Full scale of PIL's high-bit-depth greyscale modes: 16-bit integers (a 16-bit PNG opens as I;16 or I) and floats.
_FULL_SCALE = {"I;16": 65535.0, "I;16L": 65535.0, "I;16B": 65535.0, "I;16N": 65535.0, "I": 65535.0, "F": 1.0}


def as_rgb(image: Image.Image) -> Image.Image:
    """`image` as 8-bit RGB, a 16-bit or float greyscale image scaled by its mode's value range.

    Why: `.convert("RGB")` clips a 16-bit greyscale image's values to 0..255 instead of scaling them, so
    all but the darkest pixels become white (the 8-bit version of a gradient 0, 6, 13, ... comes out
    0, 255, 255, ...). Values 0..65535 (integer modes) or 0..1 (`F`) map to 0..255, rounded.
    """
    if image.mode not in _FULL_SCALE:
        return image if image.mode == "RGB" else image.convert("RGB")
    import numpy as np

    values = np.asarray(image, dtype=np.float64) * (255.0 / _FULL_SCALE[image.mode])
    grey = np.clip(np.rint(np.nan_to_num(values)), 0, 255).astype(np.uint8)
    return Image.fromarray(grey, mode="L").convert("RGB")


def open_image(value) -> Image.Image:
    """An image cell (PIL image, `{"bytes", "path"}` dict, or path) as RGB, EXIF orientation ignored (`as_rgb`)."""
    if isinstance(value, Image.Image):
        return as_rgb(value)
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return as_rgb(Image.open(io.BytesIO(value["bytes"])))
        return as_rgb(Image.open(value["path"]))
    return as_rgb(Image.open(value))


class DistinctImages(torch.utils.data.Dataset):
    """Decodes and preprocesses the distinct images; runs inside DataLoader workers."""

    def __init__(self, dataset: Dataset, image_column: str, sources: list[ImageSource], image_processor):
        # A worker reads a row's image, not its captions (another process's share arrives as a plain mapping).
        self.dataset = dataset.select_columns([image_column]) if isinstance(dataset, Dataset) else dataset
        self.image_column = image_column
        self.sources = sources
        self.image_processor = image_processor

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> torch.Tensor | str:
        """The image's pixels, or its one-line error as text: raised in a DataLoader worker, the error would
        reach the main process as "Caught UserInputError in DataLoader worker process 0", its row lost
        (`decoded_batches` raises it there instead)."""
        try:
            return self.pixels(index)
        except UserInputError as err:
            return str(err)

    def pixels(self, index: int) -> torch.Tensor:
        """The preprocessed pixels of source `index`; a damaged image raises one line naming its row."""
        source = self.sources[index]
        value = self.dataset[source.row][self.image_column]
        try:
            image = open_image(value)
        except Exception as err:  # PIL raises several types; all mean the same to the user
            raise UserInputError(  # a damaged image, or one over PIL's pixel limit: the data's fault, one line
                f"cannot read the image of row {source.row} (image_id={source.image_id!r}): {err}"
            ) from err
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]


def _pixels_or_error(items: list[torch.Tensor | str]) -> torch.Tensor | str:
    """A DataLoader batch: the stacked pixels, or the first image's error."""
    errors = [item for item in items if isinstance(item, str)]
    return errors[0] if errors else torch.stack(items)


def decoded_batches(images: DistinctImages, batch_size: int, num_workers: int, pin_memory: bool = False
                    ) -> Iterator[torch.Tensor]:  # fmt: skip
    """`images`' pixels, `batch_size` at a time, in order, decoded in `num_workers` DataLoader workers; a
    damaged image stops the iteration with its one-line error, raised in the calling process."""
    for batch in torch.utils.data.DataLoader(images, batch_size=batch_size, num_workers=num_workers,
                                             pin_memory=pin_memory, collate_fn=_pixels_or_error):  # fmt: skip
        if isinstance(batch, str):
            raise UserInputError(batch)
        yield batch
