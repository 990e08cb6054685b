"""`Section`: one benchmark's result for one model, the one type every output renders from.

Why one type: a suite's `metrics.json`, its printed tables, the trainer's logged metrics, the model
card's `model-index` and `hardpos report` all show the same numbers. Each used to build or read its own
untyped dict, so a key renamed in one place went missing in another. A `Section` holds:

- `results`: one row per config or subset (or `all` for a set scored as one table), metric -> value;
- `aggregates`: rows computed from several results (REPLACE's pooled column, SugarCrepe's categories);
- `tie_rule` and `aggregation`: how each number was obtained, in words, printed under every table;
- `provenance` (resume key, data identity), `published` (a paper row beside ours), `step` (training);
- or `error` (and `traceback` for a bug) when the benchmark failed, so the others still report.

`to_dict` / `from_dict` are the `metrics.json` form (JSON-safe); `table` is the printed form;
`flat_metrics` the names the `Trainer` logs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

from ..metrics import METRIC_NAMES, wilson_interval
from ..tables import metrics_table, published_table, render_table
from .intervals import count_rate_bounds
from .intervals import method as interval_method

HARD_POSITIVE = "hard_positive"  # the task whose rows are Original/Augmented Accuracy and Brittleness
# The file in each training checkpoint holding the latest section of every eval set (`to_dict` form,
# plus the step), written by `training.checkpointing` and read back by `reporting`.
EVAL_SECTIONS_NAME = "hardpos_eval_sections.json"

# Keys written only when set: older metrics.json files without them read back unchanged.
_OPTIONAL = ("provenance", "published", "step", "error", "traceback")


@dataclass
class Section:
    """One benchmark's result (see the module docstring)."""

    task: str | None
    source: str = ""
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    aggregates: dict[str, dict[str, Any]] = field(default_factory=dict)
    tie_rule: str = ""
    aggregation: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    published: dict[str, Any] = field(default_factory=dict)
    step: int | None = None
    error: str | None = None
    traceback: list[str] | None = None
    # Per-row scores of the rows whose task keeps them (`Task.row_scores`): saved beside `metrics.json`
    # as `scores-<row>.parquet` by the runner, never part of `to_dict`.
    row_scores: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def failed(self) -> bool:
        return self.error is not None

    def rows(self) -> dict[str, dict[str, Any]]:
        """Results then aggregates, one mapping (the rows a table and the logged names show)."""
        return {**self.results, **self.aggregates}

    def to_dict(self) -> dict[str, Any]:
        """The `metrics.json` form: a failed section keeps only what says why."""
        data: dict[str, Any] = {"task": self.task, "source": self.source}
        if not self.failed:
            data.update(results=self.results, aggregates=self.aggregates, tie_rule=self.tie_rule,
                        aggregation=self.aggregation)
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value not in (None, {}) or (name == "published" and not self.failed):  # {}: no paper prints it
                data[name] = value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Section:
        """A section read back from `metrics.json` (or `result.json`); unknown keys are refused."""
        known = set(cls.__dataclass_fields__) - {"row_scores"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"not a result section: unknown key(s) {unknown}")
        return cls(**data)

    @property
    def carries_rates(self) -> bool:
        """Whether every row holds Original/Augmented Accuracy and Brittleness (Kamath et al.'s Table 1
        layout): told from the rows, not from the task, so any task that reports those rates is laid out alike."""
        rows = self.rows()
        return bool(rows) and all(name in row for row in rows.values() for name in METRIC_NAMES)

    def table(self) -> str:
        """The results as a table, with the tie rule and aggregation underneath."""
        rows = self.rows()
        if self.carries_rates:
            text = metrics_table(rows)
            extra = {k: v for k, v in rows.items() if "text_only_accuracy" in v}
            if extra:
                text += "\ntext-only (TOT) accuracy % [95% Wilson]: " + ", ".join(
                    f"{k} {100 * v['text_only_accuracy']:.1f}" + _percent_bounds(v, "text_only_accuracy")
                    for k, v in extra.items())
        else:
            names = [k for k in dict.fromkeys(k for m in rows.values() for k in m) if k == "num_candidates" or not
                     isinstance(next((m[k] for m in rows.values() if k in m), None), (dict, list, str))]
            bounds = count_rate_bounds(self.results, self.aggregates)
            text = render_table(["subset", *names], [[row, *(_cell(m.get(k, ""), bounds.get(row, {}).get(k)) for k in names)]
                                                     for row, m in rows.items()])
            if bounds:
                text += f"\nintervals: [low, high] = {interval_method(0, False)}; mean(...) rows: the mean of their " \
                        "subsets' bounds"
        if self.published:  # a known published model: the paper's rows and ours minus them
            text += "\n" + published_table(self.published)
        return text + f"\ntie rule: {self.tie_rule}\naggregation: {self.aggregation}"

    def block(self, name: str) -> str:
        """The section under a heading naming the benchmark, its task and source (or its error)."""
        heading = f"== {name} ({self.task}; {self.source}) ==\n"
        return heading + (f"FAILED: {self.error}" if self.failed else self.table())

    def unnamed_row(self) -> str | None:
        """The row logged without its name: the only result row, if there is one only (its aggregates,
        e.g. SugarCrepe's category mean over that one subset, keep their names)."""
        return next(iter(self.results)) if len(self.results) == 1 else None

    def flat_metrics(self, set_name: str, prefix: str = "eval") -> dict[str, float | int]:
        """`{prefix}_<set>[_<row>]_<metric>` -> number, for every numeric metric of every row.

        Set and row names are slugged (`slug`); only numbers are logged, counts as ints and everything
        else as Python floats. Two rows that would log under one name are an error, never an overwrite.
        """
        unnamed = self.unnamed_row()
        flat: dict[str, float | int] = {}
        origin: dict[str, str] = {}
        for row, metrics in self.rows().items():
            stem = metric_stem(prefix, set_name, row, unnamed)
            for metric, value in metrics.items():
                if isinstance(value, bool) or not isinstance(value, Real) or "_ci_" in metric:
                    continue  # descriptions (e.g. ARO's macro protocol), ranges and intervals are for tables, not the log
                key = f"{stem}_{metric}"
                if key in flat:
                    raise ValueError(f"eval set {set_name!r}: rows {origin[key]!r} and {row!r} would both log {key!r}")
                flat[key] = int(value) if isinstance(value, Integral) else float(value)
                origin[key] = row
        return flat


