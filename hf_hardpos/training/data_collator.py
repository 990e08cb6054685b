"""Turn dataset rows (image, caption, hard positives, hard negatives) into one CLIP batch.

Why one flat tokenisation: the text tower then runs once per batch over every caption, hard positive
and hard negative that *exists*, and index tensors say where each row's extras sit. A row without a
hard positive (SWAP positives exist only for captions with "and") keeps its image and caption in the
batch; its missing slots are masked out of the hard-positive terms. Nothing is ever filled with a
placeholder caption, which would otherwise be trained on as if it were real text.

Each distinct text is encoded once per collator (up to `token_cache_size` texts): a training set is read
once per epoch, and the paper's recipe runs five, so without the cache the same captions, hard positives
and hard negatives would be tokenised five times; on 2 CPU cores that was about half the time spent
building a batch. The batch is then padded from the cached ids exactly as `tokenizer(texts, padding=True,
truncation=True)` pads it (a test compares the two). The cache lives in the collator, so in each
dataloader worker; it lasts across epochs where the workers do (`dataloader_persistent_workers`), or with
no workers.

With ``sampling="one_per_row"`` a row contributes one hard positive and one hard negative, drawn
uniformly among its non-null columns (the Hard Positive paper, App. D.1, adds one of each per sample;
the COCO set has two of each per caption). The draw is a function of (seed, epoch, row index) only, so a
resumed run, any number of dataloader workers and any process layout draw the same captions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers.utils import ModelOutput

from .. import columns
from .augmentation import RandomResizedCrop, sample_generator
from .options import one_of

CLIP_CONTEXT_LENGTH = 77
# Distinct texts whose token ids a collator keeps (a few hundred bytes each for a caption of 15 tokens).
TOKEN_CACHE_SIZE = 2**17
# How many of a row's hard positives / negatives enter a batch, with what each mode does.
SAMPLING_MODES = {
    "all": "every non-null hard-positive and hard-negative column of a row",
    "one_per_row": "one hard positive and one hard negative per row and epoch, drawn uniformly among the row's "
    "non-null columns, seeded by (seed, epoch, row) so a resume draws the same (the Hard Positive paper, "
    "App. D.1, adds one of each per sample)",
}
# The training set's position of each row, added by `with_row_index` (the draws are seeded by it).
ROW_INDEX = "__hardpos_row_index__"
_POSITIVE, _NEGATIVE = 0, 1  # stream ids of the two draws of a row


@dataclass
class HardPosBatch(ModelOutput):
    """One collated batch: B rows' images, and every text of the batch tokenised once (flat), with
    where each row's hard positives and hard negatives sit among those texts.

    A `ModelOutput` (a dict whose keys are these fields, in this order) because the Trainer moves a
    batch to the device by rebuilding a mapping as `type(batch)({key: tensor on device})`, which a
    `ModelOutput` accepts; `HardPosTrainer` reads the fields by name. `HardPosDataCollator` fills every
    field (the `None` defaults are `ModelOutput`'s rule, not optional content).

    It also survives the DataLoader's pin-memory step, which every CUDA run takes (the Trainer's
    `dataloader_pin_memory=True` default): torch pins a mutable mapping as `copy.copy(batch)` followed
    by `.update({key: pinned tensor})`, and `ModelOutput` forbids `update`; `update` is therefore
    allowed here for this batch's own fields, each assignment kept in step with its attribute.

    Fields:
        pixel_values: [B, 3, H, W], the rows' images.
        input_ids, attention_mask: [T, L], T >= B texts: the B captions in row order, then the
            present (or drawn) hard positives, then the hard negatives.
        positive_index, positive_mask: [B, P]; for row b and slot j, the text at `positive_index[b, j]`
            is its hard positive when `positive_mask[b, j]` is true (the index is 0 and meaningless
            otherwise). Slot j is positive column j; with `sampling="one_per_row"`, P = 1 (the drawn
            column; masked when the row has none).
        negative_index, negative_mask: [B, K], the same for the hard negatives (slot j = negative column
            j, i.e. hard-negative type j).
    """

    pixel_values: torch.Tensor | None = None
    input_ids: torch.Tensor | None = None
    attention_mask: torch.Tensor | None = None
    positive_index: torch.Tensor | None = None
    positive_mask: torch.Tensor | None = None
    negative_index: torch.Tensor | None = None
    negative_mask: torch.Tensor | None = None

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Replace field values (a dict's `update`, restricted to the fields): what torch's
        `pin_memory` calls on a copy of the batch. An unknown key is a `KeyError`, not a new field."""
        names = {f.name for f in fields(self)}
        for key, value in dict(*args, **kwargs).items():
            if key not in names:
                raise KeyError(f"{type(self).__name__} has no field {key!r}; its fields are {sorted(names)}")
            self[key] = value

    def unflatten(self, text_embeds: torch.Tensor) -> dict[str, torch.Tensor | None]:
        """Split the text tower's output over this batch's T texts ([T, D]) back into per-row tensors.

        Returns the keyword arguments of `HardPosObjective`: `text_embeds` [B, D] (the captions),
        `positive_embeds` [B, P, D] / `positive_mask` [B, P] and `negative_embeds` [B, K, D] /
        `negative_mask` [B, K], zeros where a slot is masked; None for a layout without such columns.
        """
        out: dict[str, torch.Tensor | None] = {"text_embeds": text_embeds[: self.pixel_values.shape[0]]}
        for kind, index, mask in (
            ("positive", self.positive_index, self.positive_mask),
            ("negative", self.negative_index, self.negative_mask),
        ):
            if index.shape[1] == 0:
                out[f"{kind}_embeds"] = out[f"{kind}_mask"] = None
                continue
            slots = text_embeds[index]  # masked slots point at text 0; zeroed here
            out[f"{kind}_embeds"] = slots * mask.unsqueeze(-1).to(slots.dtype)
            out[f"{kind}_mask"] = mask
        return out


