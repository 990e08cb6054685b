"""Every pointer into the documentation that the code, the README and the docs give, as "docs/PAGE.md,
Heading" (errors, `--help`, docstrings), names a page that exists and a heading on it.

Why: an error that sends a user to "(README: Evaluate your own data)", a heading only a docs page has,
leaves them searching; a renamed heading would do the same silently.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO

# `docs/evaluation.md, Evaluate your own data` or `docs/architecture.md, "Adding a loss term"`; `README: X` or
# `README, X` is a pointer too (to the README's headings).
POINTER = re.compile(r'(docs/[\w-]+\.md|README)(?:,|:) ("[^"]+"|[A-Z`][^)";:,]*)')
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def headings(page: Path) -> list[str]:
    """The page's Markdown headings, as text (code blocks left out; backticks and `{#id}` dropped)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = re.findall(r"^#{1,6}\s+(.+?)\s*(?:\{#[\w-]+\})?\s*$", text, re.M)
    return [h.replace("`", "").strip() for h in found]


def resolves(target: str, heading_text: str, root: Path = REPO) -> bool:
    page = root / ("README.md" if target == "README" else target)
    if not page.is_file():
        return False
    quoted = heading_text.startswith('"')
    text = heading_text.strip('"').replace("`", "").strip()
    names = headings(page)
    if (
        quoted
    ):  # a quoted heading may be its beginning: "The embedded demo" for "The embedded demo (hardpos demo)"
        return any(name.startswith(text) for name in names)
    return any(text == name or text.startswith(name + " ") for name in names)


def pointers(path: Path) -> list[tuple[str, str]]:
    """(page, heading) pointers of a file; a comment or string continued on the next line is read as one line."""
    text = re.sub(r"\n\s*(#\s*)?", " ", path.read_text(encoding="utf-8"))
    return [(match[1], match[2]) for match in POINTER.finditer(text)]


def _sources() -> list[Path]:
    return [
        *sorted((REPO / "hf_hardpos").rglob("*.py")),
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "benchmarks").glob("*.py")),
        *sorted((REPO / "examples").rglob("*.py")),
    ]


def test_every_documentation_pointer_names_an_existing_heading():
    found = {
        (str(path.relative_to(REPO)), page, heading)
        for path in _sources()
        for page, heading in pointers(path)
    }
    assert len(found) >= 20
    assert sorted(f for f in found if not resolves(f[1], f[2])) == []


def test_a_pointer_to_a_missing_heading_or_page_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "evaluation.md").write_text(
        "# Evaluate a model\n\n```bash\n# not a heading\n```\n\n## Evaluate your own data {#own}\n"
    )
    (tmp_path / "README.md").write_text("# hf_hardpos\n\n## Quick starts\n")
    source = tmp_path / "hint.py"
    source.write_text(
        'ERROR = "write configs: (README: Evaluate your own data)"\n'
        '# see (docs/evaluation.md,\n#   Evaluate your own data) and docs/evaluation.md, "Evaluate a"\n'
    )
    found = pointers(source)
    assert found == [
        ("README", "Evaluate your own data"),
        ("docs/evaluation.md", "Evaluate your own data"),
        ("docs/evaluation.md", '"Evaluate a"'),
    ]
    assert [resolves(page, heading, tmp_path) for page, heading in found] == [False, True, True]
    assert not resolves("docs/evaluation.md", "not a heading", tmp_path)
    assert not resolves("docs/missing.md", "Evaluate a model", tmp_path)
