"""Published figures from the papers this package reproduces, with their source (paper, table, page).

This package is the only place a published number is typed. Each paper's figures live in a module of
their own (``hard_positive`` for Kamath et al., ECCV 2024; ``ce_clip`` for Zhang et al., CVPR 2024)
as tuples of :class:`PublishedFigure`; every table, ``metrics.json`` and report that shows a published
row beside ours reads it from here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedFigure:
    """One number as printed in a paper.

    ``value`` is exactly as printed (percent for rates, cosine for mean scores); ``source`` names the
    paper, table and page, so a reader can check it.
    """

    model: str  # the paper's row name, e.g. "CLIP ViT-B/32"
    benchmark: str  # e.g. "replace", "replace/attributes", "swap", "valse/existence", "imagenet1k"
    metric: str  # e.g. "original_accuracy", "augmented_accuracy", "brittleness", "acc1"
    value: float
    source: str  # e.g. "Kamath et al., ECCV 2024, Table 1 (p. 9)"
