"""The README fits on a page and points into the docs site; the site builds with warnings as errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from tests.support.paths import REPO as ROOT

LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")
MAX_README_LINES = 300
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def test_readme_is_short_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    targets = LINK.findall(text)
    assert any(t.startswith("docs/") for t in targets), "the README links into no docs page"
    # relative to the repository root, where the README is published
    assert [t for t in targets if not (ROOT / t).exists()] == []
    for command in ("hardpos demo", "hardpos eval", "hardpos train", "load_dataset(", "evaluate.load(", "HardPosTrainer("):
        assert command in text, command


def _bash_blocks(text: str) -> list[list[str]]:
    """Each bash block's command lines (comments and blank lines left out)."""
    return [[line for line in block.splitlines() if line.strip() and not line.startswith("#")]
            for block in BASH_BLOCK.findall(text)]  # fmt: skip


def test_the_two_commands_at_the_top_are_the_main_job_and_what_ci_runs():
    first, second = _bash_blocks((ROOT / "README.md").read_text())[:2]
    # 1. the main job on a fresh machine: install (the package with `pip install -e .`), then `hardpos demo`,
    # each command on its own line so that none scrolls off-screen
    assert all(line.startswith("pip install ") for line in first[:-1]) and "pip install -e ." in first
    assert first[-1] == "hardpos demo --output-dir runs/demo"
    # 2. install, test and build the docs: .ci/run runs these lines verbatim, in this order, after its exports
    assert second[-1].startswith("pip install ") and second[-1].endswith("python -m pytest -q && mkdocs build --strict")
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-len(second):] == second
    assert all(line.startswith(("set ", "cd ", "export ")) for line in ci_lines[:-len(second)])


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