def slug(name: str) -> str:
    """A set or row name as it appears in a logged metric name: runs of characters other than letters,
    digits and `_ . @ -` become one `_` (`pooled(attributes,relations)` -> `pooled_attributes_relations`)."""
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", str(name)).strip("_")


def metric_stem(prefix: str, set_name: str, row: str, unnamed: str | None) -> str:
    """`{prefix}_<set>[_<row>]`, the start of every logged metric name of one row (the row left out when
    it is the set's only, unnamed one): what `flat_metrics` logs, and what readers of a log look up."""
    return f"{prefix}_{slug(set_name)}" + ("" if row == unnamed else f"_{slug(row)}")


def _percent_bounds(row: dict[str, Any], rate: str) -> str:
    """` [low, high]` in percent: the Wilson interval of a rate that counts `num_examples` rows ("" without it)."""
    rows = row.get("num_examples")
    if not isinstance(rows, int) or rows < 1:
        return ""
    low, high = wilson_interval(round(row[rate] * rows), rows)
    return f" [{100 * low:.1f}, {100 * high:.1f}]"


def _cell(value: Any, bounds: tuple[float, float] | None = None) -> str:
    if not isinstance(value, float):
        return str(value)
    return f"{value:.4f}" + (f" [{bounds[0]:.4f}, {bounds[1]:.4f}]" if bounds else "")
