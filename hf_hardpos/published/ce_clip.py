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

from ..evaluation.tasks.caption_selection import CAPTION_SELECTION, published_key

TASK = CAPTION_SELECTION
CE_CLIP = "CE-CLIP"
NEGCLIP = "NegCLIP"


def benchmark_of(row: str, metrics: Mapping[str, Any]) -> str | None:
    """The CE-CLIP benchmark a row of our caption-selection results measures, or None.

    VALSE piece rows are told by their `num_upstream_rows` (only VALSE's carry it); `avg` only when it
    averages all 11 pieces; a SugarCrepe group or overall mean only over all its subsets (each benchmark
    module's `PROFILE.published_column`).
    """
    return published_key(row, metrics)  # each benchmark's profile (`evaluation.tasks.caption_selection.PROFILES`)
