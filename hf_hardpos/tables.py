"""The one text/markdown table renderer behind every table the package prints or writes.

The evaluation report, the demo report and the model card all show the same kind of table; one
renderer keeps their layout (and the statement of how each figure was aggregated) consistent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .metrics import METRIC_NAMES
from .text_escaping import markdown_cell

SCORE_NAMES = ("mean_original_score", "mean_negative_score", "mean_positive_score")

# How every rate in these tables was obtained; printed under each one (docs/metrics.md).
TIE_RULE = "strict inequalities: a tie is never correct and never brittle"


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, markdown: bool = False) -> str:
    """Plain text (first column left-aligned, the rest right-aligned) or a GitHub markdown table."""
    if markdown:
        align = ["---", *("---:" for _ in header[1:])]
        lines = ["| " + " | ".join(map(markdown_cell, header)) + " |", "|" + "|".join(align) + "|"]
        return "\n".join(lines + ["| " + " | ".join(map(markdown_cell, r)) + " |" for r in rows])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "-" * len(line(header)), *(line(r) for r in rows)])


def metrics_table(results: Mapping[str, Mapping], *, label: str = "config", markdown: bool = False) -> str:
    """The paper's Table-1 layout: rows, orig/aug accuracy and brittleness (percent), mean scores (cosine).

    A cell whose metric is absent (e.g. a set without hard positives) is left empty; a rate with a
    bootstrap interval shows it as `value [low, high]`.
    """
    return render_table(*metrics_cells(results, label=label), markdown=markdown)


def metrics_cells(
    results: Mapping[str, Mapping], *, label: str = "config"
) -> tuple[list[str], list[list[str]]]:
    """The header and cell texts of `metrics_table`, for renderers of other formats (the HTML report)."""
    header = [label, "rows", "orig acc %", "aug acc %", "brittle %", "s_c", "s_n", "s_p"]
    rows = []
    for name, m in results.items():
        rates = [_rate(m, k) for k in METRIC_NAMES]
        scores = [f"{m[k]:.4f}" if k in m else "" for k in SCORE_NAMES]
        rows.append([name, str(m.get("num_examples", "")), *rates, *scores])
    return header, rows


def _rate(metrics: Mapping, name: str) -> str:
    if name not in metrics:
        return ""
    cell = f"{100 * metrics[name]:.1f}"
    if f"{name}_ci_low" in metrics:
        cell += f" [{100 * metrics[f'{name}_ci_low']:.1f}, {100 * metrics[f'{name}_ci_high']:.1f}]"
    return cell


def published_table(published: Mapping, *, markdown: bool = False) -> str:
    """A paper's rows beside ours (`hf_hardpos.evaluation.published_rows.beside_ours`): the printed figure and ours minus it.

    `paper: <row>` holds the published figures, `ours - paper: <row>` our difference (percentage points
    for rates, cosine for mean scores) where ours was measured on the paper's benchmark; the sources
    (paper, table) follow on one line, then why a row has no difference and any printed slip. Hard-positive rows
    keep `metrics_table`'s columns; other tasks' rows (accuracy, ARO's macro accuracy) get one column per
    metric, in percent.
    """
    if not published:
        return ""
    rows: dict[str, dict] = {}
    notes: list[str] = []
    for row, entry in published["rows"].items():
        units = entry.get("units", {})  # absent in older metrics.json: every figure was a percentage
        shown = [(f"paper: {row}", entry["published"])]
        if "delta" in entry:  # only where ours was measured on the paper's benchmark
            shown.append((f"ours - paper: {row}", entry["delta"]))
        else:
            notes.append(f"{row}: no difference shown: {entry.get('differs', 'not the paper data')}")
        notes.extend(f"slip: {line}" for line in entry.get("slips", ()))
        for label, values in shown:
            rows[label] = {k: v if units.get(k) == "cosine" else v / 100 for k, v in values.items()}
    sources = sorted({s for entry in published["rows"].values() for s in entry["sources"]})
    label = f"published: {published['model_row']}"
    metrics = list(dict.fromkeys(k for m in rows.values() for k in m))
    if set(metrics) <= {*METRIC_NAMES, *SCORE_NAMES}:
        table = metrics_table(rows, label=label, markdown=markdown)
    else:
        body = [[name, *(f"{100 * m[k]:.1f}" if k in m else "" for k in metrics)] for name, m in rows.items()]
        table = render_table([label, *(f"{k} %" for k in metrics)], body, markdown=markdown)
    lines = [
        table,
        f"published rows: {'; '.join(sources)}; ours - paper in percentage points (cosine for mean scores)",
        *dict.fromkeys(notes),
    ]
    return "\n".join(lines)
