"""VALSE's metric and CE-CLIP's Table 1 columns, from per-row outcomes.

VALSE (Parcalabescu et al., ACL 2022) scores only its *valid* rows (``mturk.caption >= 2``); on those,
acc_r is the share of rows with s(caption|i) > s(foil|i), strict (a tie is wrong). CE-CLIP (Zhang et
al., CVPR 2024, Table 1) prints nine VALSE columns (`COLUMNS`): one per piece, except counting, the
plain mean of its three pieces; action replacement and actant swap, coreference standard and clean,
are separate columns. Its "Avg" is the plain mean over the 11 pieces (so the counting column weighs 3
of 11), not over the nine columns and not pooled over rows: CLIP's printed cells give 65.34 that way
(printed 65.3) and 66.3 as a mean of the columns. Every piece keeps its own row; the aggregates add
`counting` and `avg`. Hard positives do not exist in VALSE: only the original accuracy is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from datasets import Dataset

from ... import columns
from ...evaluation.tasks.caption_profile import CaptionSelectionProfile
from ...evaluation.tasks.selection import SELECTION_TIE_RULE, selection_correct, selection_scores
from ...scoring import ITMScorer
from .builder import PIECES

MARKER_COLUMNS = frozenset({"mturk_caption", "valid"})  # what tells a VALSE config from other caption sets

# CE-CLIP Table 1's nine VALSE columns, in its order: column -> the pieces it averages. "coreference
# clean" is VALSE's `coreference-hard` file (VisDial's manually cleaned subset).
COLUMNS: dict[str, tuple[str, ...]] = {
    "existence": ("existence",),
    "plurality": ("plurals",),
    "counting": ("counting-hard", "counting-small-quant", "counting-adversarial"),
    "spatial_relations": ("relations",),
    "action_replacement": ("action-replacement",),
    "actant_swap": ("actant-swap",),
    "coreference_standard": ("coreference-standard",),
    "coreference_clean": ("coreference-hard",),
    "foil_it": ("foil-it",),
}
COUNTING = "counting"
AVG = "avg"
AGGREGATION = (
    "rows with mturk.caption >= 2 only (VALSE's valid rows); accuracy per piece = share of those rows with "
    "s(caption) > s(foil); counting = plain mean of its 3 pieces' accuracies (CE-CLIP Table 1; its other 8 "
    "columns are single pieces); avg = plain mean over the pieces present (all 11 for CE-CLIP's Avg)"
)


def aggregate_pieces(accuracies: Mapping[str, float]) -> dict[str, dict]:
    """CE-CLIP's aggregates from per-piece accuracies: `counting` (when its 3 pieces are present) and `avg`.

    `avg` is the plain mean over the pieces present, with `num_pieces`; it is CE-CLIP's Avg only when
    all 11 are. Also what the tests feed the paper's printed cells to re-derive its printed Avg.
    """
    aggregates: dict[str, dict] = {}
    counting = COLUMNS[COUNTING]
    if all(p in accuracies for p in counting):
        aggregates[COUNTING] = {"accuracy": float(np.mean([accuracies[p] for p in counting])),
                                "aggregation": f"mean({','.join(counting)})"}  # fmt: skip
    present = [p for p in PIECES if p in accuracies]
    if present:
        aggregates[AVG] = {
            "accuracy": float(np.mean([accuracies[p] for p in present])),
            "num_pieces": len(present),
            "aggregation": f"mean over {len(present)} of {len(PIECES)} pieces"
            + ("" if len(present) == len(PIECES) else f": {present}"),
        }
    return aggregates


def valse_section(correct: Mapping[str, np.ndarray], valid: Mapping[str, np.ndarray]) -> dict:
    """Results per piece and CE-CLIP's aggregates from per-row outcomes (``correct``) and validity masks.

    Returns {"results": {piece: {accuracy, num_examples, num_upstream_rows}}, "aggregates": {counting, avg}}.
    """
    results = {}
    for piece, outcome in correct.items():
        mask = np.asarray(valid[piece], dtype=bool)
        kept = np.asarray(outcome, dtype=bool)[mask]
        if kept.size == 0:
            raise ValueError(f"VALSE piece {piece!r}: no valid row (mturk.caption >= 2) to score")
        results[piece] = {
            "accuracy": float(kept.mean()),
            "num_examples": int(kept.size),
            "num_upstream_rows": int(mask.size),
        }
    aggregates = aggregate_pieces({p: r["accuracy"] for p, r in results.items()})
    for name, row in aggregates.items():
        pieces = COLUMNS[COUNTING] if name == COUNTING else [p for p in PIECES if p in results]
        row["num_examples"] = int(sum(results[p]["num_examples"] for p in pieces))
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
            scores = selection_scores(
                scorer,
                dataset.select(kept),
                negative_columns=[columns.HARD_NEGATIVE],
                what=f"VALSE piece {piece!r}",
            )
            outcome[kept] = selection_correct(scores)
        correct[piece], valid[piece] = outcome, mask
    return {**valse_section(correct, valid), "tie_rule": SELECTION_TIE_RULE}


_SINGLE_PIECE_COLUMNS = {pieces[0]: column for column, pieces in COLUMNS.items() if len(pieces) == 1}


def _published_column(row: str, metrics: Mapping[str, Any]) -> str | None:
    """A piece's row (only VALSE's rows carry `num_upstream_rows`), `counting` over its 3 pieces, or
    `avg` when it averages all 11 pieces."""
    if row in _SINGLE_PIECE_COLUMNS and "num_upstream_rows" in metrics:
        return _SINGLE_PIECE_COLUMNS[row]
    if row == COUNTING and metrics.get("aggregation") == f"mean({','.join(COLUMNS[COUNTING])})":
        return COUNTING
    if row == AVG and metrics.get("num_pieces") == sum(len(pieces) for pieces in COLUMNS.values()):
        return AVG
    return None


PROFILE = CaptionSelectionProfile(
    name="valse",
    citation="Parcalabescu et al. (ACL 2022), github.com/Heidelberg-NLP/VALSE; CE-CLIP (CVPR 2024) Table 1",
    recognises=lambda subsets: is_valse(next(iter(subsets.values()))),
    columns=(*COLUMNS, AVG),
    published_column=_published_column,
    evaluate=evaluate_valse,
)
