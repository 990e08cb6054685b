"""What every `hardpos` command module builds its parser and writes its results with.

A part of `hf_hardpos.commands` (its name starts with "_": no command), used by every command module
and by `hf_hardpos.cli`: a command module registers its
parser with `add_command` (help and description from its own module docstring, read without importing
it, so `hardpos --help` lists every command without loading torch) and guards its outputs with
`refuse_overwriting_inputs` and `write_output`.
"""

from __future__ import annotations

import argparse
import ast
import copy
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import UserInputError

COMMANDS_FOLDER = Path(__file__).parent


def help_texts(command: str) -> tuple[str, str]:
    """A command's one-line help and its description, from its module docstring read without importing it."""
    source = COMMANDS_FOLDER / f"{command}.py"
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
        return (
            bool(action.option_strings)
            and action.default is not argparse.SUPPRESS
            and action.default not in (None, False, [], ())
            and "default" not in (action.help or "").lower()
        )

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
    summary, description = help_texts(name)
    parser = subparsers.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=HelpFormatter,
        add_help=not own_arguments,
    )
    parser.set_defaults(func=run, own_arguments=own_arguments)
    return parser


def add_underscore_aliases(parser: argparse.ArgumentParser) -> None:
    """Accept `--output_dir` wherever `--output-dir` is an option, in `parser` and its subcommands' parsers.

    Why: the commands spell their flags with dashes (as open_clip and clip_benchmark do), but
    `hardpos train` (HfArgumentParser) takes both spellings, so a user who types one command's spelling
    in another is understood. The underscore spelling is hidden: `--help` shows one name per option.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                add_underscore_aliases(sub)
        for flag in action.option_strings:
            alias = "--" + flag[2:].replace("-", "_")
            if flag.startswith("--") and alias not in parser._option_string_actions:
                parser._option_string_actions[alias] = action


# What the readers of run folders, datasets and checkpoints read: a command's output must not replace one.
READ_SUFFIXES = frozenset(
    {
        ".json",
        ".jsonl",
        ".parquet",
        ".arrow",
        ".safetensors",
        ".bin",
        ".pt",
        ".pth",
        ".npy",
        ".yaml",
        ".yml",
        ".csv",
    }
)


def refuse_overwriting_inputs(
    target: str | Path, inputs: Sequence[str | Path], option: str = "--output"
) -> None:
    """Refuse (one line, before any work) an output that is one of the command's inputs, or an existing
    data file inside an input folder (`hardpos report RUN --output RUN/metrics.json` would replace the run's
    metrics with HTML). A new file, or an earlier output (`RUN/report.html`), may be written there."""
    target_path = Path(target).expanduser()
    resolved = (
        target_path.parent.resolve() / target_path.name
    )  # a link there is replaced, not written through
    for given in inputs:
        source = Path(given).expanduser().resolve()
        inside = source.is_dir() and resolved.is_relative_to(source)
        if resolved == source or (inside and resolved.is_file() and resolved.suffix.lower() in READ_SUFFIXES):
            raise UserInputError(
                f"{option} {target} would overwrite {resolved.relative_to(source.parent)}, which "
                f"this command reads from {given}; write it elsewhere"
            )


def write_output(target: str | Path, text: str, option: str = "--output") -> Path:
    """Write a command's text result to the file `option` named (parents created); an OSError is one line.

    Written atomically (`output_folder.write_text`): a full disk leaves the previous file whole, and
    a symbolic link at `target` is replaced by the file, never written through.
    """
    from .. import output_folder

    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        output_folder.write_text(target, text)
    except OSError as err:
        raise UserInputError(f"{option} {target}: cannot write ({err.strerror or err})") from err
    return target
