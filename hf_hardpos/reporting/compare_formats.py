"""The renderings of `hardpos compare`'s table: text (cut to a terminal's width), markdown, LaTeX, CSV, JSON.

Each shows the same `compare.Comparison`: rates and differences in percent in the tables (fractions, as
`metrics.json` holds them, in CSV and JSON), every name escaped for where it goes (`text_escaping`).
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from dataclasses import asdict
from typing import Any

from ..errors import UserInputError
from ..tables import render_table
from ..text_escaping import csv_cell, latex_text, markdown_text, terminal_text
from .compare import Cell, Comparison

FORMATS = ("text", "markdown", "latex", "csv", "json")
SHORT = {"original_accuracy": "orig", "augmented_accuracy": "aug", "brittleness": "brittle"}


def _number(cell: Cell, signed: bool) -> str:
    if cell.value is None:
        return ""
    text = f"{100 * cell.value:+.1f}" if signed else f"{100 * cell.value:.1f}"
    if cell.ci_low is not None and cell.ci_high is not None:
        text += f" [{100 * cell.ci_low:.1f}, {100 * cell.ci_high:.1f}]"
    if cell.excludes_zero:
        text += "*"
    if cell.p_value is not None:
        text += f" p={cell.p_value:.3g}"
    return text


def _header(comparison: Comparison) -> list[str]:
    return ["run", *(f"{g} {SHORT.get(m, m)}" for g, ms in comparison.groups.items() for m in ms)]


def _text_rows(comparison: Comparison) -> list[list[str]]:
    out = []
    for row in comparison.rows:
        cells = [row.label]
        for g, metrics in comparison.groups.items():
            for m in metrics:
                cell = row.cells.get(g, {}).get(m)
                cells.append(_number(cell, row.kind != "run" and row.kind != "published") if cell else "")
        out.append(cells)
    return out


def _column_blocks(header: list[str], rows: list[list[str]], width: int) -> list[list[int]]:
    """The metric columns packed, in order, into tables no wider than `width` (the run column repeated in each;
    a column wider than `width` on its own gets a table of its own)."""
    label = max(len(c) for c in [header[0], *(r[0] for r in rows)])
    blocks: list[list[int]] = []
    used = width + 1
    for i in range(1, len(header)):
        need = 2 + max(len(c) for c in [header[i], *(r[i] for r in rows)])
        if used + need > width:
            blocks.append([])
            used = label
        blocks[-1].append(i)
        used += need
    return blocks


def to_text(comparison: Comparison, markdown: bool = False, width: int | None = None) -> str:
    """The table and its caption; with `width` (a terminal's), a table wider than it is cut into several, one
    after the other, each with the run column, and the caption is wrapped to it."""
    header, rows = _header(comparison), _text_rows(comparison)
    if not markdown:  # names are the run folders' authors': no control code reaches the terminal
        header, rows = [terminal_text(h) for h in header], [[terminal_text(c) for c in r] for r in rows]
    table = render_table(header, rows, markdown=markdown)
    caption = [
        "- " + markdown_text(line) if markdown else terminal_text(line) for line in comparison.captions
    ]
    if width is None or markdown or max(len(line) for line in table.splitlines()) <= width:
        return "\n".join([table, "", *caption])
    tables = [
        render_table([header[0], *(header[i] for i in block)], [[r[0], *(r[i] for i in block)] for r in rows])
        for block in _column_blocks(header, rows, width)
    ]
    wrapped = [textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False) for line in caption]
    return "\n\n".join(tables) + "\n\n" + "\n".join(wrapped)


def to_latex(comparison: Comparison) -> str:
    """A `table` environment: a two-level header (benchmark over its metrics), caption below."""
    widths = [len(ms) for ms in comparison.groups.values()]
    spec = "l" + "".join("|" + "r" * w for w in widths)
    top = " & ".join(
        ["", *(rf"\multicolumn{{{w}}}{{c}}{{{latex_text(g)}}}" for g, w in zip(comparison.groups, widths))]
    )
    sub = " & ".join(["Run", *(latex_text(SHORT.get(m, m)) for ms in comparison.groups.values() for m in ms)])
    body = [" & ".join(latex_text(c) for c in cells) + r" \\" for cells in _text_rows(comparison)]
    return "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\hline",
            top + r" \\",
            sub + r" \\",
            r"\hline",
            *body,
            r"\hline",
            r"\end{tabular}",
            rf"\caption{{{latex_text(' '.join(comparison.captions))}}}",
            r"\end{table}",
        ]
    )


def records(comparison: Comparison) -> list[dict[str, Any]]:
    """One record per (row, benchmark, metric): values as fractions (metrics.json's unit), never rounded."""
    out = []
    for row in comparison.rows:
        for g, metrics in comparison.groups.items():
            for m in metrics:
                cell = row.cells.get(g, {}).get(m)
                if cell is None or cell.value is None:
                    continue
                out.append({"row": row.label, "kind": row.kind, "benchmark": g, "metric": m, **asdict(cell)})
    return out


def to_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    fields = ["row", "kind", "benchmark", "metric", "value", "ci_low", "ci_high", "p_value", "excludes_zero"]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for record in records(comparison):
        writer.writerow({k: "" if record[k] is None else csv_cell(record[k]) for k in fields})
    return buffer.getvalue()


def to_json(comparison: Comparison) -> str:
    return (
        json.dumps(
            {
                "unit": "fraction (rates); differences are B - A",
                "groups": comparison.groups,
                "records": records(comparison),
                "captions": comparison.captions,
            },
            indent=2,
        )
        + "\n"
    )


def render(comparison: Comparison, fmt: str, width: int | None = None) -> str:
    if fmt == "text":
        return to_text(comparison, width=width)
    if fmt == "markdown":
        return to_text(comparison, markdown=True)
    if fmt == "latex":
        return to_latex(comparison)
    if fmt == "csv":
        return to_csv(comparison)
    if fmt == "json":
        return to_json(comparison)
    raise UserInputError(f"--format {fmt!r} is not one of {list(FORMATS)}")
