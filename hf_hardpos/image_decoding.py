"""Decoding a dataset's distinct images into the encoder's pixels, in DataLoader workers.

Why its own module: the scorer (`scoring.ITMScorer`) and the pixel store (`pixel_store`) decode the same
way (images opened by `image_opening.open_image`), and a damaged image is one line naming its row
wherever it is read.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from datasets import Dataset

from .errors import UserInputError
from .image_keys import ImageSource
from .image_opening import open_image


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
