"""`hardpos` command line: one subcommand per module in `hf_hardpos/commands/`.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func`; new
commands need no change here.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hardpos",
        description="Hard-positive evaluation and training of CLIP-style models.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{module.name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
