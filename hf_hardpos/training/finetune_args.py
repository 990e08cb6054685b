"""The fine-tuning command's arguments: `hardpos train` and `examples/finetune.py` read the same ones.

Three dataclasses go to one `HfArgumentParser` (the model, the data, and `HardPosTrainingArguments`,
i.e. every `transformers.TrainingArguments` flag plus the hard-positive losses), optionally after a
YAML/JSON file of flags or a recipe (`examples/recipes/*.yaml`, see `training.recipe`). Precedence:
command-line flags > the file > `DATASET_DEFAULTS` (adjusted to what was asked, `_run_defaults`) > the
dataclass defaults. `--help` shows the model, data and loss flags and the common Trainer flags with the
defaults a run gets; `--help-all` every Trainer flag. Errors in flags or values are one line
(`UserInputError`), with the closest known flag where one was misspelt.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser

from ..errors import UserInputError
from .recipe import Recipe, check_argument_types, read_arguments_file
from .training_args import HardPosTrainingArguments, LossArguments
from .validation import SAMPLE_IMAGES, check_numeric_arguments

logger = logging.getLogger(__name__)

__all__ = [
    "DATASET_DEFAULTS", "DataArguments", "ModelArguments", "all_arguments",
    "argument_parser", "parse_arguments", "parse_eval_spec",
]  # fmt: skip

# A fine-tune's defaults beyond the Trainer's: the paper's 5 epochs (docs/reference.md, Losses); the rest says how
# often to log, evaluate and save, and the scoring batch (no effect on results). A recipe file pins everything else.
DATASET_DEFAULTS = {
    "num_train_epochs": 5,
    "logging_steps": 50,
    "eval_strategy": "epoch",
    "save_strategy": "epoch",
    "per_device_eval_batch_size": 256,
}
DESCRIPTION = (
    "Fine-tune a CLIP model with hard positives and hard negatives on --dataset. A recipe "
    "(examples/recipes/*.yaml) or a YAML/JSON file of flags may come first; flags override it. Without "
    "--eval_datasets there is no evaluation. `hardpos train` with no arguments is the demo's hp+hn fine-tune "
    "instead (hf_hardpos.synthetic.finetune). --help-all lists every transformers.TrainingArguments flag."
)
# The TrainingArguments flags `--help` shows (the rest: `--help-all`): what sets a run's length, batch, optimiser,
# precision, saving, evaluation, logging and where it goes.
COMMON_TRAINING_FLAGS = (
    "output_dir", "num_train_epochs", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps",
    "learning_rate", "weight_decay", "warmup_steps", "lr_scheduler_type", "seed", "bf16", "use_cpu", "eval_strategy",
    "save_strategy", "save_steps", "logging_steps", "resume_from_checkpoint", "push_to_hub",
)  # fmt: skip
HELP_ALL = "--help-all"
# `HardPosTrainingArguments` fields that shape the loss besides each term's weight and options (`LossArguments`).
_LOSS_FLAGS = ("hard_example_sampling", "contrastive_hard_negatives", "gather_across_processes")


@dataclass
class ModelArguments:
    _argument_group_name = "model"
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "aliases": ["--model"],  # as `hardpos eval --model`
            "help": "Hub id or local folder of a CLIP model to fine-tune (e.g. openai/clip-vit-base-patch32).",
        },
    )


@dataclass
class DataArguments:
    _argument_group_name = "data"
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "Required: Hub id or local folder of a fine-tuning set in the COCO schema (image, caption, "
            "hard_positive_replace/_swap, hard_negative_replace/_swap), e.g. hardpos/coco."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Config name of --dataset."})
    dataset_revision: str | None = field(
        default=None,
        metadata={
            "help": "Hub revision (branch, tag or commit) of --dataset; the card records the commit read."
        },
    )
    train_split: str = field(default="train", metadata={"help": "Split of --dataset to train on."})
    eval_datasets: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Eval sets, each '[name=]path[:config[:split]]' (a Hub id or local folder of any benchmark "
            "`hardpos eval` recognises: hard positives (c/c_n/c_p), SugarCrepe/ARO-style caption selection, "
            "Winoground, or a clip_benchmark webdataset for zero-shot retention), e.g. hardpos/replace:attributes "
            "hardpos/swap cifar10=clip-benchmark/wds_vtab-cifar10. Without a config every config is evaluated. "
            "Logged as eval_<name>_<metric> (one row) or eval_<name>_<row>_<metric>."
        },
    )
    eval_split: str = field(default="test", metadata={"help": "Split used when an eval set names none."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Truncate the training set."})
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "Evaluate only the first N rows (images, for zero-shot sets) of each eval set and config: "
            "quick runs; the model card says so."
        },
    )
    check_all_images: bool = field(
        default=False,
        metadata={
            "help": "Decode every training image before step 1 (default: an evenly spaced sample of "
            f"{SAMPLE_IMAGES}; columns, nulls and captions are always checked on every row)."
        },
    )


class _Parser(HfArgumentParser):
    """argparse's errors as `UserInputError` (one line, exit 2) instead of the full usage text."""

    def error(self, message: str):
        raise UserInputError(f"{message} (see --help)")


