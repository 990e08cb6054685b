"""Hard-positive / hard-negative fine-tuning of CLIP with the `transformers.Trainer`.

Names load lazily so that `hf_hardpos.training.losses` (pure torch) does not pull in the Trainer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hf_hardpos.lazy import lazy_exports

# What type checkers and IDEs resolve (`X as X`: an explicit re-export); at run time the names load lazily.
if TYPE_CHECKING:
    from hf_hardpos.evaluation.training_sets import BenchmarkEvalSet as BenchmarkEvalSet
    from hf_hardpos.training.augmentation import RandomResizedCrop as RandomResizedCrop
    from hf_hardpos.training.card_data import HardPosModelCardData as HardPosModelCardData
    from hf_hardpos.training.checkpointing import LOSS_STATE_NAME as LOSS_STATE_NAME
    from hf_hardpos.training.data_collator import HardPosBatch as HardPosBatch
    from hf_hardpos.training.data_collator import HardPosDataCollator as HardPosDataCollator
    from hf_hardpos.training.interrupt import TrainingInterrupted as TrainingInterrupted
    from hf_hardpos.training.lora import apply_lora as apply_lora
    from hf_hardpos.training.lora import merge_lora as merge_lora
    from hf_hardpos.training.loss_guard import NonFiniteLossError as NonFiniteLossError
    from hf_hardpos.training.model_card import generate_model_card as generate_model_card
    from hf_hardpos.training.recipe import Recipe as Recipe
    from hf_hardpos.training.recipe import RecipeReport as RecipeReport
    from hf_hardpos.training.recipe import read_arguments_file as read_arguments_file
    from hf_hardpos.training.trainer import HardPosTrainer as HardPosTrainer
    from hf_hardpos.training.training_args import HardPosTrainingArguments as HardPosTrainingArguments

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
