"""CE-CLIP (Zhang, Awal, Agrawal, CVPR 2024): which of our caption-selection result rows stand beside
which of its printed figures (Tables 1, 2, 3 and 5, in ``figures.yaml``).

Benchmarks, in the vocabulary of our results:

- ARO (Table 1, Table 5): `aro/vg_relation`, `aro/vg_attribution`, metric `macro_accuracy` (ARO's
  macro accuracies, `evaluation.tasks.aro`);
- VALSE (Table 1): `valse/<column>` for its nine columns (`evaluation.tasks.valse.COLUMNS`) and
  `valse/avg` (mean over the 11 pieces), metric `accuracy`;
- VL-CheckList (Table 2): `vl_checklist/<aspect>_<type>` for the nine leaves, `vl_checklist/<aspect>`
  and `vl_checklist/overall`, metric `accuracy`, beside our `official` protocol (first 1,000 rows per
  file, the one published numbers use);
- SugarCrepe (Table 3): `sugarcrepe/<subset>`, `sugarcrepe/<replace|swap|add>` (group means) and
  `sugarcrepe/mean` (Table 5: the mean of the 7 subsets), metric `accuracy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..evaluation.tasks.aro import ARO_MACRO
from ..evaluation.tasks.caption_selection import (
    CAPTION_SELECTION,
    SUGARCREPE_CATEGORIES,
    SUGARCREPE_SUBSETS,
)
from ..evaluation.tasks.valse import AVG, COLUMNS, COUNTING
from ..evaluation.tasks.vl_checklist import LEAVES, OVERALL

TASK = CAPTION_SELECTION
CE_CLIP = "CE-CLIP"
NEGCLIP = "NegCLIP"

_VALSE_PIECES = {pieces[0]: column for column, pieces in COLUMNS.items() if len(pieces) == 1}
_VALSE_NUM_PIECES = sum(len(p) for p in COLUMNS.values())
_VL_CHECKLIST = {f"official/{name}": f"vl_checklist/{name}" for name in (
    *(f"{aspect}_{kind}" for aspect, kinds in LEAVES.items() for kind in kinds), *LEAVES, OVERALL)}
_SUGARCREPE = {
    **{subset: f"sugarcrepe/{subset}" for subset in SUGARCREPE_SUBSETS},
    **{f"{group}=mean({','.join(members)})": f"sugarcrepe/{group}" for group, members in SUGARCREPE_CATEGORIES.items()},
}


def benchmark_of(row: str, metrics: Mapping[str, Any]) -> str | None:
    """The CE-CLIP benchmark a row of our caption-selection results measures, or None.

    VALSE piece rows are told by their `num_upstream_rows` (only VALSE's carry it); `avg` only when it
    averages all 11 pieces; a SugarCrepe group or overall mean only over all its subsets.
    """
    if row in ARO_MACRO:
        return f"aro/{row}"
    if row in _VL_CHECKLIST:
        return _VL_CHECKLIST[row]
    if row in _VALSE_PIECES and "num_upstream_rows" in metrics:
        return f"valse/{_VALSE_PIECES[row]}"
    if row == COUNTING and metrics.get("aggregation") == f"mean({','.join(COLUMNS[COUNTING])})":
        return f"valse/{COUNTING}"
    if row == AVG and metrics.get("num_pieces") == _VALSE_NUM_PIECES:
        return f"valse/{AVG}"
    if row in _SUGARCREPE and "num_upstream_rows" not in metrics:
        return _SUGARCREPE[row]
    if row.startswith("mean(") and row.endswith(")") and set(row[5:-1].split(",")) == set(SUGARCREPE_SUBSETS):
        return "sugarcrepe/mean"
    return None
