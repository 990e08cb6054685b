"""mkdocs build hook: the command-line page's `--help` texts, generated from the parsers at build time.

Why: help typed into a page drifts from the code; rendered here it is whatever `hardpos COMMAND --help`
prints (at a fixed width, so the page does not depend on the terminal that builds it).
"""

from __future__ import annotations

import argparse
import os

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


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference())
    return markdown
