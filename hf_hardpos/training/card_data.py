"""What a model card states that the trainer cannot know by itself (the base model's Hub id, the
datasets' ids, configs and revisions, the recipe), given by whoever builds the trainer: `hardpos train`
fills it from its arguments, a script from its own knowledge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .recipe import RecipeReport


@dataclass
class HardPosModelCardData:
    """What the trainer cannot know by itself; every field is optional.

    Args:
        model_name: the card title; defaults to the output folder's name.
        base_model: Hub id of the model fine-tuned from; defaults to the model config's `_name_or_path`
            (kept out of the YAML when it is a local path, which the Hub would reject).
        train_dataset_id: Hub id (or local path) of the training set, e.g. "hardpos/coco".
        train_dataset_config, train_dataset_split, train_dataset_revision: which config, split and
            revision (the Hub commit the rows came from) of `train_dataset_id` was trained on; a Hub id
            alone names a moving target.
        eval_dataset_ids: Hub id per eval-set name, used as `dataset.type` in `model-index`.
        train_dataset_description, eval_dataset_descriptions: how to name data that has no Hub id
            (e.g. the synthetic world and its seed) in the card body.
        language, license, tags: card metadata.
        recipe: the recipe file the run followed and every deviation from it (`recipe.RecipeReport`).
    """

    model_name: str | None = None
    base_model: str | None = None
    train_dataset_id: str | None = None
    train_dataset_config: str | None = None
    train_dataset_split: str | None = None
    train_dataset_revision: str | None = None
    eval_dataset_ids: dict[str, str] = field(default_factory=dict)
    train_dataset_description: str | None = None
    eval_dataset_descriptions: dict[str, str] = field(default_factory=dict)
    language: str | list[str] | None = "en"
    license: str | None = None
    tags: list[str] = field(
        default_factory=lambda: [
            "clip",
            "vision-language",
            "compositionality",
            "hard-positives",
            "hf_hardpos",
        ]
    )
    recipe: RecipeReport | None = None
