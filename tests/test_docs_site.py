"""The README fits on a page and points into the docs site; the site builds with warnings as errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DRAFT = ROOT / "docs" / "README_draft.md"  # the README to be, until it replaces README.md
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")
MAX_README_LINES = 300


def _published_readme() -> Path:
    return DRAFT if DRAFT.exists() else ROOT / "README.md"


def test_readme_is_short_and_its_links_resolve():
    readme = _published_readme()
    text = readme.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    targets = LINK.findall(text)
    assert any(t.startswith("docs/") for t in targets), "the README links into no docs page"
    # relative to the repository root, where the README is published
    assert [t for t in targets if not (ROOT / t).exists()] == []
    for command in ("hardpos demo", "hardpos eval", "hardpos train", "load_dataset(", "evaluate.load(", "HardPosTrainer("):
        assert command in text, command


def test_every_docs_page_is_in_the_navigation():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(config["nav"]))
    excluded = set(config["exclude_docs"].split())
    on_disk = {p.name for p in (ROOT / "docs").glob("*.md")} - excluded
    assert on_disk == listed


@pytest.mark.slow
def test_the_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason='the docs extra: pip install -e ".[docs]"')
    pytest.importorskip("mkdocstrings")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    cli_page = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "usage: hardpos train" in cli_page and "usage: hardpos eval" in cli_page  # generated at build time
