"""SugarCrepe (Hsieh et al., NeurIPS 2023; github.com/RAIVNLab/sugar-crepe): its seven subsets and the
category means it and CE-CLIP (Zhang et al., CVPR 2024, Tables 3 and 5) print.

Rows are scored by the shared caption-selection rule (c vs c_n, strict, as SugarCrepe's ``>``); this
module adds the categories, each the unweighted mean of its subsets' accuracies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from datasets import Dataset

from .caption_profile import CaptionSelectionProfile

# SugarCrepe's categories (Hsieh et al. 2023, Table 2), each the unweighted mean of its subsets.
SUGARCREPE_CATEGORIES = {
    "add": ("add_att", "add_obj"),
    "replace": ("replace_att", "replace_obj", "replace_rel"),
    "swap": ("swap_att", "swap_obj"),
}
SUGARCREPE_SUBSETS = tuple(m for members in SUGARCREPE_CATEGORIES.values() for m in members)
MEAN = "mean"  # CE-CLIP Table 5's SugarCrepe column: the mean of all 7 subsets

_CATEGORY_ROWS = {
    f"{group}=mean({','.join(members)})": group for group, members in SUGARCREPE_CATEGORIES.items()
}


def _recognises(subsets: Mapping[str, Dataset]) -> bool:
    return bool(set(subsets) & set(SUGARCREPE_SUBSETS))


def _published_column(row: str, metrics: Mapping[str, Any]) -> str | None:
    """A subset's row, a category mean over all its subsets, or the mean of all 7 (not VALSE's rows,
    which carry `num_upstream_rows`)."""
    if "num_upstream_rows" not in metrics:
        if row in SUGARCREPE_SUBSETS:
            return row
        if row in _CATEGORY_ROWS:
            return _CATEGORY_ROWS[row]
    if row.startswith("mean(") and row.endswith(")") and set(row[5:-1].split(",")) == set(SUGARCREPE_SUBSETS):
        return MEAN
    return None


PROFILE = CaptionSelectionProfile(
    name="sugarcrepe",
    citation="Hsieh et al. (NeurIPS 2023) Table 2; CE-CLIP (CVPR 2024) Tables 3 and 5",
    recognises=_recognises,
    columns=(*SUGARCREPE_SUBSETS, *SUGARCREPE_CATEGORIES, MEAN),
    published_column=_published_column,
    selection_options=lambda subsets: {"categories": SUGARCREPE_CATEGORIES},
)
