"""Hard-positive / hard-negative fine-tuning of CLIP with the `transformers.Trainer`.

Names load lazily so that `hf_hardpos.training.losses` (pure torch) does not pull in the Trainer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hf_hardpos.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker and an IDE resolve; at run time the names load lazily
    from hf_hardpos.training.trainer import HardPosTrainer
    from hf_hardpos.evaluation.training_sets import BenchmarkEvalSet
    from hf_hardpos.training.loss_guard import NonFiniteLossError
    from hf_hardpos.training.interrupt import TrainingInterrupted
    from hf_hardpos.training.checkpointing import LOSS_STATE_NAME
    from hf_hardpos.training.training_args import HardPosTrainingArguments
    from hf_hardpos.training.data_collator import HardPosBatch, HardPosDataCollator
    from hf_hardpos.training.card_data import HardPosModelCardData
    from hf_hardpos.training.model_card import generate_model_card
    from hf_hardpos.training.lora import apply_lora, merge_lora
    from hf_hardpos.training.augmentation import RandomResizedCrop
    from hf_hardpos.training.recipe import Recipe, RecipeReport, read_arguments_file

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "HardPosTrainer": "hf_hardpos.training.trainer",
        "BenchmarkEvalSet": "hf_hardpos.evaluation.training_sets",
        "NonFiniteLossError": "hf_hardpos.training.loss_guard",
        "TrainingInterrupted": "hf_hardpos.training.interrupt",
        "LOSS_STATE_NAME": "hf_hardpos.training.checkpointing",
        "HardPosTrainingArguments": "hf_hardpos.training.training_args",
        "HardPosDataCollator": "hf_hardpos.training.data_collator",
        "HardPosBatch": "hf_hardpos.training.data_collator",
        "HardPosModelCardData": "hf_hardpos.training.card_data",
        "generate_model_card": "hf_hardpos.training.model_card",
        "apply_lora": "hf_hardpos.training.lora",
        "merge_lora": "hf_hardpos.training.lora",
        "RandomResizedCrop": "hf_hardpos.training.augmentation",
        "Recipe": "hf_hardpos.training.recipe",
        "RecipeReport": "hf_hardpos.training.recipe",
        "read_arguments_file": "hf_hardpos.training.recipe",
    },
)
