"""`hardpos` command line: one subcommand per module in `hf_hardpos/commands/`.

Each command module exposes `register(subparsers)`, which adds its parser with `add_command` and
its own options; new commands need no change here. A command's help is its module docstring: the
first paragraph (after "`hardpos NAME`:") is its line in `hardpos --help`, the rest its description
in `hardpos NAME --help`. Only the command being run is registered (imported): the others are listed
from their docstrings read from the source, so help and argument errors do not wait for torch,
transformers and datasets (measured by `benchmarks/cli_startup.py`).

Errors: a `UserInputError` (bad input, options or environment) is one `error: ...` line and exit
status 2; Ctrl-C is one line and exit status 130; `--debug` or `HARDPOS_DEBUG=1` shows tracebacks.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import pkgutil
import signal
import sys

from . import commands, progress
from .commands._parsers import add_underscore_aliases, help_texts
from .errors import UserInputError, user_error_from

# A module whose name starts with "_" is a part of a command (`_eval_runs`), not a command.
COMMANDS = sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_"))


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
            subparsers.add_parser(name, help=help_texts(name)[0], add_help=False)
    add_underscore_aliases(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a `UserInputError` becomes one `error: ...` line and exit status 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args, rest = parser.parse_known_args(argv)
    if getattr(args, "own_arguments", False):
        args.arguments = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
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
    except BrokenPipeError:
        # The reader of our output went away (`hardpos zoo | head`): nothing failed, so no traceback; what
        # is left to print goes nowhere, and the status is the shell's for a process ended by SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as err:  # noqa: BLE001 - the known environment failures become one line, bugs re-raise
        if (
            getattr(err, "exit_code", None) == 130 and not debug
        ):  # training.interrupt.TrainingInterrupted: saved, said
            print(f"hardpos {args.command}: {err}", file=sys.stderr)
            return 130
        user_error = err if isinstance(err, UserInputError) else user_error_from(err, args)
        if user_error is None or debug:
            raise
        print(f"hardpos {args.command}: error: {user_error}", file=sys.stderr)
        return user_error.exit_code


def console_main() -> int:
    """The `hardpos` executable and `python -m hf_hardpos`: `main`, in a process that ends when it returns.

    Why the `gc.freeze()`: an interpreter that exits runs the cyclic garbage collector over every object
    still alive, and after importing torch, transformers and datasets that is ~450k objects: 2.5 s after
    a `hardpos eval`'s last line on a 2-core machine, more with each model a run loads, for memory the
    operating system takes back whole anyway. Frozen objects are skipped (0.5 s left). What must happen at
    exit still does: `atexit` handlers run (logging flushed, temporary folders removed, worker processes
    stopped) and objects outside reference cycles are still freed; every file we write is closed (and
    renamed into place) before its command returns. Only here, never in `main`: a process that goes on
    (a test calling `main`) must keep collecting its garbage.
    """
    status = main()
    gc.freeze()
    return status


def run_dataset_script(dataset: str, argv: list[str] | None = None) -> int:
    """What `dataset_scripts/<dataset>.py` runs: `hardpos build <dataset> ARGS`."""
    return main(["build", dataset, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(console_main())