def with_row_index(dataset):
    """`dataset` with a `ROW_INDEX` column (0..n-1) unless it has one; a zero-copy column for a plain
    `datasets.Dataset` (one with an indices mapping, from `select`/`shuffle`, is flattened first)."""
    if ROW_INDEX in dataset.column_names:
        return dataset
    return dataset.add_column(ROW_INDEX, np.arange(dataset.num_rows, dtype=np.int64))


def draw_slot(seed: int, epoch: int, row: int, stream: int, choices: int) -> int:
    """Uniform index in ``range(choices)`` from numpy's SeedSequence of (seed, epoch, row, stream)."""
    return int(np.random.default_rng([seed, epoch, row, stream]).integers(choices))


class HardPosDataCollator:
    """Collate rows of the fine-tuning schema (or the eval schema) for `HardPosTrainer`.

    Args:
        processor: a `CLIPProcessor` (`.image_processor` and `.tokenizer`).
        image_column, caption_column: the image and the true caption c.
        positive_columns: hard-positive columns, e.g. `hard_positive_replace`, `hard_positive_swap`
            (fine-tuning schema) or `hard_positive` (eval schema). Null cells are masked.
        negative_columns: hard-negative columns, one per hard-negative type. Null cells are masked.
        max_length: token limit; CLIP's context is 77.
        image_transform: a PIL -> PIL training augmentation that already outputs the model's input
            size (e.g. `RandomResizedCrop`); the processor then only rescales and normalises. None:
            the processor's own resize and centre crop.
        sampling: "all" (every non-null extra column) or "one_per_row" (one hard positive and one hard
            negative per row, drawn per `seed`, epoch (`set_epoch`) and the row's `ROW_INDEX` cell).
        seed: the seed of the draws.
        token_cache_size: how many distinct texts keep their token ids (the first ones met); 0 = none.

    Returns a `HardPosBatch` (its fields and their layout are documented there).
    """

    def __init__(
        self,
        processor,
        image_column: str = columns.IMAGE,
        caption_column: str = columns.CAPTION,
        positive_columns: Sequence[str] = columns.FINETUNE_POSITIVE_COLUMNS,
        negative_columns: Sequence[str] = columns.FINETUNE_NEGATIVE_COLUMNS,
        *,
        max_length: int = CLIP_CONTEXT_LENGTH,
        image_transform: Callable[[Image.Image], Image.Image] | None = None,
        sampling: str = "all",
        seed: int = 0,
        token_cache_size: int = TOKEN_CACHE_SIZE,
    ):
        self.processor = processor
        self.image_column = image_column
        self.caption_column = caption_column
        self.positive_columns = tuple(positive_columns)
        self.negative_columns = tuple(negative_columns)
        self.max_length = max_length
        self.image_transform = image_transform
        self.sampling = one_of("sampling", sampling, SAMPLING_MODES)
        self.seed = int(seed)
        self.epoch = 0
        self.token_cache_size = token_cache_size
        self._token_ids: dict[str, list[int]] = {}

    def describe_sampling(self) -> str:
        """How many of each row's hard positives / negatives enter a batch, in words (for the model card)."""
        if self.sampling == "all":
            return "every non-null hard-positive and hard-negative column of the row"
        return (
            f"one hard positive (of {list(self.positive_columns)}) and one hard negative (of "
            f"{list(self.negative_columns)}) per row and epoch, drawn uniformly among the row's non-null columns "
            f"by numpy's SeedSequence of (seed {self.seed}, epoch, row index, 0 for the positive / 1 for the negative)"
        )

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next batches belong to (the trainer calls this at every epoch start)."""
        self.epoch = int(epoch)

    def __call__(self, features: list[dict[str, Any]]) -> HardPosBatch:
        if not features:
            raise ValueError("HardPosDataCollator got an empty batch")
        images = [self._image(row, b) for b, row in enumerate(features)]
        texts = [self._caption(row, b) for b, row in enumerate(features)]
        positive_index, positive_mask = self._extras(features, self.positive_columns, texts, _POSITIVE)
        negative_index, negative_mask = self._extras(features, self.negative_columns, texts, _NEGATIVE)

        # PIL in, so the image processor rescales exactly once (float tensors in [0, 1] would be
        # rescaled again: docs/reference.md, Installation notes).
        if self.image_transform is None:
            pixel_values = self.processor.image_processor(images=images, return_tensors="pt")["pixel_values"]
        else:
            pixel_values = self.processor.image_processor(
                images=[self._augment(image, row) for image, row in zip(images, features)],
                do_resize=False,
                do_center_crop=False,
                return_tensors="pt",
            )["pixel_values"]
        tokens = self._tokenize(texts)
        return HardPosBatch(
            pixel_values=pixel_values,
            input_ids=tokens["input_ids"],
            attention_mask=tokens["attention_mask"],
            positive_index=positive_index,
            positive_mask=positive_mask,
            negative_index=negative_index,
            negative_mask=negative_mask,
        )

    def _tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """`texts` as `tokenizer(texts, padding=True, truncation=True, max_length=...)` returns them, encoding
        only the texts the cache does not hold."""
        tokenizer = self.processor.tokenizer
        unknown = [text for text in dict.fromkeys(texts) if text not in self._token_ids]
        encoded: dict[str, list[int]] = {}
        if unknown:
            ids = tokenizer(unknown, truncation=True, max_length=self.max_length)["input_ids"]
            encoded = dict(zip(unknown, ids))
            for text in unknown[: max(0, self.token_cache_size - len(self._token_ids))]:
                self._token_ids[text] = encoded[text]
        batch = [self._token_ids[text] if text in self._token_ids else encoded[text] for text in texts]
        return tokenizer.pad({"input_ids": batch}, padding=True, return_tensors="pt")

    # --- per-row checks -------------------------------------------------------------------------

    def _describe(self, row: dict[str, Any], b: int) -> str:
        image_id = row.get(columns.IMAGE_ID)
        return f"batch row {b}" + (f" (image_id={image_id!r})" if image_id is not None else "")

    def _image(self, row: dict[str, Any], b: int) -> Image.Image:
        if self.image_column not in row:
            raise KeyError(
                f"{self._describe(row, b)} has no column {self.image_column!r}; columns: {sorted(row)}. "
                "Is remove_unused_columns=False set?"
            )
        value = row[self.image_column]
        if value is None:
            raise ValueError(f"{self._describe(row, b)}: column {self.image_column!r} is null (no image)")
        if isinstance(value, dict):  # an undecoded datasets Image cell: {"bytes": ..., "path": ...}
            from ..image_opening import open_image  # as the scorer opens it: EXIF orientation ignored

            value = open_image(value)
        if not isinstance(value, Image.Image):
            raise TypeError(
                f"{self._describe(row, b)}: column {self.image_column!r} holds {type(value).__name__}, "
                "expected a PIL image (a datasets Image feature decodes to one)"
            )
        from ..image_opening import as_rgb

        return as_rgb(value)  # a 16-bit image by its value range, as the scorer reads it

    def _caption(self, row: dict[str, Any], b: int) -> str:
        if self.caption_column not in row:
            raise KeyError(
                f"{self._describe(row, b)} has no column {self.caption_column!r}; columns: {sorted(row)}"
            )
        text = row[self.caption_column]
        if text is None:
            raise ValueError(f"{self._describe(row, b)}: column {self.caption_column!r} is null (no caption)")
        return self._check_text(text, row, b, self.caption_column)

    def _check_text(self, text: Any, row: dict[str, Any], b: int, column: str) -> str:
        if not isinstance(text, str):
            raise TypeError(
                f"{self._describe(row, b)}: column {column!r} holds {type(text).__name__}, expected str"
            )
        if not text.strip() or text.strip() == "None":
            # Upstream files write the string "None" where no swap exists; the schema says null.
            raise ValueError(
                f"{self._describe(row, b)}: column {column!r} holds the placeholder {text!r}; "
                "a missing caption must be a null (None), never a string"
            )
        return text

    def _extras(
        self, features: list[dict[str, Any]], extra_columns: tuple[str, ...], texts: list[str], stream: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the present (or drawn) extra captions to `texts`; return their [B, slots] index and mask."""
        slots = 1 if self.sampling == "one_per_row" and extra_columns else len(extra_columns)
        index = torch.zeros(len(features), slots, dtype=torch.long)
        mask = torch.zeros(len(features), slots, dtype=torch.bool)
        for b, row in enumerate(features):
            present = []
            for column in extra_columns:
                if column not in row:
                    raise KeyError(
                        f"{self._describe(row, b)} has no column {column!r}; columns: {sorted(row)}"
                    )
                if row[column] is not None:
                    present.append(column)
            if self.sampling == "one_per_row" and present:
                present = [
                    present[draw_slot(self.seed, self.epoch, self._row_index(row, b), stream, len(present))]
                ]
            for column in present:
                texts.append(self._check_text(row[column], row, b, column))
                j = 0 if slots == 1 and self.sampling == "one_per_row" else extra_columns.index(column)
                index[b, j] = len(texts) - 1
                mask[b, j] = True
        return index, mask

    def _augment(self, image: Image.Image, row: dict[str, Any]) -> Image.Image:
        """The row's training augmentation; seeded by (seed, epoch, row index) when the row has its index
        (the trainer adds it whenever crops are random), so a resume or any worker count crops alike."""
        if ROW_INDEX in row and isinstance(self.image_transform, RandomResizedCrop):
            return self.image_transform(
                image, generator=sample_generator(self.seed, self.epoch, int(row[ROW_INDEX]))
            )
        return self.image_transform(image)

    def _row_index(self, row: dict[str, Any], b: int) -> int:
        if ROW_INDEX not in row:
            raise KeyError(
                f"{self._describe(row, b)} has no {ROW_INDEX!r} column: sampling='one_per_row' seeds each row's draw "
                "by its position in the training set; add it with hf_hardpos.training.data_collator.with_row_index"
            )
        return int(row[ROW_INDEX])
