"""`hardpos` command line: one subcommand per module in `hf_hardpos/commands/`.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func`; new
commands need no change here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from . import commands
from .errors import UserInputError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hardpos",
        description="Hard-positive evaluation and training of CLIP-style models.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of input errors too (or set HARDPOS_DEBUG=1)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{module.name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a `UserInputError` becomes one `error: ...` line and exit status 2."""
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get("HARDPOS_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args) or 0)
    except UserInputError as err:
        if debug:
            raise
        print(f"hardpos {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
