"""`hardpos` command line: one subcommand per module in `hf_hardpos/commands/`.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func`; new
commands need no change here. Only the command being run is registered (imported): the others
appear in `hardpos --help` with the first line of their module docstring, read from the source
without importing it, so help and argument errors do not wait for torch, transformers and datasets
(measured by `benchmarks/cli_startup.py`).

Errors: a `UserInputError` (bad input, options or environment) is one `error: ...` line and exit
status 2; Ctrl-C is one line and exit status 130; `--debug` or `HARDPOS_DEBUG=1` shows tracebacks.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import pkgutil
import sys
from pathlib import Path

from . import commands, progress
from .errors import UserInputError, user_error_from

COMMANDS = sorted(module.name for module in pkgutil.iter_modules(commands.__path__))


def _summary(command: str) -> str:
    """The first line of a command module's docstring, without importing the module."""
    source = Path(commands.__path__[0]) / f"{command}.py"
    docstring = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    line = docstring.strip().splitlines()[0] if docstring.strip() else ""
    return line.split(":", 1)[1].strip() if line.startswith("`hardpos") and ":" in line else line


def _chosen_command(argv: list[str]) -> str | None:
    """The subcommand named in `argv` (the first word that is not an option), if it is one."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The `hardpos` parser; with `argv`, only the command it names is fully registered."""
    parser = argparse.ArgumentParser(
        prog="hardpos",
        description="Hard-positive evaluation and training of CLIP-style models.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of errors too (or set HARDPOS_DEBUG=1)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _chosen_command(argv) if argv is not None else None
    for name in COMMANDS:
        if argv is None or name == chosen:
            importlib.import_module(f"{commands.__name__}.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=_summary(name), add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a `UserInputError` becomes one `error: ...` line and exit status 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    debug = args.debug or os.environ.get("HARDPOS_DEBUG", "") not in ("", "0")
    try:
        # Every command's --no-progress (eval: also --quiet) silences every library's bars too.
        with progress.configure(enabled=not getattr(args, "no_progress", False)):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"hardpos {args.command}: interrupted (what was complete is saved)", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the known environment failures become one line, bugs re-raise
        user_error = err if isinstance(err, UserInputError) else user_error_from(err, args)
        if user_error is None or debug:
            raise
        print(f"hardpos {args.command}: error: {user_error}", file=sys.stderr)
        return user_error.exit_code


if __name__ == "__main__":
    sys.exit(main())
