"""Figures of Kamath et al., "The Hard Positive Truth about Vision-Language Compositionality" (ECCV 2024).

Rates are in percent, as printed. Benchmarks: `replace` (the paper's REPLACE column: both subsets'
rows pooled, see `hf_hardpos.aggregation`), `replace/attributes` and `replace/relations` (Table 7),
`swap`; zero-shot retention (Table 10) under clip_benchmark's names (`imagenet1k` acc1, `vtab` mean
acc1).

Which figures are here: only those this package's authors could read and check against the paper
(docs/reference.md shows, with the CLIP rows of Tables 1 and 7, why REPLACE is pooled). Not typed
yet, for want of a checked reading: Table 1's other rows (NegCLIP, CREPE, SVLC, DAC, the paper's HN
model), Table 2's mean scores, Table 7's rows other than CLIP ViT-B/32, Table 8's rows other than
CLIP ViT-B/16 and ViT-L/14, Table 10's acc@5 and retrieval columns. A lookup that finds no figure
returns nothing rather than a guess.

The model rows are the paper's row names; `HUB_ROWS` and `PRESET_ROWS` map the Hub ids and
`hardpos zoo` presets whose weights are the ones the paper scored, and `benchmark_of` names the
benchmark of a row of our results.
"""

from __future__ import annotations

from pathlib import Path

from ..evaluation.aggregation import REPLACE_POOLED
from . import PublishedFigure

PAPER = "Kamath et al., ECCV 2024 (arXiv 2409.17958)"

# Rows per REPLACE subset, counted in the paper's data files (github.com/amitakamath/hard_positives
# @33addaa, data/vl_checklist_{attributes,relations}.json): the weights that pool Table 7 into Table 1.
REPLACE_SUBSET_ROWS = {"attributes": 10_575, "relations": 16_868}

RATES = ("original_accuracy", "augmented_accuracy", "brittleness")


def _rates(model: str, benchmark: str, table: str, values: tuple[float, float, float]) -> tuple[PublishedFigure, ...]:
    """Original accuracy, augmented accuracy and brittleness of one row of one table."""
    return tuple(
        PublishedFigure(model, benchmark, metric, value, f"{PAPER}, {table}")
        for metric, value in zip(RATES, values)
    )


CLIP_B32 = "CLIP ViT-B/32"
CLIP_B16 = "CLIP ViT-B/16"
CLIP_L14 = "CLIP ViT-L/14"
HP_HN = "HP+HN (the paper's model, hard positives and hard negatives)"

FIGURES: tuple[PublishedFigure, ...] = (
    # Table 1: REPLACE (subsets pooled) and SWAP.
    *_rates(CLIP_B32, "replace", "Table 1", (61.6, 46.8, 23.2)),
    *_rates(CLIP_B32, "swap", "Table 1", (60.5, 49.6, 21.7)),
    *_rates(HP_HN, "replace", "Table 1", (69.0, 58.0, 16.9)),
    *_rates(HP_HN, "swap", "Table 1", (73.2, 61.1, 22.9)),
    # Table 7: REPLACE per subset.
    *_rates(CLIP_B32, "replace/relations", "Table 7", (57.6, 45.3, 21.7)),
    *_rates(CLIP_B32, "replace/attributes", "Table 7", (68.1, 49.0, 25.5)),
    # Table 8: more pretrained models, same benchmarks.
    *_rates(CLIP_B16, "replace", "Table 8", (61.8, 45.0, 24.8)),
    *_rates(CLIP_B16, "swap", "Table 8", (61.1, 51.1, 19.8)),
    *_rates(CLIP_L14, "replace", "Table 8", (64.2, 48.4, 24.0)),
    *_rates(CLIP_L14, "swap", "Table 8", (61.1, 49.9, 21.9)),
    # Table 10: zero-shot retention (ImageNet-1k acc@1; VTAB mean acc@1).
    PublishedFigure(CLIP_B32, "imagenet1k", "acc1", 63.33, f"{PAPER}, Table 10"),
    PublishedFigure(CLIP_B32, "vtab", "acc1", 39.00, f"{PAPER}, Table 10"),
    PublishedFigure(HP_HN, "imagenet1k", "acc1", 49.85, f"{PAPER}, Table 10"),
    PublishedFigure(HP_HN, "vtab", "acc1", 33.24, f"{PAPER}, Table 10"),
)

# Hub ids whose weights are a row's: the paper loaded OpenAI's originals with `clip.load`, of which
# these Hub repositories are OpenAI's own HF-format copies.
HUB_ROWS = {
    "openai/clip-vit-base-patch32": CLIP_B32,
    "openai/clip-vit-base-patch16": CLIP_B16,
    "openai/clip-vit-large-patch14": CLIP_L14,
}
# `hardpos zoo` presets (hf_hardpos.conversion.presets) whose checkpoint is a row's.
PRESET_ROWS = {"clip": CLIP_B32, "hp-hn": HP_HN}

# Our result rows -> the paper's benchmarks (REPLACE's configs and its pooled aggregate).
_REPLACE_ROWS = {"attributes": "replace/attributes", "relations": "replace/relations", REPLACE_POOLED: "replace"}


def benchmark_of(dataset: str, row: str) -> str | None:
    """The paper's benchmark a row of `hardpos eval`'s results measures, or None.

    REPLACE rows are known by their config names; SWAP has one config, `default`, so a `default` row is
    SWAP only when the dataset is named `swap` (the Hub id `hardpos/swap` or a folder named `swap`, as
    `hardpos build swap` writes it).
    """
    if row in _REPLACE_ROWS:
        return _REPLACE_ROWS[row]
    if row == "default" and Path(str(dataset).rstrip("/")).name.lower() == "swap":
        return "swap"
    return None
