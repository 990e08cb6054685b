"""Kamath et al., "The Hard Positive Truth about Vision-Language Compositionality" (ECCV 2024): which
of our hard-positive result rows stand beside which of its printed figures.

The figures themselves are in ``figures.yaml`` (Tables 1, 2, 3, 9, 10 whole; Table 7's CLIP ViT-B/32
row and Table 8's CLIP ViT-B/16 and ViT-L/14 rows, the only cells of those tables checked against the
paper: their other rows are left absent, never guessed). Benchmarks: `replace` (the paper's REPLACE
column: both subsets' rows pooled, see `hf_hardpos.evaluation.aggregation`), `replace/attributes` and
`replace/relations` (Table 7), `swap`; rates in percent, mean scores (Tables 2, 9) in cosine.
"""

from __future__ import annotations

from pathlib import Path

from ..evaluation.aggregation import REPLACE_POOLED
from ..evaluation.section import HARD_POSITIVE
from ..evaluation.tasks.webdataset import ZEROSHOT_CLASSIFICATION, ZEROSHOT_RETRIEVAL

TASK = HARD_POSITIVE
RETENTION_TASKS = (ZEROSHOT_CLASSIFICATION, ZEROSHOT_RETRIEVAL)
# Table 10's single datasets as clip_benchmark's Hub webdatasets name them (`clip-benchmark/wds_<name>`);
# its VTAB column is a mean over tasks, laid out by `evaluation.suite.retention_table`.
RETENTION_DATASETS = ("imagenet1k", "mscoco_captions", "flickr30k")

# Systems (the `model` of their figures) that other modules name.
CLIP_B32 = "CLIP ViT-B/32"
CLIP_B16 = "CLIP ViT-B/16"
CLIP_L14 = "CLIP ViT-L/14"
HN = "HN (Kamath et al.)"
HP_HN = "HP+HN (Kamath et al.)"
CLIP_COCO = "CLIP-COCO (Kamath et al.)"

# Rows per REPLACE subset, counted in the paper's data files (github.com/amitakamath/hard_positives
# @33addaa, data/vl_checklist_{attributes,relations}.json): the weights that pool Table 7 into Table 1.
REPLACE_SUBSET_ROWS = {"attributes": 10_575, "relations": 16_868}

RATES = ("original_accuracy", "augmented_accuracy", "brittleness")

# Our result rows -> the paper's benchmarks (REPLACE's configs and its pooled aggregate).
_REPLACE_ROWS = {"attributes": "replace/attributes", "relations": "replace/relations", REPLACE_POOLED: "replace"}


def benchmark_of(dataset: str, row: str) -> str | None:
    """The paper's benchmark a row of `hardpos eval`'s hard-positive results measures, or None.

    REPLACE rows are known by their config names; SWAP has one config, `default`, so a `default` row is
    SWAP only when the dataset is named `swap` (the Hub id `hardpos/swap` or a folder named `swap`, as
    `hardpos build swap` writes it).
    """
    if row in _REPLACE_ROWS:
        return _REPLACE_ROWS[row]
    if row == "default" and Path(str(dataset).rstrip("/")).name.lower() == "swap":
        return "swap"
    return None


def retention_benchmark_of(dataset: str, row: str) -> str | None:
    """Table 10's benchmark a zero-shot result measures: the dataset's name (without clip_benchmark's
    `wds_` prefix) when it is one of `RETENTION_DATASETS`, for its one row `all`; else None."""
    name = Path(str(dataset).rstrip("/")).name.lower().removeprefix("wds_")
    return name if row == "all" and name in RETENTION_DATASETS else None
