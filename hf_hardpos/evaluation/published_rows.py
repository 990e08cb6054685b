"""Which published figures stand beside a result of ours: each task maps its rows to the papers' benchmarks.

`hf_hardpos.published` holds the printed figures and the systems they belong to; which of our result rows
measures which printed benchmark is the task's to say (`tasks.Task.published_benchmark`: REPLACE's
configs and pooled column, SWAP, the caption-selection profiles' columns, Table 10's zero-shot datasets).
This module puts the two together, so the figures never depend on how results are computed.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..published import comparison, model_row
from .tasks import HARD_POSITIVE, TASKS


def benchmarks_of(dataset: str, rows: Mapping[str, Mapping], task: str | None) -> dict[str, str]:
    """Our row -> the papers' benchmark it measures, for every row of one result that has one.

    `task` None is a `hardpos eval` result of a hard-positive dataset written before results named their
    task; a task no paper prints (or an unknown one) has no benchmark.
    """
    declared = TASKS.get(task or HARD_POSITIVE)
    mapping = declared.published_benchmark if declared is not None else None
    if mapping is None:
        return {}
    found = {row: mapping(dataset, row, metrics) for row, metrics in rows.items()}
    return {row: benchmark for row, benchmark in found.items() if benchmark is not None}


def beside_ours(
    model: str, dataset: str, rows: Mapping[str, Mapping], preset: str | None = None, task: str | None = None
) -> dict:
    """What a report stores and prints about a known published model: its system and `comparison`.

    `task` is the result's task (None: a hard-positive result, as `hardpos eval` on REPLACE/SWAP).
    Empty when `model` (or `preset`) is no known system, or no row of ours has a published figure.
    """
    system = model_row(model, preset)
    if system is None:
        return {}
    compared = comparison(system, rows, benchmarks_of(dataset, rows, task))
    if not compared:
        return {}
    return {"model_row": system, "units": "published: as printed (percent, or cosine for mean scores); delta: "
            "ours - published (percentage points, or cosine)", "rows": compared}  # fmt: skip
