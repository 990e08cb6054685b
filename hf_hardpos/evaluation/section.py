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
`flat_metrics` the names the `Trainer` logs. `from_dict` is the one reader of saved results (the
runner's resume, `hardpos report` / `compare`, the trainer's cards): it upgrades result layout 1 and
refuses, naming the field, what no run writes (a rate outside [0, 1], a negative or fractional count,
an interval that does not hold its value, NaN, a row or aggregation of the wrong shape), since a
hand-edited or damaged `metrics.json` would otherwise be shown, compared or resumed as a result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
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
WHOLE = "all"  # the one unit (and row) of a task that scores a dataset as a whole
# What a single-dataset `metrics.json` holds beside its section: the run's, not the result's.
RUN_KEYS = ("model", "dataset", "run")
# A row's metric that is a fraction of rows (stored in [0, 1]): the hard-positive rates, every
# accuracy (caption selection, TOT, ARO's macro), Winoground's scores, zero-shot acc@k and recall@k.
_RATE = re.compile(r"(accuracy|brittleness|(^|_)(text|image|group)_score|^acc\d+|recall(@\d+)?)$")
_BOUNDS = ("_ci_low", "_ci_high")


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
            data.update(
                results=self.results,
                aggregates=self.aggregates,
                tie_rule=self.tie_rule,
                aggregation=self.aggregation,
            )
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value not in (None, {}) or (name == "published" and not self.failed):  # {}: no paper prints it
                data[name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Section:
        """A section read back from `metrics.json` (a suite's dataset, a trainer's eval sections), layout 1
        upgraded (`upgrade`); unknown keys and values no run writes are refused (ValueError naming the field)."""
        if not isinstance(data, Mapping):
            _fail("(section)", "an object", data)
        data = upgrade(data)
        known = set(cls.__dataclass_fields__) - {"row_scores"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidSection(unknown[0], f"is not a field of a result section (unknown key(s) {unknown})")
        _check_section(data)
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
                    for k, v in extra.items()
                )
        else:
            names = [
                k
                for k in dict.fromkeys(k for m in rows.values() for k in m)
                if k == "num_candidates"
                or not isinstance(next((m[k] for m in rows.values() if k in m), None), (dict, list, str))
            ]
            bounds = count_rate_bounds(self.results, self.aggregates)
            text = render_table(
                ["subset", *names],
                [
                    [row, *(_cell(m.get(k, ""), bounds.get(row, {}).get(k)) for k in names)]
                    for row, m in rows.items()
                ],
            )
            if bounds:
                text += (
                    f"\nintervals: [low, high] = {interval_method(0, False)}; mean(...) rows: the mean of their "
                    "subsets' bounds"
                )
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
                    raise ValueError(
                        f"eval set {set_name!r}: rows {origin[key]!r} and {row!r} would both log {key!r}"
                    )
                flat[key] = int(value) if isinstance(value, Integral) else float(value)
                origin[key] = row
        return flat


def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
    """A saved section in the current layout. Result layout 1 kept a whole-dataset task's provenance as
    the unit's own (`{key, dataset}`, not `{unit: {key, dataset}}`), and a single eval (before results
    named their task: hard positives only) its tie rule under `metric_definitions` and its aggregation
    as one line per aggregate; layout 2 names the task, keeps both as text and provenance per unit."""
    data = dict(data)
    definitions = data.pop("metric_definitions", None)
    provenance = data.get("provenance")
    if isinstance(provenance, Mapping) and isinstance(provenance.get("key"), str):
        data["provenance"] = {WHOLE: dict(provenance)}
    if "task" in data:
        return data
    data["task"] = HARD_POSITIVE
    if isinstance(definitions, Mapping) and "tie_rule" not in data:
        data["tie_rule"] = definitions.get("tie_rule", "")
    if isinstance(data.get("aggregation"), Mapping):
        data["aggregation"] = "; ".join(str(line) for line in data["aggregation"].values())
    return data


class InvalidSection(ValueError):
    """A saved section holding what no run writes: `field` (dotted, from the section's top) and what it
    must be, so a reader names the file and the whole path to the field."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"field {field} {problem}")
        self.field, self.problem = field, problem


def _fail(where: str, expected: str, value: Any) -> None:
    shown = (
        repr(value)
        if not isinstance(value, (dict, list))
        else f"a JSON {'object' if isinstance(value, dict) else 'list'}"
    )
    raise InvalidSection(where, f"must be {expected}, got {shown[:60]}")


def _typed(
    where: str, value: Any, kind: type | tuple[type, ...], expected: str, optional: bool = False
) -> None:
    if (value is None and optional) or (isinstance(value, kind) and not isinstance(value, bool)):
        return
    _fail(where, expected, value)


def _count(where: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail(where, "a whole number >= 0", value)


def _check_section(data: Mapping[str, Any]) -> None:
    """What `from_dict` refuses (see the module docstring), the first problem named by its field."""
    _typed("task", data.get("task"), str, "a task name", optional=True)
    _typed("source", data.get("source", ""), str, "text")
    _typed("tie_rule", data.get("tie_rule", ""), str, "text")
    _typed("aggregation", data.get("aggregation", ""), str, "text")
    _typed("error", data.get("error"), str, "text", optional=True)
    _typed("step", data.get("step"), int, "a whole number", optional=True)
    _typed("traceback", data.get("traceback"), list, "a list of lines", optional=True)
    _typed("published", data.get("published", {}), dict, "an object")
    _typed("provenance", data.get("provenance", {}), dict, "an object")
    for unit, prov in data.get("provenance", {}).items():
        _typed(f"provenance.{unit}", prov, dict, "an object")
        _typed(f"provenance.{unit}.dataset", prov.get("dataset"), dict, "an object", optional=True)
        rows = prov.get("rows", [])
        if not isinstance(rows, list) or not all(isinstance(row, str) for row in rows):
            _fail(f"provenance.{unit}.rows", "a list of row names", rows)
    for part in ("results", "aggregates"):
        _typed(part, data.get(part, {}), dict, "an object")
        for name, row in data.get(part, {}).items():
            _typed(f"{part}.{name}", row, dict, "an object")
            _check_row(f"{part}.{name}", row, data.get("results", {}))
    _check_finite(data)


def _check_row(where: str, row: Mapping[str, Any], results: Mapping[str, Any]) -> None:
    """A row's rates are fractions in [0, 1] with the rows they count, its counts whole numbers >= 0 (or text
    for a range), its
    intervals hold their value, its aggregation says how it was computed over which configs."""
    for key, value in row.items():
        base = next((key[: -len(end)] for end in _BOUNDS if key.endswith(end)), key)
        if _RATE.search(base):
            _typed(f"{where}.{key}", value, Real, "a rate in [0, 1]")
            if not 0 <= value <= 1:
                _fail(f"{where}.{key}", "a rate in [0, 1]", value)
        elif key.startswith("num_") and not isinstance(value, str):  # text: a range ("2-3" candidates)
            _count(f"{where}.{key}", value)
    for rate in METRIC_NAMES:
        low, high = row.get(rate + _BOUNDS[0]), row.get(rate + _BOUNDS[1])
        if rate in row and low is not None and high is not None and not low <= row[rate] <= high:
            _fail(f"{where}.{rate}_ci_low/_ci_high", f"an interval holding {rate} {row[rate]!r}", [low, high])
    if any(rate in row for rate in METRIC_NAMES):  # the pooled column and every interval count its rows
        _count(f"{where}.num_examples", row.get("num_examples"))
    aggregation = row.get("aggregation")
    if isinstance(aggregation, Mapping):
        _typed(f"{where}.aggregation.method", aggregation.get("method"), str, "how the row was computed")
        _count(f"{where}.aggregation.rows", aggregation.get("rows"))
        configs = aggregation.get("configs")
        if not isinstance(configs, list) or not configs or not all(c in results for c in configs):
            _fail(f"{where}.aggregation.configs", "a list of this result's configs", configs)


def _check_finite(data: Any) -> None:
    """Every number finite (NaN and Infinity are valid to Python's json, never a result); walked without
    recursion, so no nesting depth is a traceback."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            _fail(where, "a finite number", value)
        elif isinstance(value, Mapping):
            stack.extend((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", item) for index, item in enumerate(value))


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
