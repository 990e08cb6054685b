"""VALSE's metric and CE-CLIP's Table 1 columns, from per-row outcomes.

VALSE (Parcalabescu et al., ACL 2022) scores only its *valid* rows (``mturk.caption >= 2``); on those,
acc_r is the share of rows with s(caption|i) > s(foil|i), strict (a tie is wrong). CE-CLIP (Zhang et
al., CVPR 2024, Table 1) prints one column per linguistic category — counting averages its three pieces,
actions its two, coreference its two — and "Avg", the plain mean over the 11 pieces (not over the
categories, and not pooled over rows). Hard positives do not exist in VALSE: only the original accuracy
is reported.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from datasets import Dataset

from ... import columns
from ...data.valse import PIECES
from ...scoring import ITMScorer
from .selection import SELECTION_TIE_RULE, selection_correct, selection_scores

MARKER_COLUMNS = frozenset({"mturk_caption", "valid"})  # what tells a VALSE config from other caption sets

# CE-CLIP Table 1's VALSE columns: category -> the pieces it averages (plain mean of piece accuracies).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "existence": ("existence",),
    "plurality": ("plurals",),
    "counting": ("counting-hard", "counting-small-quant", "counting-adversarial"),
    "spatial_relations": ("relations",),
    "actions": ("action-replacement", "actant-swap"),
    "coreference": ("coreference-standard", "coreference-hard"),
    "foil_it": ("foil-it",),
}
AGGREGATION = (
    "rows with mturk.caption >= 2 only (VALSE's valid rows); accuracy per piece = share of those rows with "
    "s(caption) > s(foil); category = plain mean of its pieces' accuracies (CE-CLIP Table 1); "
    "avg = plain mean over the pieces present (all 11 for CE-CLIP's Avg)"
)


def valse_section(correct: Mapping[str, np.ndarray], valid: Mapping[str, np.ndarray]) -> dict:
    """Results per piece and the seeds' aggregates from per-row outcomes (``correct``) and validity masks.

    Returns {"results": {piece: {accuracy, num_examples, num_upstream_rows}}, "aggregates": {...}}; a
    category appears only when all its pieces were evaluated, and ``avg`` names the pieces it averages.
    """
    results = {}
    for piece, outcome in correct.items():
        mask = np.asarray(valid[piece], dtype=bool)
        kept = np.asarray(outcome, dtype=bool)[mask]
        if kept.size == 0:
            raise ValueError(f"VALSE piece {piece!r}: no valid row (mturk.caption >= 2) to score")
        results[piece] = {"accuracy": float(kept.mean()), "num_examples": int(kept.size), "num_upstream_rows": int(mask.size)}
    aggregates: dict[str, dict] = {}
    for category, pieces in CATEGORIES.items():
        if all(p in results for p in pieces):
            aggregates[category] = {
                "accuracy": float(np.mean([results[p]["accuracy"] for p in pieces])),
                "num_examples": int(sum(results[p]["num_examples"] for p in pieces)),
                "aggregation": f"mean({','.join(pieces)})",
            }
    present = [p for p in PIECES if p in results]
    aggregates["avg"] = {
        "accuracy": float(np.mean([results[p]["accuracy"] for p in present])),
        "num_examples": int(sum(results[p]["num_examples"] for p in present)),
        "aggregation": f"mean over {len(present)} of {len(PIECES)} pieces" + ("" if len(present) == len(PIECES) else f": {present}"),
    }
    return {"results": results, "aggregates": aggregates, "aggregation": AGGREGATION}


def is_valse(dataset: Dataset) -> bool:
    return MARKER_COLUMNS <= set(dataset.column_names)


def evaluate_valse(scorer: ITMScorer, subsets: Mapping[str, Dataset], max_rows: int | None = None) -> dict:
    """Score the valid rows of each piece (caption vs foil) and aggregate as VALSE and CE-CLIP do.

    Only valid rows are encoded; ``max_rows`` caps the rows read per piece (before the filter).
    """
    correct, valid = {}, {}
    for piece, dataset in subsets.items():
        if max_rows is not None:
            dataset = dataset.select(range(min(max_rows, len(dataset))))
        mask = np.asarray(dataset["valid"], dtype=bool)
        outcome = np.zeros(mask.size, dtype=bool)
        kept = np.flatnonzero(mask)
        if kept.size:
            scores = selection_scores(scorer, dataset.select(kept), negative_columns=[columns.HARD_NEGATIVE],
                                      what=f"VALSE piece {piece!r}")
            outcome[kept] = selection_correct(scores)
        correct[piece], valid[piece] = outcome, mask
    return {**valse_section(correct, valid), "tie_rule": SELECTION_TIE_RULE}
