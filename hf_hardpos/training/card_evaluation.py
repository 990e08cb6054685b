"""The model card's evaluation: the `model-index` entries (each benchmark under its Hub task type, its
rates only), the tables of the card body (one Table-1-style table of the hard-positive sets, every
other set's own table, each with its tie rule and aggregation), and where each set's rows came from.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

from huggingface_hub import EvalResult

from ..evaluation.section import Section
from ..evaluation.tasks import get_task
from ..tables import metrics_table, render_table
from ..text_escaping import markdown_text
from .card_data import HardPosModelCardData


def card_value(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    return str(value)


def row_label(set_name: str, row: str, unnamed: str | None) -> str:
    """A row as the card names it: the set alone for the row its logged names leave unnamed."""
    return set_name if row == unnamed else f"{set_name} / {row}"


def model_index_results(
    sections: dict[str, dict], eval_sets: dict, dataset_ids: dict[str, str]
) -> list[EvalResult]:
    """`model-index` entries: every rate of its task's `card_metrics` of every row of every set, with its task type.

    `dataset.type` is the set's Hub id when known, `dataset.split` the split read from a source. The Hub
    groups metrics by task, dataset type, config and split, so every row that its logged names name
    (configs, aggregates, Winoground tags) is given as `dataset.config` (and named `<set> / <row>`), and
    the unnamed row of a set of one config of a source has that config: two sets of one Hub id never merge.
    """
    results = []
    for set_name, saved in sections.items():
        section = Section.from_dict(saved)
        task = get_task(section.task)
        task_type, task_name = task.card_task
        eval_set = eval_sets[set_name]
        split = None if eval_set.in_memory else eval_set.split
        unnamed = section.unnamed_row()
        given_config = eval_set.configs[0] if eval_set.configs else None
        for row, metrics in section.rows().items():
            for metric in task.card_metrics:
                if _is_number(metrics.get(metric)):
                    results.append(
                        EvalResult(
                            task_type=task_type,
                            task_name=task_name,
                            dataset_type=dataset_ids.get(set_name, set_name),
                            dataset_name=row_label(set_name, row, unnamed),
                            dataset_config=given_config if row == unnamed else row,
                            dataset_split=split,
                            metric_type=metric,
                            metric_name=metric.replace("_", " "),
                            metric_value=float(
                                metrics[metric]
                            ),  # numpy scalars break the YAML (docs/reference.md, Installation notes)
                        )
                    )
    return results


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _cell(metric: str, value: Any, rates: tuple[str, ...]) -> str:
    if isinstance(value, float) and metric in rates:
        return f"{100 * value:.1f}"
    return card_value(value)


def section_table(section: Section) -> str:
    """One benchmark set as a markdown table: a row per config/aggregate, its rates in percent."""
    rows = section.rows()
    rates = get_task(section.task).card_metrics
    names = list(
        dict.fromkeys(k for m in rows.values() for k, v in m.items() if _is_number(v) or isinstance(v, str))
    )
    header = ["row", *(f"{n} %" if n in rates else n for n in names)]
    cells = [[row, *(_cell(n, m[n], rates) if n in m else "" for n in names)] for row, m in rows.items()]
    return render_table(header, cells, markdown=True)


def eval_card_sections(
    sections: dict[str, dict], eval_sets: dict, card_data: HardPosModelCardData
) -> dict[str, Any]:
    """What the template's Evaluation part shows: one Table-1-style table of the hard-positive sets, and
    every other set's own table, each with the tie rule and aggregation its numbers follow.

    `sections` are `trainer.eval_sections` of the sets in `eval_sets` (the trainer's resolved sets)."""
    typed = {n: Section.from_dict(s) for n, s in sections.items()}
    hard_positive = {n: s for n, s in typed.items() if s.carries_rates}
    table_rows = {}
    for set_name, section in hard_positive.items():
        unnamed = section.unnamed_row()
        table_rows.update({row_label(set_name, r, unnamed): m for r, m in section.rows().items()})
    others = []
    for set_name, section in typed.items():
        if section.carries_rates:
            continue
        others.append({
            "name": markdown_text(set_name),
            "task": get_task(section.task).card_task[1],
            "source": markdown_text(eval_set_description(set_name, eval_sets[set_name], card_data)),
            "step": section.step,
            "table": section_table(section),
            "tie_rule": section.tie_rule,
            "aggregation": section.aggregation,
        })  # fmt: skip
    return {
        "hard_positive_table": metrics_table(table_rows, label="eval set", markdown=True)
        if table_rows
        else "",
        "hard_positive_steps": sorted({s.step for s in hard_positive.values()}),
        "hard_positive_tie_rule": next((s.tie_rule for s in hard_positive.values()), ""),
        "hard_positive_aggregation": sorted({s.aggregation for s in hard_positive.values()}),
        "benchmark_sections": others,
        "measures_retention": any(get_task(s.task).retention for s in typed.values()),
    }


def dataset_description(
    dataset, dataset_id: str | None, description: str | None, columns_to_count: list[str], identity: str = ""
) -> str:
    if dataset_id:  # a Hub id or local path, with what else is known (e.g. a local folder's content hash)
        name = f"`{dataset_id}`{identity}" + (f" ({description})" if description else "")
    else:
        name = description or "an in-memory dataset"
    parts = [name, f"{len(dataset):,} rows"]
    table = getattr(dataset, "data", None)
    # Null counts straight from Arrow: O(1), valid when the dataset has no index mapping.
    if table is not None and getattr(table, "num_rows", None) == len(dataset):
        for column in columns_to_count:
            if column in dataset.column_names:
                present = len(dataset) - table.column(column).null_count
                parts.append(f"`{column}` present in {present:,}")
    return "; ".join(parts)


def eval_set_description(name: str, eval_set, card_data: HardPosModelCardData) -> str:
    """Where a set's rows come from (rows counted for an in-memory table), and any row cap."""
    if eval_set.in_memory:
        text = dataset_description(
            eval_set.source,
            card_data.eval_dataset_ids.get(name),
            card_data.eval_dataset_descriptions.get(name),
            [],
        )
    else:
        text = card_data.eval_dataset_descriptions.get(name) or eval_set.describe()
    if eval_set.max_rows is not None:
        text += f"; only its first {eval_set.max_rows:,} rows (per config) were evaluated"
    return text
