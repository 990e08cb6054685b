"""mkdocs build hook: the command-line page's `--help` texts, generated from the parsers at build time, and
every page's `<!--fig:...-->` figures rendered from `benchmarks/results.json`.

Why: help typed into a page drifts from the code; rendered here it is whatever `hardpos COMMAND --help`
prints (at a fixed width, so the page does not depend on the terminal that builds it). A figure marker
left in the Markdown is an HTML comment, which ends a paragraph where it starts a line; the site shows
the figure alone, marked stale where it was measured on other package code (`results.site_text`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

MARKER = "<!-- cli-help -->"
WIDTH = "100"


def _command_help(name: str) -> str:
    from hf_hardpos import cli

    parser = cli.build_parser([name])
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = subparsers.choices[name]
    if command.get_default("own_arguments"):  # hardpos train: HfArgumentParser's help
        from hf_hardpos.training.finetune_args import argument_parser

        return argument_parser(f"hardpos {name}").format_help()
    return command.format_help()


def cli_reference() -> str:
    """One section per command with its `--help`."""
    from hf_hardpos import cli

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        sections = [f"## hardpos {name}\n\n```text\n{_command_help(name).rstrip()}\n```\n" for name in cli.COMMANDS]
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(sections)


def _results_module():
    """benchmarks/results.py (not a package: the benchmark scripts import it as their sibling)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results.py"
    spec = importlib.util.spec_from_file_location("benchmark_results", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FIGURES: dict = {}


def on_pre_build(config) -> None:
    """Read the results file and digest the package once per build."""
    results = _results_module()
    _FIGURES.update(module=results, results=results.load(), digest=results.code_digest())


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return _FIGURES["module"].site_text(markdown, _FIGURES["results"], _FIGURES["digest"])
