"""The COCO fine-tuning set's rows and schemas, streamed in caption order: the ``default`` config's
captions with their hard positives and rule-made hard negatives, and the ``ce_clip`` config's same rows
plus CE-CLIP's four typed hard negatives. 591k captions: the rows are never all in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import datasets

from .. import columns
from .coco_captions import read_coco_captions
from .coco_hard_positives import HardPositiveSource

CONFIG = "default"
CE_CLIP_CONFIG = "ce_clip"  # the default config's rows + CE-CLIP's four typed hard negatives
NEGATIVE_TYPES = ("replace", "swap")

HardNegativeFn = Callable[[str], "str | None"]


def finetune_features() -> datasets.Features:
    """Row schema (the image column is added when images are embedded)."""
    return datasets.Features(
        {
            columns.IMAGE_ID: datasets.Value("string"),
            "file_name": datasets.Value("string"),
            "caption_id": datasets.Value("int64"),
            columns.CAPTION: datasets.Value("string"),
            columns.HARD_POSITIVE_REPLACE: datasets.Value("string"),
            columns.HARD_POSITIVE_SWAP: datasets.Value("string"),
            columns.HARD_NEGATIVE_REPLACE: datasets.Value("string"),
            columns.HARD_NEGATIVE_SWAP: datasets.Value("string"),
        }
    )


def ce_clip_features() -> datasets.Features:
    """The ``ce_clip`` config's schema: the default config's columns, then the four typed negatives."""
    return datasets.Features(
        {
            **finetune_features(),
            **{name: datasets.Value("string") for name in columns.CE_CLIP_NEGATIVE_COLUMNS},
        }
    )


def default_negative_generators(seed: int = 0) -> dict[str, HardNegativeFn]:
    """The package's rule-based hard-negative generators, seeded per caption for reproducibility.

    ``RuleGenerator`` owns the per-caption seeding (a caption's negative does not depend on which
    other captions were processed, so resumed builds give the same data). Imported lazily: a caller
    can pass any ``{"replace": fn, "swap": fn}`` instead.
    """
    from hf_hardpos.generation.rule_generator import RuleGenerator

    return {kind: RuleGenerator(kind, negative=True, seed=seed).perturb for kind in NEGATIVE_TYPES}


def _no_hard_positives() -> Iterator[None]:
    while True:
        yield None


def caption_rows(
    captions_path: Path,
    positives: Mapping[str, HardPositiveSource],
    negative_generators: Mapping[str, HardNegativeFn],
) -> Iterator[dict]:
    """Stream the rows in COCO annotation order (591k captions: never all in memory); a hard-positive
    column without a source (a train2014 build, or --hard-positives without it): nulls."""
    annotations, file_names = read_coco_captions(captions_path)
    replace_hp, swap_hp = (
        positives[column].rows() if column in positives else _no_hard_positives()
        for column in columns.FINETUNE_POSITIVE_COLUMNS
    )
    for annotation, positive_replace, positive_swap in zip(annotations, replace_hp, swap_hp):
        caption = annotation["caption"].strip()
        image_id = int(annotation["image_id"])
        yield {
            columns.IMAGE_ID: str(image_id),
            "file_name": file_names[image_id],
            "caption_id": int(annotation["id"]),
            columns.CAPTION: caption,
            columns.HARD_POSITIVE_REPLACE: positive_replace,
            columns.HARD_POSITIVE_SWAP: positive_swap,
            columns.HARD_NEGATIVE_REPLACE: negative_generators["replace"](caption),
            columns.HARD_NEGATIVE_SWAP: negative_generators["swap"](caption),
        }


def ce_clip_rows(
    captions_path: Path,
    positives: Mapping[str, HardPositiveSource],
    negative_generators: Mapping[str, HardNegativeFn],
    typed_negatives: Mapping[str, Sequence[str | None]],
) -> Iterator[dict]:
    """The default config's rows, each with its typed negatives (looked up by caption index)."""
    rows = caption_rows(captions_path, positives, negative_generators)
    for index, row in enumerate(rows):
        yield {**row, **{name: values[index] for name, values in typed_negatives.items()}}