def argument_parser(
    prog: str | None = None, add_help: bool = True, show_all: bool = False
) -> HfArgumentParser:
    """The parser of the argument groups; `prog` names the command in `--help` (`hardpos train`). Its defaults
    are `DATASET_DEFAULTS`, so that `--help` shows what a run gets; unless `show_all`, `--help` lists only
    the `COMMON_TRAINING_FLAGS` of TrainingArguments (every flag is accepted either way)."""
    parser = _Parser(
        (ModelArguments, DataArguments, HardPosTrainingArguments),
        prog=prog,
        add_help=add_help,
        description=DESCRIPTION,
    )
    parser.usage = f"{parser.prog} [RECIPE.yaml | FLAGS.json] --dataset DATASET [--flag value ...]"
    parser.set_defaults(**DATASET_DEFAULTS)
    _group_training_flags(parser, show_all)
    return parser


def _group_training_flags(parser: HfArgumentParser, show_all: bool) -> None:
    """Split the training dataclass's group in two: what this package adds (losses, columns, LoRA) and the
    Trainer's own flags; hide the rarely used Trainer flags from `--help` unless `show_all`."""
    import argparse

    from transformers import TrainingArguments

    trainer_fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    losses = parser.add_argument_group("losses: hard positives, hard negatives, CE-CLIP (hf_hardpos)")
    layout = parser.add_argument_group("columns, image crops, LoRA, model card (hf_hardpos)")
    trainer_group = next(
        g for g in parser._action_groups if g.title == HardPosTrainingArguments._argument_group_name
    )
    loss_fields = {f.name for f in dataclasses.fields(LossArguments)} | set(_LOSS_FLAGS)
    for action in list(trainer_group._group_actions):
        if action.dest not in trainer_fields:
            trainer_group._group_actions.remove(action)
            (losses if action.dest in loss_fields else layout)._group_actions.append(action)
        elif not show_all and action.dest not in COMMON_TRAINING_FLAGS:
            action.help = argparse.SUPPRESS
    # the Trainer's group last: ours reads first, as the recipes' fields do
    parser._action_groups.remove(trainer_group)
    parser._action_groups.append(trainer_group)


def _check_flags(parser: HfArgumentParser, argv: list[str]) -> None:
    """Refuse flags the parser does not know, with the closest known ones (argparse would only list them)."""
    _, unknown = parser.parse_known_args(argv)
    flags = [a.split("=", 1)[0] for a in unknown if a.startswith("-")]
    if not flags and unknown:
        raise UserInputError(
            f"unexpected argument(s) {unknown}: every option is a --flag (a YAML/JSON file goes first)"
        )
    # "--learning_rate" and its alias "--learning-rate": suggest each option once, as --help spells it
    known = list(dict.fromkeys(
        action.option_strings[0] for action in parser._actions if action.option_strings[0].startswith("--")
    ))  # fmt: skip
    if flags:
        hints = []
        for flag in flags:
            close = difflib.get_close_matches(flag, known, n=2, cutoff=0.75)
            hints.append(flag + (f" (did you mean {' or '.join(close)}?)" if close else ""))
        raise UserInputError(f"unknown option(s): {'; '.join(hints)}; see --help for the names")


def _given_on_command_line(argv: list[str]) -> dict:
    """The options `argv` sets explicitly, with their parsed values (a default is not "given")."""
    probe = argument_parser(add_help=False)  # --help is answered by the parser that holds the defaults
    unset = object()
    probe.set_defaults(**{name: unset for name in vars(probe.parse_known_args([])[0])})
    namespace, _ = probe.parse_known_args(argv)
    return {name: value for name, value in vars(namespace).items() if value is not unset}


