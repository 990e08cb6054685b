"""One checkpoint converted with each activation (GELU / QuickGELU), side by side with differences."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .report import EvaluationReport


def _is_difference_key(name: str, value: Any) -> bool:
    """Rates and mean scores are differenced; counts and interval bounds are not (the difference of two
    interval ends is no interval of the difference)."""
    return isinstance(value, float) and not name.startswith("num_") and "_ci_" not in name


def rows_by_activation(rows: Mapping[str, Mapping[str, Mapping]]) -> dict[str, dict]:
    """Interleave the rows of one model converted with each activation, for one side-by-side table.

    `rows` maps activation -> row name -> metrics. Each row appears as `name [activation]`, then
    `name [other - first]`: the difference of every rate and mean score from the first activation's,
    on the same data (same rows, same images), so the table shows how much the GELU/QuickGELU choice
    alone moves each number.
    """
    activations = list(rows)
    first = activations[0]
    names = list(dict.fromkeys(name for per_activation in rows.values() for name in per_activation))
    combined: dict[str, dict] = {}
    for name in names:
        for activation in activations:
            if name in rows[activation]:
                combined[f"{name} [{activation}]"] = dict(rows[activation][name])
        base = rows[first].get(name)
        for activation in activations[1:]:
            other = rows[activation].get(name)
            if base is None or other is None:
                continue
            combined[f"{name} [{activation} - {first}]"] = {
                k: other[k] - v
                for k, v in base.items()
                if _is_difference_key(k, v) and _is_difference_key(k, other.get(k))
            }
    return combined


def difference_rule(
    activations: Sequence[str], units: str = "rates in percentage points, mean scores in cosine"
) -> str:
    """The line printed under a side-by-side table, saying what its difference rows are."""
    first = activations[0]
    others = ", ".join(f"[{a} - {first}]" for a in activations[1:])
    return (
        f"{others} rows: {', '.join(activations[1:])} minus {first}, row by row on the same data ({units}); "
        "the same checkpoint, converted once per activation"
    )


def activation_comparison_table(reports: Mapping[str, EvaluationReport]) -> str:
    """One table for `hardpos eval --dataset D --activation both`: each row per activation and their difference.

    `reports` maps activation -> the report of the checkpoint converted with it. The dataset keeps its task's
    table layout (`Section.table`), with rows labelled `name [activation]` and `name [other - first]`; the
    lines under the table say how each figure was obtained, with one model line per activation (same
    checkpoint sha256, different `hidden_act`).
    """
    first = next(iter(reports.values()))
    merged = dataclasses.replace(
        first.section,
        published={},
        results=rows_by_activation({activation: r.results for activation, r in reports.items()}),
        aggregates=rows_by_activation({activation: r.aggregates for activation, r in reports.items()}),
    )
    lines = [
        merged.table(),
        difference_rule(list(reports)),
        *first.settings_lines(),
        *(f"model [{activation}]: {r.model_line()}" for activation, r in reports.items()),
        *first.data_lines(),
    ]
    return "\n".join(lines)
