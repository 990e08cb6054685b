"""What `HardPosTrainer`'s constructor settles before the stock Trainer's runs, each refusal made
before hours of training rather than at the first batch: the arguments and a model the objective can
train, the collator the arguments describe, and the training rows checked and indexed.
"""

from __future__ import annotations

from typing import Any

import torch
from datasets import Dataset
from transformers import CLIPModel

from .. import columns
from ..errors import UserInputError
from .augmentation import RandomResizedCrop
from .data_collator import HardPosDataCollator, with_row_index
from .logit_scale import unwrap_model
from .training_args import HardPosTrainingArguments
from .validation import check_numeric_arguments, validate_training_data


def checked_arguments(args: HardPosTrainingArguments | None) -> HardPosTrainingArguments:
    """``args``, or the defaults when None; anything but `HardPosTrainingArguments` is refused."""
    if args is None:
        args = HardPosTrainingArguments(output_dir="hardpos_trainer_output")
    if not isinstance(args, HardPosTrainingArguments):
        raise TypeError(
            "HardPosTrainer needs HardPosTrainingArguments (loss weights, columns, LoRA), "
            f"got {type(args).__name__}"
        )
    return args


def require_clip(model: torch.nn.Module | None) -> None:
    """Refuse anything the objective cannot train: it reads CLIP's two towers and its logit scale."""
    if model is None:
        raise UserInputError(
            "HardPosTrainer needs a model: pass a CLIPModel (or a peft wrapper of one); model_init is not supported"
        )
    base = unwrap_model(model)
    if not isinstance(base, CLIPModel):
        wrapped = f" (inside {type(model).__name__})" if base is not model else ""
        raise UserInputError(
            f"HardPosTrainer trains a transformers CLIPModel or a peft wrapper of one; got {type(base).__name__}"
            f"{wrapped}. Load the model with CLIPModel.from_pretrained (convert other dual encoders first)."
        )


def _train_transform(args: HardPosTrainingArguments, processor) -> RandomResizedCrop | None:
    """The training-image augmentation `args` asks for, sized to the processor's crop."""
    if args.train_crop_scale is None:
        return None
    crop = processor.image_processor.crop_size
    return RandomResizedCrop((crop["height"], crop["width"]), scale=tuple(args.train_crop_scale))


def default_collator(args: HardPosTrainingArguments, processor) -> HardPosDataCollator:
    """The `HardPosDataCollator` of ``args``' columns, augmentation and hard-example sampling."""
    return HardPosDataCollator(
        processor,
        args.image_column,
        args.caption_column,
        args.positive_columns,
        args.negative_columns,
        image_transform=_train_transform(args, processor),
        sampling=args.hard_example_sampling,
        seed=args.seed,
    )


def prepared_train_dataset(train_dataset: Any, args: HardPosTrainingArguments) -> Any:
    """The training set checked against ``args`` (and the numeric options with it), with each row's
    position added where a draw or a crop is seeded by it."""
    # Fail before hours of training, not at the first batch or the first evaluation.
    check_numeric_arguments(args)
    if isinstance(train_dataset, Dataset):  # columns, nulls, placeholders, a sample of images (`validation`)
        validate_training_data(train_dataset, args)
    elif train_dataset is not None and getattr(train_dataset, "column_names", None) is not None:
        columns.require_columns(
            train_dataset,
            [args.image_column, args.caption_column, *args.positive_columns, *args.negative_columns],
            "the training set",
        )
    seeded_per_row = args.hard_example_sampling == "one_per_row" or args.train_crop_scale is not None
    if seeded_per_row and getattr(train_dataset, "column_names", None) is not None:
        # each row's draw and crop are seeded by its position
        train_dataset = with_row_index(train_dataset)
        if args.dataloader_persistent_workers and args.dataloader_num_workers > 0:
            raise UserInputError(
                "dataloader_persistent_workers keeps the collator of the first epoch in its workers, so "
                "random crops and hard-example draws (seeded per epoch) would repeat every epoch: turn "
                "persistent workers off"
            )
    return train_dataset