def _dataclass_default(name: str) -> Any:
    return next(f.default for f in dataclasses.fields(HardPosTrainingArguments) if f.name == name)


def _run_defaults(explicit: dict) -> dict:
    """`DATASET_DEFAULTS` adjusted to what `explicit` asks (each adjustment logged):
    without eval sets evaluation is off (unless --eval_strategy was given, which the trainer then rejects
    clearly), --save_steps alone switches save_strategy to "steps", the start model is not evaluated when
    evaluation is off or when a run resumes, a length in steps drops the default epochs and bars are off
    off a terminal (pinned memory follows the device: `HardPosTrainingArguments`)."""
    defaults = dict(DATASET_DEFAULTS)
    if not explicit.get("eval_datasets") and "eval_strategy" not in explicit:
        defaults["eval_strategy"] = "no"
        logger.warning("no --eval_datasets: training without evaluation")
    if (
        explicit.get("resume_from_checkpoint")
        or explicit.get("eval_strategy") == "no"
        or defaults["eval_strategy"] == "no"
    ) and "eval_on_start" not in explicit:
        defaults["eval_on_start"] = False
    if "save_steps" in explicit and "save_strategy" not in explicit:
        defaults["save_strategy"] = "steps"
        logger.warning(
            "--save_steps given without --save_strategy: saving every %s steps", explicit["save_steps"]
        )
    # A default the user's choice makes inert is left out, so the trainer does not warn about it.
    # (back to the dataclass's default, which the parser's `DATASET_DEFAULTS` replaced for --help)
    if int(explicit.get("max_steps", -1)) > 0:
        defaults["num_train_epochs"] = _dataclass_default("num_train_epochs")
    if explicit.get("logging_strategy", "steps") != "steps":
        defaults["logging_steps"] = _dataclass_default("logging_steps")
    # Off a terminal no bar at all (the Trainer's, scoring's, weight loading's, shard writing's): progress
    # becomes labelled lines (`log_lines`), which a log file reads.
    defaults["disable_tqdm"] = not sys.stderr.isatty()
    return defaults


def parse_arguments(
    argv: list[str] | None = None, prog: str | None = None
) -> tuple[ModelArguments, DataArguments, HardPosTrainingArguments, Recipe | None]:
    """(model, data, training arguments, recipe or None) from an optional leading YAML/JSON file + flags."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if HELP_ALL in argv:
        argument_parser(prog, show_all=True).print_help()
        raise SystemExit(0)
    file_arguments, recipe = {}, None
    arguments_file = argv.pop(0) if argv and argv[0].endswith((".json", ".yaml", ".yml")) else None
    if arguments_file is not None:
        file_arguments, recipe = read_arguments_file(arguments_file)
    parser = argument_parser(prog)
    unknown = sorted(set(file_arguments) - set(vars(parser.parse_known_args([])[0])))
    if unknown:
        raise UserInputError(f"unknown argument(s) {unknown} in the arguments file; see --help for the names")
    check_argument_types(arguments_file, file_arguments, parser)
    explicit = {**file_arguments, **_given_on_command_line(argv)}
    parser.set_defaults(**{**_run_defaults(explicit), **file_arguments})
    _check_flags(parser, argv)
    try:
        model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as error:  # TrainingArguments' own checks of values (e.g. warmup_steps < 0)
        if isinstance(error, UserInputError):
            raise
        raise UserInputError(str(error).strip().splitlines()[0]) from error
    if data_args.dataset is None:
        raise UserInputError("--dataset is required (a Hub id or local folder); `hardpos train` with no arguments "
                             "runs the demo's hp+hn fine-tune instead")  # fmt: skip
    check_numeric_arguments(training_args)  # before any model or data is loaded
    return model_args, data_args, training_args, recipe


def all_arguments(*groups: Any) -> dict[str, Any]:
    """Every field of the argument dataclasses, by name (what a recipe is compared with)."""
    return {f.name: getattr(group, f.name) for group in groups for f in dataclasses.fields(group)}


def parse_eval_spec(spec: str, default_split: str) -> tuple[str, str, str | None, str]:
    """'[name=]path[:config[:split]]' -> (name, path, config, split)."""
    name, _, rest = spec.rpartition("=")
    path, config, split = (rest.split(":") + [None, None])[:3]
    if not path:
        raise UserInputError(f"--eval_datasets: bad entry {spec!r}; expected '[name=]path[:config[:split]]'")
    name = name or config or Path(path).name
    return name, path, config or None, split or default_split
