"""The report's first screen: per benchmark, the run's rates with intervals and chance, its difference to each
baseline run with the paired test, the worst subset and the worst replacement type.

A rate alone does not say whether a model is brittle: a reader needs chance (paper Sec. 3: 1/2 for original
accuracy, 1/3 for augmented accuracy and brittleness), an interval, and a reference model scored on the
same rows. The difference to a baseline comes from `compare.compare_runs` (the same paired bootstrap over
images and McNemar test as `hardpos compare`, and the same refusal when the two runs did not score the same
rows under the same protocol, said here in words instead of refused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import UserInputError
from ..metrics import METRIC_NAMES
from .benchmark import Benchmark, Figure
from .breakdown import Group
from .charts import CHANCE
from .compare import Cell, compare_runs, run_labels
from .runs import Run

HEADLINE_ORDER = ("brittleness", "augmented_accuracy", "original_accuracy")
NAMES = {
    "original_accuracy": "original accuracy",
    "augmented_accuracy": "augmented accuracy",
    "brittleness": "brittleness",
}
BETTER = {"original_accuracy": "higher", "augmented_accuracy": "higher", "brittleness": "lower"}


@dataclass
class BaselineDelta:
    """One baseline's figure and the run's paired difference to it (None, with `why`, when not comparable)."""

    label: str
    metrics: dict
    bench: Benchmark
    row: str  # the baseline's figure row (its metrics.json row), for intervals computed by the page
    cells: dict[str, Cell] = field(default_factory=dict)
    why: list[str] = field(default_factory=list)


def percent(value: float | None, signed: bool = False) -> str:
    if value is None:
        return ""
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def interval(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{100 * low:.1f}, {100 * high:.1f}]"


def rate_text(metrics: Mapping, name: str) -> str:
    """`16.3 % [13.5, 19.2]` (the interval only when known)."""
    if name not in metrics:
        return "not measured"
    bounds = interval(metrics.get(f"{name}_ci_low"), metrics.get(f"{name}_ci_high"))
    return f"{percent(metrics[name])} %" + (f" {bounds}" if bounds else "")


def delta_text(cell: Cell) -> str:
    """`-2.1 pp [-3.5, -0.8], significant; McNemar p = 0.012`."""
    text = f"{percent(cell.value, signed=True)} pp {interval(cell.ci_low, cell.ci_high)}"
    text += ", interval excludes 0" if cell.excludes_zero else ", interval includes 0"
    if cell.p_value is not None:
        text += f"; McNemar p = {cell.p_value:.3g}"
    return text


def baseline_deltas(
    run: Run, baselines: Sequence[Run], resamples: int
) -> tuple[dict[str, list[BaselineDelta]], list[str]]:
    """Per figure label of `run`: each baseline's figure and the paired difference run - baseline; and the
    caption lines (labels, test method)."""
    found: dict[str, list[BaselineDelta]] = {}
    captions = []
    for baseline in baselines:
        base_label, run_label = run_labels([baseline, run])
        captions.append(f"baseline {base_label}: {baseline.kind} run in {baseline.folder}")
        try:
            comparison = compare_runs([baseline, run], allow_mismatch=True, resamples=resamples)
        except UserInputError as err:
            captions.append(f"baseline {base_label} not compared: {err}")
            continue
        figures = {
            fig.label: (bench, fig) for bench in baseline.benchmarks.values() for fig in bench.figures()
        }
        diff_row = comparison.rows[2]
        for group in comparison.groups:
            if group not in figures:
                continue
            why = [note.split(": ", 1)[1] for note in diff_row.notes if note.startswith(f"{group}: ")]
            bench, fig = figures[group]
            found.setdefault(group, []).append(
                BaselineDelta(
                    base_label, dict(fig.metrics), bench, fig.row, diff_row.cells.get(group, {}), why
                )
            )
        captions.extend(
            c.replace("B - A", "this run - baseline")
            for c in comparison.captions
            if c.startswith("paired differences")
        )
    return found, captions


@dataclass
class Headline:
    """What the headline box of one benchmark figure says (rendered by the template)."""

    anchor: str
    title: str
    rows: str  # the row count, with thousands separators
    lead: str
    table_header: list[str]
    table_rows: list[list[str]]
    notes: list[str]
    clause: str = ""  # this figure's part of the page's one-sentence headline (`headline_sentence`)


def headline_clause(title: str, metrics: Mapping, deltas: Sequence[BaselineDelta]) -> str:
    """`REPLACE brittleness 24.7 %, 17.5 points lower than hn's 42.2 % (paired 95% interval [-21.7, -13.4])`:
    brittleness against the first baseline when one was compared on the same rows, else with chance and
    augmented accuracy (the two rates that say whether a model is oversensitive)."""
    text = f"{title} brittleness {rate_text(metrics, 'brittleness')}"
    compared = next((d for d in deltas if (c := d.cells.get("brittleness")) and c.value is not None), None)
    if compared is None:
        return (
            text + f" (chance {100 * CHANCE['brittleness']:.1f} %), augmented accuracy "
            f"{rate_text(metrics, 'augmented_accuracy')} (chance {100 * CHANCE['augmented_accuracy']:.1f} %)"
        )
    cell = compared.cells["brittleness"]
    direction = "lower" if cell.value < 0 else "higher"
    clear = "" if cell.excludes_zero else ", an interval that includes 0"
    return (
        text + f", {abs(100 * cell.value):.1f} points {direction} than {compared.label}'s "
        f"{percent(compared.metrics.get('brittleness'))} % (paired 95% interval "
        f"{interval(cell.ci_low, cell.ci_high)}{clear})"
    )


def headline_sentence(label: str, boxes: Sequence[Headline]) -> str:
    """The page's result in one sentence: the run's label, then each hard-positive figure's clause."""
    clauses = [box.clause for box in boxes if box.clause]
    return f"{label}: {'; '.join(clauses)}." if clauses else ""


