"""Column names shared by every dataset, scorer, collator and metric in the package.

One place decides the schema so that a REPLACE/SWAP set built from upstream, a synthetic set and a
user's own data are interchangeable: the scorer, the trainer and `hardpos eval` only ever read these.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import UserInputError

IMAGE = "image"
IMAGE_ID = "image_id"
CAPTION = "caption"  # c: the original, true caption
HARD_NEGATIVE = "hard_negative"  # c_n: a minimal edit that changes the meaning
HARD_POSITIVE = "hard_positive"  # c_p: a minimal edit that keeps the meaning

# Evaluation sets (REPLACE, SWAP): one image, one c, one c_n, one c_p per row.
EVAL_CAPTION_COLUMNS = (CAPTION, HARD_NEGATIVE, HARD_POSITIVE)

# Fine-tuning set (COCO and the synthetic world): one caption with hard positives/negatives by type;
# a missing one is a null (e.g. no "and" to swap), never a placeholder string.
HARD_POSITIVE_REPLACE = "hard_positive_replace"
HARD_POSITIVE_SWAP = "hard_positive_swap"
HARD_NEGATIVE_REPLACE = "hard_negative_replace"
HARD_NEGATIVE_SWAP = "hard_negative_swap"
FINETUNE_POSITIVE_COLUMNS = (HARD_POSITIVE_REPLACE, HARD_POSITIVE_SWAP)
FINETUNE_NEGATIVE_COLUMNS = (HARD_NEGATIVE_REPLACE, HARD_NEGATIVE_SWAP)

# CE-CLIP's four typed hard negatives (the COCO set's `ce_clip` config), keyed by the type that
# `hardpos generate --negative --method mlm` records; the trainer keeps one CMR threshold per column.
HARD_NEGATIVE_RELATION = "hard_negative_relation"  # two nouns swapped
HARD_NEGATIVE_ATTRIBUTE = "hard_negative_attribute"  # an adjective replaced
HARD_NEGATIVE_ACTION = "hard_negative_action"  # a verb replaced
HARD_NEGATIVE_OBJECT = "hard_negative_object"  # a noun replaced
CE_CLIP_NEGATIVE_TYPES = {
    "relation": HARD_NEGATIVE_RELATION,
    "attribute": HARD_NEGATIVE_ATTRIBUTE,
    "action": HARD_NEGATIVE_ACTION,
    "object": HARD_NEGATIVE_OBJECT,
}
CE_CLIP_NEGATIVE_COLUMNS = tuple(CE_CLIP_NEGATIVE_TYPES.values())

# REPLACE ships as two subsets (configs); the paper's REPLACE column pools their rows (see `aggregation`).
REPLACE_SUBSETS = ("attributes", "relations")


def require_columns(dataset, required: Sequence[str], what: str = "the dataset") -> None:
    """Fail early, naming the dataset and listing what was expected and found, not a KeyError mid-run."""
    missing = [c for c in required if c not in dataset.column_names]
    if missing:
        raise UserInputError(
            f"{what} lacks column(s) {missing}; expected {list(required)}, found {list(dataset.column_names)}"
        )
