"""VL-CheckList's image-text metric in its two protocols, and CE-CLIP's Table 2 columns.

The official metric (om-ai-lab/VL-CheckList @6f8d6a3, image-text contrast "ITC"): per row,
s(POS[0]|i) > s(NEG[0]|i), strict; one accuracy per annotation file; and each file is read only up to
its **first 1,000 rows** (the evaluator's MAX_NUM of 2,000 texts, halved; file order, no sampling).
Both protocols are reported, each under its name:

- ``official``: the first 1,000 rows of every file, what published numbers use;
- ``full``: every row of every file.

CE-CLIP (Zhang et al., CVPR 2024, Table 2) prints nine leaf columns — Attribute: action, color,
material, size, state; Object: location, size; Relation: action, spatial — then Attribute = mean of
its five, Object = mean(location, size), Relation = mean(action, spatial) and the overall mean of the
nine leaves. How a leaf combines several files (centre/mid/margin, several sources) is not stated by
CE-CLIP; here a leaf is the plain mean of its files' accuracies, as VL-CheckList's own radar plots
average per item over sources. Hard positives do not exist here: original accuracy only.

Its published figures (``figures.yaml`` beside this module) are keyed `vl_checklist/<aspect>_<type>` for
the nine leaves, `vl_checklist/<aspect>` and `vl_checklist/overall` (also Table 5's column), metric
`accuracy`, and stand beside our `official` protocol (first 1,000 rows per file, the one published
numbers use).
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
from .builder import aspect_and_type

MARKER_COLUMNS = frozenset({"upstream_index", "aspect", "type"})  # what tells a VL-CheckList config apart

OFFICIAL_ROWS_PER_FILE = 1_000
PROTOCOLS = ("official", "full")
OVERALL = "overall"
# CE-CLIP Table 2: aspect -> its leaf columns (the `type` of each corpus file).
LEAVES: dict[str, tuple[str, ...]] = {
    "attribute": ("action", "color", "material", "size", "state"),
    "object": ("location", "size"),
    "relation": ("action", "spatial"),
}
AGGREGATION = (
    "accuracy per file = share of rows with s(POS[0]) > s(NEG[0]); official = each file's first 1,000 rows "
    "(VL-CheckList's protocol), full = all rows; leaf (aspect_type) = plain mean of its files; attribute, "
    "object, relation = plain mean of their leaves; overall = plain mean of the 9 leaves (CE-CLIP Table 2)"
)


def _mean(values: list[float]) -> float:
    return float(np.mean(values))


def aggregate_leaves(leaves: Mapping[str, float]) -> dict[str, dict]:
    """CE-CLIP Table 2's averages from leaf accuracies keyed `<aspect>_<type>` (e.g. `attribute_color`):
    each aspect (all its leaves present) = plain mean of its leaves; `overall` (all 9 present) = plain
    mean of the 9 leaves, not of the three aspect means. Also what the tests feed the paper's printed
    leaves to re-derive its printed averages."""
    aggregates: dict[str, dict] = {}
    for aspect, kinds in LEAVES.items():
        members = [f"{aspect}_{kind}" for kind in kinds]
        if all(m in leaves for m in members):
            aggregates[aspect] = {"accuracy": _mean([leaves[m] for m in members]), "leaves": members}
    all_leaves = [f"{a}_{k}" for a, kinds in LEAVES.items() for k in kinds]
    if all(m in leaves for m in all_leaves):
        aggregates[OVERALL] = {"accuracy": _mean([leaves[m] for m in all_leaves]), "leaves": all_leaves}
    return aggregates


def vl_checklist_section(correct: Mapping[str, np.ndarray]) -> dict:
    """Per-file accuracies under both protocols and CE-CLIP's Table 2 columns, from per-row outcomes in
    file order (config name -> booleans)."""
    results: dict[str, dict] = {}
    for name, outcome in correct.items():
        outcome = np.asarray(outcome, dtype=bool)
        official = outcome[:OFFICIAL_ROWS_PER_FILE]
        results[name] = {
            "accuracy": float(official.mean()),  # the official protocol is the headline
            "num_examples": int(official.size),
            "accuracy_full": float(outcome.mean()),
            "num_examples_full": int(outcome.size),
        }
    aggregates: dict[str, dict] = {}
    for protocol, key in (("official", "accuracy"), ("full", "accuracy_full")):
        leaves: dict[str, float] = {}
        for aspect, kinds in LEAVES.items():
            for kind in kinds:
                files = [n for n in results if aspect_and_type(n) == (aspect, kind)]
                if files:
                    leaves[f"{aspect}_{kind}"] = _mean([results[f][key] for f in files])
                    aggregates[f"{protocol}/{aspect}_{kind}"] = {
                        "accuracy": leaves[f"{aspect}_{kind}"],
                        "files": files,
                    }
        for name, row in aggregate_leaves(leaves).items():
            aggregates[f"{protocol}/{name}"] = row
    return {"results": results, "aggregates": aggregates, "aggregation": AGGREGATION}


def is_vl_checklist(dataset: Dataset) -> bool:
    return MARKER_COLUMNS <= set(dataset.column_names)


def evaluate_vl_checklist(
    scorer: ITMScorer, subsets: Mapping[str, Dataset], max_rows: int | None = None
) -> dict:
    """Score POS[0] vs NEG[0] on every row of each file and report both protocols and CE-CLIP's columns."""
    correct = {}
    for name, dataset in subsets.items():
        if max_rows is not None:
            dataset = dataset.select(range(min(max_rows, len(dataset))))
        order = np.asarray(dataset["upstream_index"])
        if np.any(np.diff(order) <= 0):
            raise ValueError(
                f"VL-CheckList file {name!r}: rows are not in upstream file order (upstream_index)"
            )
        scores = selection_scores(
            scorer, dataset, negative_columns=[columns.HARD_NEGATIVE], what=f"VL-CheckList file {name!r}"
        )
        correct[name] = selection_correct(scores)
    return {**vl_checklist_section(correct), "tie_rule": SELECTION_TIE_RULE}


# CE-CLIP Table 2's columns in its order: the nine leaves, the three aspects, the overall mean.
TABLE_COLUMNS = (
    *(f"{aspect}_{kind}" for aspect, kinds in LEAVES.items() for kind in kinds),
    *LEAVES,
    OVERALL,
)


def _published_column(row: str, metrics: Mapping[str, Any]) -> str | None:
    """Our `official/<column>` rows: published numbers use the official protocol (first 1,000 rows per file)."""
    protocol, _, column = row.partition("/")
    return column if protocol == PROTOCOLS[0] and column in TABLE_COLUMNS else None


PROFILE = CaptionSelectionProfile(
    name="vl_checklist",
    citation="Zhao et al. (2022), github.com/om-ai-lab/VL-CheckList @6f8d6a3; CE-CLIP (CVPR 2024) Table 2",
    recognises=lambda subsets: is_vl_checklist(next(iter(subsets.values()))),
    columns=TABLE_COLUMNS,
    published_column=_published_column,
    evaluate=evaluate_vl_checklist,
)
