"""Kamath et al., "The Hard Positive Truth about Vision-Language Compositionality" (ECCV 2024): the names
its figures go by.

The figures themselves are in ``figures.yaml`` (Tables 1, 2, 3, 9, 10 whole; Table 7's CLIP ViT-B/32
row and Table 8's CLIP ViT-B/16 and ViT-L/14 rows, the only cells of those tables checked against the
paper: their other rows are left absent, never guessed). Benchmarks: `replace` (the paper's REPLACE
column: both subsets' rows pooled, see `hf_hardpos.evaluation.aggregation`), `replace/attributes` and
`replace/relations` (Table 7), `swap`; rates in percent, mean scores (Tables 2, 9) in cosine. Which of our result rows stands beside
which benchmark is each task's to say (`evaluation.tasks.Task.published_benchmark`).
"""

from __future__ import annotations

# Systems (the `model` of their figures) that other modules name.
CLIP_B32 = "CLIP ViT-B/32"
CLIP_B16 = "CLIP ViT-B/16"
CLIP_L14 = "CLIP ViT-L/14"
HN = "HN (Kamath et al.)"
HP_HN = "HP+HN (Kamath et al.)"
CLIP_COCO = "CLIP-COCO (Kamath et al.)"

# Rows per REPLACE subset, counted in the paper's data files (github.com/amitakamath/hard_positives
# @33addaa, each subset's `data.sources.original_file`): the weights that pool Table 7 into Table 1.
REPLACE_SUBSET_ROWS = {"attributes": 10_575, "relations": 16_868}

RATES = ("original_accuracy", "augmented_accuracy", "brittleness")
