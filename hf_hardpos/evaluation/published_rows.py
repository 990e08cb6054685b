"""Which published figures stand beside a result of ours: each task maps its rows to the papers' benchmarks.

`hf_hardpos.published` holds the printed figures and the systems they belong to; which of our result rows
measures which printed benchmark is the task's to say (`tasks.Task.published_benchmark`: REPLACE's
configs and pooled column, SWAP, the caption-selection profiles' columns, Table 10's zero-shot datasets).
This module puts the two together, so the figures never depend on how results are computed.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..published import comparison, model_row
from .paper_data import built_as, data_differs
from .tasks import HARD_POSITIVE, TASKS


def benchmarks_of(
    dataset: str, rows: Mapping[str, Mapping], task: str | None, provenance: Mapping | None = None
) -> dict[str, str]:
    """Our row -> the papers' benchmark it measures, for every row of one result that has one.

    `task` None is a `hardpos eval` result of a hard-positive dataset written before results named their
    task; a task no paper prints (or an unknown one) has no benchmark. When the data's build is recorded
    in `provenance`, the benchmark it was built as stands for the dataset's name (`paper_data.built_as`).
    """
    dataset = built_as(provenance or {}) or dataset
    declared = TASKS.get(task or HARD_POSITIVE)
    mapping = declared.published_benchmark if declared is not None else None
    if mapping is None:
        return {}
    found = {row: mapping(dataset, row, metrics) for row, metrics in rows.items()}
    return {row: benchmark for row, benchmark in found.items() if benchmark is not None}


def configs_of(row: str, metrics: Mapping) -> list[str]:
    """The configs a result row counts: an aggregate's own list (REPLACE's pooled column), else the row itself."""
    aggregation = metrics.get("aggregation") if isinstance(metrics, Mapping) else None
    configs = aggregation.get("configs") if isinstance(aggregation, Mapping) else None
    return list(configs) if isinstance(configs, list) else [row]


def gate_deltas(
    compared: dict[str, dict], rows: Mapping[str, Mapping], provenance: Mapping, max_rows: int | None = None
) -> dict[str, dict]:
    """`comparison`'s rows with each delta kept only where the row was measured on the paper's benchmark
    (`paper_data.data_differs`); elsewhere the delta is dropped and `differs` says why, in one line."""
    for row, entry in compared.items():
        differs = data_differs(
            entry["benchmark"], configs_of(row, rows.get(row, {})), rows, provenance, max_rows
        )
        if differs is not None:
            entry.pop("delta", None)
            entry["differs"] = differs
    return compared


def beside_ours(
    model: str,
    dataset: str,
    rows: Mapping[str, Mapping],
    preset: str | None = None,
    task: str | None = None,
    provenance: Mapping | None = None,
    max_rows: int | None = None,
) -> dict:
    """What a report stores and prints about a known published model: its system and `comparison`.

    `task` is the result's task (None: a hard-positive result, as `hardpos eval` on REPLACE/SWAP);
    `provenance` the section's per-unit provenance (data identity and build record) and `max_rows` the
    run's row limit, which decide whether each delta is shown (`gate_deltas`).
    Empty when `model` (or `preset`) is no known system, or no row of ours has a published figure.
    """
    system = model_row(model, preset)
    if system is None:
        return {}
    compared = comparison(system, rows, benchmarks_of(dataset, rows, task, provenance))
    if not compared:
        return {}
    compared = gate_deltas(compared, rows, provenance or {}, max_rows)
    return {"model_row": system, "units": "published: as printed (percent, or cosine for mean scores); delta: "
            "ours - published (percentage points, or cosine), only where ours was measured on the paper's "
            "benchmark (else `differs` says what differs)", "rows": compared}  # fmt: skip
