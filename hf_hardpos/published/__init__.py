"""Published figures of the two papers this package reproduces, with their source (paper, table).

Kamath et al., ECCV 2024 ("The Hard Positive Truth about Vision-Language Compositionality", Tables 1,
2, 3, 9, 10, and the rows of Tables 7 and 8 this package carries) and Zhang, Awal, Agrawal, CVPR 2024
(CE-CLIP, Tables 1, 2, 3, 5). Every printed row of those tables is here, including rows of models the
package cannot download (they still serve `hardpos compare --paper ROW` and the reports) and Kamath et
al.'s Random Chance and Human Estimate rows (Tables 1 and 3); not carried: the red drop figures of
Tables 1 and 3 (aug - orig of the printed cells), CE-CLIP Table 1's Random Chance row and its
subscript gains other than Table 5's, none of which were transcribed for this package.

The figures are data, not code: ``figures.yaml`` beside this module holds each table as printed (its
header says how), and a benchmark with a folder of its own keeps its paper's tables in its folder
(`benchmark_registry.Benchmark.figures`, same format), with its column of a table printed here
(`columns`). This module reads them once and hands out flat records, tables in the papers' order
(Kamath et al.'s, then CE-CLIP's, each by table number) whatever file holds them:

    >>> from hf_hardpos.published import all_figures
    >>> f = next(f for f in all_figures() if f.table == "Table 1" and f.row == "NegCLIP")
    >>> (f.paper, f.row, f.benchmark, f.metric, f.column, f.value)   # doctest: +SKIP

Which published row a run is: `model_row` maps a Hub id or a `hardpos zoo` preset to the row's
`model` key (`weights.HUB_ROWS`, `weights.PRESET_ROWS`), never a local folder's name. Which of our
result rows a figure stands beside is each evaluation task's to say (`evaluation.tasks.Task.published_benchmark`;
`evaluation.published_rows.beside_ours` puts the two together through `comparison`); zero-shot retention
is laid out by `evaluation.retention_table`. Printed figures that contradict the paper's own other cells are
listed in `slips()`, kept as printed, and flagged wherever shown (`slip_note`). A difference to a printed
figure is shown only on the paper's own data (`evaluation.paper_data`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import yaml

from ..benchmark_registry import data_files

PERCENT = "percent"
COSINE = "cosine"
UNITS = (PERCENT, COSINE)


@dataclass(frozen=True)
class PublishedFigure:
    """One number as printed in a paper's table.

    `row` is the printed row name, `column` the printed column heading; `model` the system the row is
    (shared by a system's rows across tables and papers: `model_row` returns it), `benchmark` and
    `metric` the names a row of our results carries (e.g. ``"replace"`` / ``"brittleness"``,
    ``"valse/avg"`` / ``"accuracy"``). `value` is as printed, in `unit` (percent for rates, cosine
    for mean scores); `source` names the paper and table.
    """

    paper: str  # e.g. "Kamath et al., ECCV 2024 (arXiv 2409.17958)"
    table: str  # e.g. "Table 1"
    row: str  # the printed row name, e.g. "Our HP+HN"
    model: str  # the system, e.g. "HP+HN (Kamath et al.)"
    benchmark: str
    metric: str
    column: str  # the printed column heading, e.g. "REPLACE brittle"
    value: float
    unit: str = PERCENT

    @property
    def source(self) -> str:
        """Paper and table, e.g. "Kamath et al., ECCV 2024 (arXiv 2409.17958), Table 1"."""
        return f"{self.paper}, {self.table}"


@dataclass(frozen=True)
class Slip:
    """A printed figure that the paper's own rule does not give from its other printed cells (kept as printed)."""

    paper: str
    table: str
    row: str
    column: str
    printed: float
    derived: float  # what the rule gives from the printed cells (two decimals)
    why: str


_READ: dict[tuple[str, ...], tuple[tuple[PublishedFigure, ...], tuple[Slip, ...]]] = {}


def figure_files() -> tuple:
    """The files the figures are read from: the package's `figures.yaml`, then each registered benchmark's
    (`benchmark_registry.Benchmark.figures`), in registration order."""
    return (resources.files(__package__).joinpath("figures.yaml"), *data_files("figures"))


def _load() -> tuple[tuple[PublishedFigure, ...], tuple[Slip, ...]]:
    """Every figures file as records (read again when a benchmark with figures registers)."""
    sources = figure_files()
    key = tuple(map(str, sources))
    if key not in _READ:
        _READ.clear()
        _READ[key] = _read(sources)
    return _READ[key]


def _table_order(papers: Mapping[str, str]):
    """Tables in the order of their papers' first naming (the package's file names Kamath et al. first,
    then CE-CLIP), then by table number: whichever file prints a table, `all_figures` and `lookup` see the
    papers' order (a figure printed twice is looked up in the lower-numbered table)."""
    rank = {key: index for index, key in enumerate(papers)}
    return lambda entry: (rank[entry["paper"]], int(re.sub(r"\D", "", entry["table"]) or 0))


def _add_column(source: object, tables: list[dict], extra: Mapping) -> None:
    """A benchmark's column of a table printed in another file (its `columns` entries): inserted after the
    column it names, one value per printed row of that table, and its printed gain where the table has gains."""
    where = f"{source} {extra['paper']} {extra['table']} column {extra['column'][0]!r}"
    entry = next((t for t in tables if (t["paper"], t["table"]) == (extra["paper"], extra["table"])), None)
    if entry is None:
        raise ValueError(f"{where}: no such table in any figures file")
    headings = [column[0] for column in entry["columns"]]
    if extra["after"] not in headings:
        raise ValueError(f"{where}: the table has no column {extra['after']!r}")
    if set(extra["rows"]) != {row[0] for row in entry["rows"]}:
        raise ValueError(
            f"{where}: rows {sorted(extra['rows'])} are not the table's {[r[0] for r in entry['rows']]}"
        )
    if ("gains" in entry) != ("gain" in extra):
        raise ValueError(f"{where}: a gain is given exactly when the table prints gains")
    at = headings.index(extra["after"]) + 1
    entry["columns"] = [*entry["columns"][:at], extra["column"], *entry["columns"][at:]]
    entry["rows"] = [
        [name, *values[:at], extra["rows"][name], *values[at:]] for name, *values in entry["rows"]
    ]
    if "gains" in entry:
        values = entry["gains"]["values"]
        entry["gains"] = {**entry["gains"], "values": [*values[:at], extra["gain"], *values[at:]]}


def _read(sources: Sequence) -> tuple[tuple[PublishedFigure, ...], tuple[Slip, ...]]:
    """The figures files as records, checked: every row has one value per column, units and papers are
    known, a paper's key means one citation in every file."""
    papers: dict[str, str] = {}
    tables: list[dict] = []
    added: list[tuple[object, Mapping]] = []
    slip_entries: list[dict] = []
    for source in sources:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
        for key, citation in data.get("papers", {}).items():
            if papers.setdefault(key, citation) != citation:
                raise ValueError(f"{source}: paper {key!r} is cited otherwise in another figures file")
        for entry in [*data.get("tables", ()), *data.get("columns", ()), *data.get("slips", ())]:
            if entry["paper"] not in papers:
                raise ValueError(f"{source} {entry.get('table')}: unknown paper {entry['paper']!r}")
        tables.extend(dict(entry, source=source) for entry in data.get("tables", ()))
        added.extend((source, extra) for extra in data.get("columns", ()))
        slip_entries.extend(data.get("slips", ()))
    for source, extra in added:
        _add_column(source, tables, extra)
    order = _table_order(papers)
    figures: list[PublishedFigure] = []
    for entry in sorted(tables, key=order):
        paper, table, unit = papers[entry["paper"]], entry["table"], entry.get("unit", PERCENT)
        where = f"{entry['source']} {entry['paper']} {table}"
        if unit not in UNITS:
            raise ValueError(f"{where}: unknown unit {unit!r}")
        models = entry.get("models", {})
        for printed_row, *values in entry["rows"]:
            if len(values) != len(entry["columns"]):
                raise ValueError(f"{where} row {printed_row!r}: {len(values)} values for {len(entry['columns'])} "
                                 "columns")  # fmt: skip
            for (column, benchmark, metric), value in zip(entry["columns"], values):
                if value is not None:  # "-": not reported
                    figures.append(PublishedFigure(paper, table, printed_row, models.get(printed_row, printed_row),
                                                   benchmark, metric, column, float(value), unit))  # fmt: skip
        gains = entry.get("gains")
        if gains:  # printed "(+x)" beside a row: that row minus another, in percentage points
            row = gains["row"]
            for (column, benchmark, metric), value in zip(entry["columns"], gains["values"]):
                figures.append(PublishedFigure(paper, table, row, models.get(row, row), benchmark,
                                               f"{metric} gain over {gains['over']}", f"{column} gain",
                                               float(value), unit))  # fmt: skip
    slips = tuple(Slip(**{**s, "paper": papers[s["paper"]]}) for s in sorted(slip_entries, key=order))
    return tuple(figures), slips


def all_figures() -> list[PublishedFigure]:
    """Every printed figure of every table, one record each, in the order of the papers' tables and rows.

    Each record has `paper`, `table`, `row` (as printed), `model` (the system), `benchmark`, `metric`,
    `column` (as printed), `value` (as printed) and `unit`; `source` is "<paper>, <table>".
    """
    return list(_load()[0])


def slips() -> list[Slip]:
    """The printed figures that do not follow from the paper's other cells (see `Slip`)."""
    return list(_load()[1])


def slip_for(figure: PublishedFigure) -> Slip | None:
    """The recorded slip of a printed figure (`slips`), or None when its value follows from the paper's cells."""
    return next(
        (
            s
            for s in _load()[1]
            if (s.paper, s.table, s.row, s.column) == (figure.paper, figure.table, figure.row, figure.column)
        ),
        None,
    )


def slip_note(figure: PublishedFigure) -> str | None:
    """One line flagging a slip wherever `figure` is shown: the printed value, the package's recomputation
    from the paper's other cells, and the recorded explanation; None when the figure is no slip."""
    slip = slip_for(figure)
    if slip is None:
        return None
    return (
        f"{figure.source} {slip.row} {slip.column}: printed {slip.printed:g}, the paper's own rule gives "
        f"{slip.derived:g} ({slip.why})"
    )


def table_rows(paper: str, table: str) -> dict[str, dict[str, float]]:
    """One printed table as {printed row: {printed column: value}} (columns the paper left "-" absent).

    `paper` is the citation or a part of it ("Kamath et al.", "Zhang": CE-CLIP's citation names its
    authors, not the model); the printed gains of CE-CLIP's Table 5 appear as columns "<column> gain".
    Raises KeyError when no figure of that table exists.
    """
    rows: dict[str, dict[str, float]] = {}
    for f in _load()[0]:
        if paper in f.paper and f.table == table:
            rows.setdefault(f.row, {})[f.column] = f.value
    if not rows:
        raise KeyError(f"no published table {table!r} of a paper matching {paper!r}")
    return rows


def lookup(model: str, benchmark: str, metric: str) -> PublishedFigure | None:
    """The figure printed for system `model` on `benchmark` / `metric`, or None if none is printed.

    A figure printed in several tables (Kamath et al. repeat Table 1's rows in Table 3; CE-CLIP's
    Table 5 repeats Tables 1-2) is returned from the first table that prints it, in `all_figures`' order.
    """
    return next(
        (f for f in _load()[0] if (f.model, f.benchmark, f.metric) == (model, benchmark, metric)), None
    )


def systems() -> list[str]:
    """Every system with a printed figure, in order of first appearance."""
    return list(dict.fromkeys(f.model for f in _load()[0]))


def find_model(name: str) -> str | None:
    """The system a user's name for a printed row means: a `model` key or a printed row name
    (case-insensitive), e.g. "negclip", "Our HP+HN", "CE-CLIP"; None when nothing matches."""
    wanted = name.strip().casefold()
    for f in _load()[0]:
        if wanted in (f.model.casefold(), f.row.casefold()):
            return f.model
    return None


def model_row(model: str, preset: str | None = None) -> str | None:
    """The system whose weights `model` is: a `hardpos zoo` preset first, else a Hub id; None if unknown.

    A local folder is never matched by its name: only a preset or a Hub id says which weights it holds.
    """
    from .weights import HUB_ROWS, PRESET_ROWS

    if preset is not None:
        return PRESET_ROWS.get(preset)
    return HUB_ROWS.get(str(model))


def comparison(model: str, rows: Mapping[str, Mapping], benchmarks: Mapping[str, str]) -> dict[str, dict]:
    """Published figures beside ours: per row of ours whose benchmark has figures for system `model`.

    `rows` maps our row names to metrics (rates as fractions, mean scores as cosines); `benchmarks`
    maps the same names to the paper's benchmark. Returns `{row: {"benchmark", "published": {metric:
    value as printed}, "delta": {metric: ours - published}, "units": {metric: unit}, "sources": [...]}}`:
    a percent figure's delta is in percentage points, a cosine figure's in cosine; deltas are rounded
    to 0.01 points (0.0001 cosine), the figures' own precision being 0.1 (0.001). A row with a printed
    figure listed in `slips` also gets `"slips"`: one `slip_note` line each. Whether a delta may be shown
    at all (the run's data are the paper's) is the caller's to decide (`evaluation.paper_data`).
    """
    compared: dict[str, dict] = {}
    order = {b: i for i, b in reversed(list(enumerate(f.benchmark for f in _load()[0])))}
    # In the paper's column order (CE-CLIP Table 1's nine VALSE columns, then its Avg, ...).
    for row, benchmark in sorted(benchmarks.items(), key=lambda item: order.get(item[1], len(order))):
        published, delta, units, sources, slipped = {}, {}, {}, [], []
        for metric, value in rows.get(row, {}).items():
            figure = lookup(model, benchmark, metric) if isinstance(value, float) else None
            if figure is None:
                continue
            published[metric] = figure.value
            units[metric] = figure.unit
            delta[metric] = (
                round(100 * value - figure.value, 2)
                if figure.unit == PERCENT
                else round(value - figure.value, 4)
            )
            sources.append(figure.source)
            if (note := slip_note(figure)) is not None:
                slipped.append(note)
        if published:
            compared[row] = {"benchmark": benchmark, "published": published, "delta": delta, "units": units,
                             "sources": sorted(set(sources))}  # fmt: skip
            if slipped:
                compared[row]["slips"] = slipped
    return compared
