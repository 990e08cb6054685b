"""The README fits on a page and points into the docs site; the site builds with warnings as errors and
renders as written: every Markdown list as a list, every figure inside its sentence (stale ones marked),
the install and main commands visible on the index."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

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
    for command in (
        "hardpos demo",
        "hardpos eval",
        "hardpos train",
        "load_dataset(",
        "evaluate.load(",
        "HardPosTrainer(",
    ):
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
    assert second[-1].startswith("pip install ") and second[-1].endswith(
        'python -m pytest -q -m "not open_clip" && .ci/openclip_env.sh && mkdocs build --strict'
    )  # open_clip: a side venv
    ci_lines = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert ci_lines[-len(second) :] == second
    assert all(line.startswith(("set ", "cd ", "export ")) for line in ci_lines[: -len(second)])


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


class _Paragraphs(HTMLParser):
    """The text of every <p> of a page, and the comments left in it."""

    def __init__(self):
        super().__init__()
        self.paragraphs: list[str] = []
        self.comments: list[str] = []
        self._open = False

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self._open = True
            self.paragraphs.append("")

    def handle_endtag(self, tag):
        if tag == "p":
            self._open = False

    def handle_data(self, data):
        if self._open:
            self.paragraphs[-1] += data

    def handle_comment(self, data):
        self.comments.append(data)


def _parsed(html: str) -> _Paragraphs:
    parser = _Paragraphs()
    parser.feed(html)
    return parser


LIST_LINE = re.compile(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]+\S", re.M)


def _collapsed_lists(html: str) -> list[str]:
    """Paragraphs holding a line that starts like a list item: a list Markdown did not see (no blank line before it)."""
    return [p[:80] for p in _parsed(html).paragraphs if LIST_LINE.search(p)]


def test_a_figure_marker_at_a_line_start_stays_in_its_paragraph_and_a_stale_figure_is_marked(results_module):
    markdown = pytest.importorskip("markdown")
    results = {"bench": {"figures": {"x": "-17.5", "table": "\n| a |\n|---|\n| 1 |\n"}, "command": "python bench.py",
                         "date": "2026-11-28", "machine": {}, "code_digest": "old"}}  # fmt: skip
    page = "Hard positives change brittleness by\n<!--fig:bench.x-->-1<!--/fig--> points, a trade-off.\n"
    fresh = markdown.markdown(results_module.site_text(page, results, "old"))
    assert _parsed(fresh).paragraphs == ["Hard positives change brittleness by\n-17.5 points, a trade-off."]
    assert _parsed(
        markdown.markdown(page)
    ).comments  # as written, the marker is a comment that ends the paragraph
    stale = markdown.markdown(results_module.site_text(page, results, "new"), extensions=["tables"])
    assert 'class="stale-figure"' in stale and "(bench): python bench.py re-measures it" in stale
    assert len(_parsed(stale).paragraphs) == 1
    table = markdown.markdown(results_module.site_text("<!--fig:bench.table-->?<!--/fig-->", results, "new"),
                              extensions=["tables"])  # fmt: skip
    assert "<table>" in table and "Stale: measured on older code" in table
    assert "stale-figure" not in markdown.markdown(
        results_module.site_text("<!--fig:bench.table-->?<!--/fig-->", results, "old")
    )


def test_a_list_without_a_blank_line_before_it_is_caught():
    markdown = pytest.importorskip("markdown")
    assert _collapsed_lists(markdown.markdown("Honest reading:\n- one\n- two\n")) == [
        "Honest reading:\n- one\n- two"
    ]
    assert _collapsed_lists(markdown.markdown("Honest reading:\n\n- one\n- two\n")) == []


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason='the docs extra: pip install -e ".[docs]"')
    pytest.importorskip("mkdocstrings")
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_docs_build_with_warnings_as_errors(site):
    cli_page = (site / "cli" / "index.html").read_text()
    assert "usage: hardpos train" in cli_page and "usage: hardpos eval" in cli_page  # generated at build time


@pytest.mark.slow
def test_every_list_renders_as_a_list_and_no_figure_marker_is_left(site):
    pages = sorted(site.rglob("index.html"))
    assert len(pages) >= 15
    collapsed = {str(p.relative_to(site)): found for p in pages if (found := _collapsed_lists(p.read_text()))}
    assert collapsed == {}
    markers = {
        str(p.relative_to(site))
        for p in pages
        if any(c.startswith("fig:") for c in _parsed(p.read_text()).comments)
    }
    assert markers == set()


@pytest.mark.slow
def test_figures_measured_on_other_code_are_marked_stale_on_the_site(site, results_module):
    results, digest = results_module.load(), results_module.code_digest()
    demo_page = (site / "demo" / "index.html").read_text()
    assert results_module.figure_text(results, "demo_results.replace_scores") in demo_page
    stale_benchmarks = {name for name in results if results_module.stale(results, name, digest)}
    marked = {
        name
        for name in results
        if f"({name}): {html.escape(results[name]['command'])} re-measures it" in demo_page
    }
    assert marked == stale_benchmarks & _quoted(ROOT / "docs" / "demo.md", results_module)


def _quoted(page: Path, results_module) -> set[str]:
    return {match["key"].partition(".")[0] for match in results_module.MARKER.finditer(page.read_text())}


@pytest.mark.slow
def test_the_install_and_main_commands_are_visible_on_the_index(site):
    index = (site / "index.html").read_text()
    code = re.search(r"<pre.*?<code>(.*?)</code></pre>", index, re.S)[1]
    text = re.sub(r"<[^>]+>", "", code)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[-1] == "hardpos demo --output-dir runs/demo" and "pip install -e ." in lines
    assert max(map(len, lines)) <= 100  # the code box shows about 100 characters before it scrolls
