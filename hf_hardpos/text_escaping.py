"""Names from untrusted inputs (models, datasets, configs, suite entries) made inert in each output format.

Why: a run folder's names are whatever its author typed, and they reach spreadsheets, markdown and
LaTeX tables and matplotlib labels, each of which gives some characters a meaning:

- CSV: a cell starting with `=`, `+`, `-`, `@`, tab or carriage return is a formula to Excel, LibreOffice
  and Google Sheets (`=2+5+cmd|' -c calc'!A0` runs a program through DDE). OWASP's rule
  (https://owasp.org/www-community/attacks/CSV_Injection): prefix such a cell with a single quote; the
  `csv` module already quotes separators and double quotes. Numbers stay numbers (only text is prefixed).
- markdown: `|` ends a table cell, so a name holding one shifts every number after it into the wrong
  column; a newline ends the row; `<`, `>` and `&` start HTML, which Markdown renderers pass
  through (a `<script>` in a model name would be live on a page that shows the card).
- a terminal: control codes (ESC sequences, carriage returns, backspaces) rewrite what is on the screen
  or the terminal's settings; printed names show them escaped (`\x1b`).
- LaTeX: `& % $ # _ { } ~ ^ \\` are commands or syntax, and a newline inside a table row breaks it.
- matplotlib: text with two `$` is parsed as mathtext, which raises on `a$x^$`; `\\$` is a literal `$`.

HTML needs nothing here: the report's templates autoescape (Jinja2).
"""

from __future__ import annotations

CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_LATEX = {
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "\\": r"\textbackslash{}",
    "\n": " ",
    "\r": " ",
}


def csv_cell(value):
    """`value` for a CSV cell: text starting like a formula gets a leading `'` (OWASP); anything else as is."""
    if isinstance(value, str) and value.startswith(CSV_FORMULA_STARTS):
        return "'" + value
    return value


def terminal_text(text: str) -> str:
    """`text` to print: every control character (C0 but tab, DEL, C1) written as its Python escape."""
    return "".join(char if char == "\t" or not _is_control(char) else repr(char)[1:-1] for char in str(text))


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0


def markdown_text(text: str) -> str:
    """`text` inline in markdown: HTML's `& < >` as entities, line breaks as spaces, control codes escaped."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return terminal_text(text.replace("\r\n", " ").replace("\r", " ").replace("\n", " "))


def markdown_cell(text: str) -> str:
    """`text` for one cell of a markdown table: `markdown_text`, with `\\` and `|` escaped."""
    return markdown_text(str(text).replace("\\", "\\\\").replace("|", r"\|"))


def latex_text(text: str) -> str:
    """`text` as literal LaTeX text (inside a tabular or a caption): specials escaped, line breaks as spaces."""
    return "".join(_LATEX.get(char, char) for char in text)


def mathtext_literal(text: str) -> str:
    """`text` as a literal matplotlib label: every `$` escaped, so nothing is parsed as mathtext."""
    return str(text).replace("$", r"\$")
