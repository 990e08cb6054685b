"""What a caption-selection benchmark declares about itself: how its data is recognised, how its rows
aggregate, and which of its result rows are the columns its paper prints, in that order.

Why: the caption-selection task scores every benchmark the same way (which of k captions fits the
image, strict), but each benchmark aggregates its own way (SugarCrepe's category means, ARO's macro
accuracies, VALSE's valid rows, VL-CheckList's first 1,000 rows per file). Each benchmark module
(`sugarcrepe`, `aro`, `valse`, `vl_checklist`) declares one `CaptionSelectionProfile`;
`caption_selection.PROFILES` lists them and the task iterates that list, so a new benchmark is its module
plus one line there (docs/architecture.md, "A new caption-selection benchmark").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset

from ...scoring import ITMScorer

__all__ = ["CaptionSelectionProfile"]


@dataclass(frozen=True)
class CaptionSelectionProfile:
    """One caption-selection benchmark.

    Attributes:
        name: the benchmark's short name, the prefix of its published figures (``valse/<column>``).
        citation: the paper (table) or upstream code its aggregation follows.
        recognises: ``recognises(subsets) -> bool``: whether a dataset's configs (name -> rows) are this
            benchmark's, from their names or columns.
        evaluate: ``evaluate(scorer, subsets, max_rows) -> {"results", "aggregates", "tie_rule",
            "aggregation"}`` for a benchmark with its own aggregation; it then scores the dataset alone.
            None: the shared `evaluate_caption_selection` scores it with ``selection_options``.
        selection_options: ``selection_options(subsets) -> kwargs`` of `evaluate_caption_selection`
            (``categories``, ``macro``, ``true_caption_first``) for a benchmark without its own `evaluate`;
            the options of every such profile that recognises a dataset are merged.
        columns: the paper's printed columns, in its order, as this benchmark's column names.
        published_column: ``published_column(row, metrics) -> column | None``: which of `columns` a row
            of our results stands for (``None``: none), for comparisons with published figures.
    """

    name: str
    citation: str
    recognises: Callable[[Mapping[str, Dataset]], bool]
    columns: Sequence[str]
    published_column: Callable[[str, Mapping[str, Any]], str | None]
    evaluate: Callable[[ITMScorer, Mapping[str, Dataset], int | None], dict] | None = None
    selection_options: Callable[[Mapping[str, Dataset]], dict[str, Any]] = field(default=lambda subsets: {})

    def published_key(self, row: str, metrics: Mapping[str, Any]) -> str | None:
        """``<name>/<column>`` of the published figure `row` stands beside, or None."""
        column = self.published_column(row, metrics)
        return None if column is None else f"{self.name}/{column}"
