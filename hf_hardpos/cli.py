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
import ast
import copy
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import commands, progress
from .errors import UserInputError, user_error_from

COMMANDS = sorted(module.name for module in pkgutil.iter_modules(commands.__path__))


def _help_texts(command: str) -> tuple[str, str]:
    """A command's one-line help and its description, from its module docstring read without importing it."""
    source = Path(commands.__path__[0]) / f"{command}.py"
    docstring = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    summary, _, description = docstring.strip().partition("\n\n")
    summary = " ".join(summary.split())
    if summary.startswith("`hardpos") and ":" in summary:
        summary = summary.split(":", 1)[1].strip()
    return summary.rstrip("."), description


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """A command's description keeps its line breaks (examples stay readable), and every option's help ends
    with its default, as `argparse.ArgumentDefaultsHelpFormatter` adds it, except where the help already says
    it or there is none to show (None, False: an unset option or an off switch)."""

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        return bool(action.option_strings) and action.default is not argparse.SUPPRESS \
            and action.default not in (None, False, [], ()) and "default" not in (action.help or "").lower()

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        return f"{text} (default: %(default)s)".strip() if self._shows_default(action) else text

    def _format_action(self, action: argparse.Action) -> str:
        if action.help is None and self._shows_default(action):  # argparse prints no help line without a help
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)


def add_command(
    subparsers: argparse._SubParsersAction,
    module: str,
    run: Callable[[argparse.Namespace], int],
    own_arguments: bool = False,
) -> argparse.ArgumentParser:
    """The parser of the command defined in `module` (the command module's `__name__`), which calls `run`.

    Its help and description come from the module docstring (the description keeps its line breaks,
    so examples stay readable), the same text `hardpos --help` lists without importing the module.
    `own_arguments`: the command parses its arguments itself (`hardpos train`, whose flags are the
    Trainer's, read by `HfArgumentParser`); everything after its name, --help included, reaches `run`
    as `args.arguments`.
    """
    name = module.rsplit(".", 1)[-1]
    summary, description = _help_texts(name)
    parser = subparsers.add_parser(
        name, help=summary, description=description, formatter_class=HelpFormatter,
        add_help=not own_arguments,
    )
    parser.set_defaults(func=run, own_arguments=own_arguments)
    return parser


# What the readers of run folders, datasets and checkpoints read: a command's output must not replace one.
READ_SUFFIXES = frozenset({".json", ".jsonl", ".parquet", ".arrow", ".safetensors", ".bin", ".pt", ".pth", ".npy",
                           ".yaml", ".yml", ".csv"})


def refuse_overwriting_inputs(target: str | Path, inputs: Sequence[str | Path], option: str = "--output") -> None:
    """Refuse (one line, before any work) an output that is one of the command's inputs, or an existing
    data file inside an input folder (`hardpos report RUN --output RUN/metrics.json` would replace the run's
    metrics with HTML). A new file, or an earlier output (`RUN/report.html`), may be written there."""
    resolved = Path(target).expanduser().resolve()
    for given in inputs:
        source = Path(given).expanduser().resolve()
        inside = source.is_dir() and resolved.is_relative_to(source)
        if resolved == source or (inside and resolved.is_file() and resolved.suffix.lower() in READ_SUFFIXES):
            raise UserInputError(f"{option} {target} would overwrite {resolved.relative_to(source.parent)}, which "
                                 f"this command reads from {given}; write it elsewhere")


def write_output(target: str | Path, text: str, option: str = "--output") -> Path:
    """Write a command's text result to the file `option` named (parents created); an OSError is one line."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as err:
        raise UserInputError(f"{option} {target}: cannot write ({err.strerror or err})") from err
    return target


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
            subparsers.add_parser(name, help=_help_texts(name)[0], add_help=False)
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
        user_error = err if isinstance(err, UserInputError) else user_error_from(err, args)
        if user_error is None or debug:
            raise
        print(f"hardpos {args.command}: error: {user_error}", file=sys.stderr)
        return user_error.exit_code


if __name__ == "__main__":
    sys.exit(main())