def headline(
    anchor: str,
    bench: Benchmark,
    fig: Figure,
    metrics: Mapping,
    deltas: Sequence[BaselineDelta],
    worst_type: Group | None,
    type_note: str,
) -> Headline:
    """The box for one figure: a lead sentence, one row per rate, and the worst subset / replacement type."""
    lead = "; ".join(
        f"{NAMES[m]} {rate_text(metrics, m)} (chance {100 * CHANCE[m]:.1f} %)" for m in HEADLINE_ORDER[:2]
    )
    header = ["rate", "this run", "chance", "better"]
    for delta in deltas:
        header += [delta.label, f"this run - {delta.label} (pp, 95% paired interval; test)"]
    body = []
    for m in HEADLINE_ORDER:
        row = [NAMES[m], rate_text(metrics, m), f"{100 * CHANCE[m]:.1f} %", BETTER[m]]
        for delta in deltas:
            cell = delta.cells.get(m)
            row += [
                rate_text(delta.metrics, m),
                delta_text(cell)
                if cell and cell.value is not None
                else "not compared: " + ("; ".join(delta.why) or "no paired rows"),
            ]
        body.append(row)
    notes = []
    subsets = {c: r for c, r in bench.results.items() if "brittleness" in r}
    if len(subsets) > 1:
        name, worst = max(subsets.items(), key=lambda item: item[1]["brittleness"])
        notes.append(
            f"worst subset: {name}, brittleness {rate_text(worst, 'brittleness')} "
            f"({worst.get('num_examples', '?')} rows)"
        )
    if worst_type is not None:
        notes.append(
            f"worst replacement type: {worst_type.type}, brittleness {percent(worst_type.brittleness)} % "
            f"{interval(*worst_type.brittleness_interval)} ({worst_type.rows} rows; Wilson interval)"
        )
    elif type_note:
        notes.append(f"worst replacement type: {type_note}")
    title = bench.display_name() if fig.label == bench.display_name() else fig.label
    return Headline(
        anchor,
        title,
        f"{int(metrics.get('num_examples', 0)):,}",
        lead,
        header,
        body,
        notes,
        headline_clause(title, metrics, deltas),
    )


def baseline_rates(run_metrics: Mapping, deltas: Sequence[BaselineDelta], run_label: str) -> dict[str, dict]:
    """The figure of the run and of each baseline, for the side-by-side bar chart."""
    rows = {run_label: dict(run_metrics)}
    for delta in deltas:
        if all(m in delta.metrics for m in METRIC_NAMES):
            rows[delta.label] = delta.metrics
    return rows
