#!/usr/bin/env python
"""Fine-tune CLIP with hard positives and hard negatives (Kamath et al. 2024; CE-CLIP losses optional).

Ways to run it:

    # No arguments: a small real fine-tune on the embedded synthetic world, on CPU, in a few minutes.
    # A tiny CLIP is built offline; the synthetic REPLACE/SWAP sets are evaluated after every epoch.
    accelerate launch examples/finetune.py

    # A pinned recipe (examples/recipes/: svlc = the HP+HN setting the paper follows, negclip, ce-clip),
    # then any flag as an override; the model card lists every deviation from the recipe.
    accelerate launch examples/finetune.py examples/recipes/svlc.yaml --dataset hardpos/coco \
        --eval_datasets hardpos/replace:attributes hardpos/replace:relations hardpos/swap \
        --output_dir clip-hardpos --dataloader_num_workers 8

    # Compositionality and zero-shot retention side by side: any benchmark `hardpos eval` knows is an
    # eval set (hard positives, SugarCrepe/ARO-style caption selection, Winoground, clip_benchmark's
    # zero-shot webdatasets), logged as eval_<set>[_<row>]_<metric> and carried into the card's model-index.
    python examples/finetune.py examples/recipes/svlc.yaml --dataset hardpos/coco \
        --eval_datasets hardpos/replace hardpos/sugarcrepe cifar10=clip-benchmark/wds_vtab-cifar10 \
        --max_eval_samples 500

    # Without a recipe: flags only (any TrainingArguments flag), or a JSON/YAML file of flags first.
    python examples/finetune.py --dataset hardpos/coco --output_dir clip-hardpos --use_lora
    python examples/finetune.py my_flags.yaml --max_steps 100

Defaults: without `--dataset` the synthetic demo's settings apply (`SYNTHETIC_DEFAULTS`), with it
`DATASET_DEFAULTS` (5 epochs; how often to log, evaluate and save); a recipe or flags file overrides
those, and flags on the command line override everything. A dataset without `--eval_datasets` trains
without evaluation. `--save_steps N` without `--save_strategy` saves every N steps (the defaults save
per epoch); options that have no effect with the others chosen are reported at start-up.
`--resume_from_checkpoint last` (or True) resumes from the last complete checkpoint (a truncated or
corrupt one is skipped, and the log says so). Ctrl-C finishes the current step, saves it as a checkpoint
and exits with status 130; bad options or data exit with status 2 and a one-line message. The training
set is checked before step 1 (columns, nulls, a sample of images; every image with --check_all_images).
Two CPU processes: `torchrun --nproc_per_node 2 examples/finetune.py --use_cpu ...`.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

from datasets import Dataset, load_dataset_builder
from transformers import CLIPModel, CLIPProcessor, HfArgumentParser

from hf_hardpos import columns
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.eval_data import load_local_split
from hf_hardpos.training import (
    BenchmarkEvalSet,
    HardPosModelCardData,
    HardPosTrainer,
    HardPosTrainingArguments,
    TrainingInterrupted,
)
from hf_hardpos.training.recipe import batch_layout, read_arguments_file
from hf_hardpos.training.validation import SAMPLE_IMAGES, check_numeric_arguments, validate_training_data

logger = logging.getLogger("finetune")

# The synthetic demo: sized to finish in a few minutes on two CPU cores with the tiny CLIP.
SYNTHETIC_DEFAULTS = {
    "output_dir": "hardpos-synthetic",
    "num_train_epochs": 4,
    "per_device_train_batch_size": 64,
    "per_device_eval_batch_size": 256,
    "learning_rate": 5e-4,
    "weight_decay": 0.1,
    "warmup_steps": 10,
    "logging_steps": 8,
    "eval_strategy": "epoch",
    "save_strategy": "epoch",
    "save_total_limit": 2,
    "report_to": "none",
    "seed": 0,
}
# With --dataset: the paper's 5 epochs (docs/reference.md, Losses); the rest says how often to log, evaluate and
# save, and the scoring batch (no effect on results). A recipe file pins everything else.
DATASET_DEFAULTS = {
    "num_train_epochs": 5,
    "logging_steps": 50,
    "eval_strategy": "epoch",
    "save_strategy": "epoch",
    "per_device_eval_batch_size": 256,
}
TINY_CLIP_FOLDER = "_tiny_clip_base"  # "_*" is never pushed to the Hub by the Trainer


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Hub id or local folder of a CLIP model (e.g. openai/clip-vit-base-patch32). Default: a "
            "tiny CLIP built offline, with a tokenizer that covers the synthetic world."
        },
    )


@dataclass
class DataArguments:
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "Hub id or local folder of a fine-tuning set in the COCO schema (image, caption, "
            "hard_positive_replace/_swap, hard_negative_replace/_swap), e.g. hardpos/coco. Default: the "
            "synthetic world."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Config name of --dataset."})
    dataset_revision: str | None = field(
        default=None,
        metadata={"help": "Hub revision (branch, tag or commit) of --dataset; the card records the commit read."},
    )
    train_split: str = field(default="train", metadata={"help": "Split of --dataset to train on."})
    eval_datasets: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Eval sets, each '[name=]path[:config[:split]]' (a Hub id or local folder of any benchmark "
            "`hardpos eval` recognises: hard positives (c/c_n/c_p), SugarCrepe/ARO-style caption selection, "
            "Winoground, or a clip_benchmark webdataset for zero-shot retention), e.g. hardpos/replace:attributes "
            "hardpos/swap cifar10=clip-benchmark/wds_vtab-cifar10. Without a config every config is evaluated. "
            "Logged as eval_<name>_<metric> (one row) or eval_<name>_<row>_<metric>. Default without --dataset: "
            "the synthetic REPLACE (attributes, relations) and SWAP sets."
        },
    )
    eval_split: str = field(default="test", metadata={"help": "Split used when an eval set names none."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Truncate the training set."})
    max_eval_samples: int | None = field(
        default=None,
        metadata={"help": "Evaluate only the first N rows (images, for zero-shot sets) of each eval set and config: "
                  "quick runs; the model card says so."},
    )
    synthetic_train_size: int = field(default=2048, metadata={"help": "Rows of the synthetic training set."})
    synthetic_eval_size: int = field(default=256, metadata={"help": "Rows of each synthetic eval set."})
    synthetic_seed: int = field(default=0, metadata={"help": "Seed of the synthetic world."})
    check_all_images: bool = field(
        default=False,
        metadata={"help": "Decode every training image before step 1 (default: an evenly spaced sample of "
                  f"{SAMPLE_IMAGES}; columns, nulls and captions are always checked on every row)."},
    )


def mode_defaults(dataset: str | None) -> dict:
    return dict(DATASET_DEFAULTS) if dataset else dict(SYNTHETIC_DEFAULTS)


class _Parser(HfArgumentParser):
    """argparse's errors as `UserInputError` (one line, exit 2) instead of the full usage text."""

    def error(self, message: str):
        raise UserInputError(f"{message} (see --help)")


def _parser() -> HfArgumentParser:
    return _Parser((ModelArguments, DataArguments, HardPosTrainingArguments))


def check_flags(parser: HfArgumentParser, argv: list[str]) -> None:
    """Refuse flags the script does not know, with the closest known ones (argparse would only list them)."""
    _, unknown = parser.parse_known_args(argv)
    flags = [a.split("=", 1)[0] for a in unknown if a.startswith("-")]
    if not flags and unknown:
        raise UserInputError(f"unexpected argument(s) {unknown}: every option is a --flag (a YAML/JSON file goes first)")
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


def given_on_command_line(argv: list[str]) -> dict:
    """The options `argv` sets explicitly, with their parsed values (a default is not "given")."""
    probe = _parser()
    unset = object()
    probe.set_defaults(**{name: unset for name in vars(probe.parse_known_args([])[0])})
    namespace, _ = probe.parse_known_args(argv)
    return {name: value for name, value in vars(namespace).items() if value is not unset}


def parse_arguments(argv: list[str] | None = None):
    """(model, data, training arguments, recipe or None) from an optional leading YAML/JSON file + flags.

    Precedence: flags > the file > the mode's defaults. Two adjustments follow what the user asked
    for, and are logged: without eval sets evaluation is off (unless --eval_strategy was given, which
    the trainer then rejects clearly), and --save_steps alone switches save_strategy to "steps".
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    file_arguments, recipe = {}, None
    if argv and argv[0].endswith((".json", ".yaml", ".yml")):
        file_arguments, recipe = read_arguments_file(argv.pop(0))
    parser = _parser()
    unknown = sorted(set(file_arguments) - set(vars(parser.parse_known_args([])[0])))
    if unknown:
        raise UserInputError(f"unknown argument(s) {unknown} in the arguments file; see --help for the names")
    explicit = {**file_arguments, **given_on_command_line(argv)}
    defaults = {**mode_defaults(explicit.get("dataset")), **file_arguments}
    if explicit.get("dataset") and not explicit.get("eval_datasets") and "eval_strategy" not in explicit:
        defaults["eval_strategy"] = "no"
        logger.warning("no --eval_datasets: training without evaluation")
    if "save_steps" in explicit and "save_strategy" not in explicit:
        defaults["save_strategy"] = "steps"
        logger.warning("--save_steps given without --save_strategy: saving every %s steps", explicit["save_steps"])
    parser.set_defaults(**defaults)
    check_flags(parser, argv)
    try:
        model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as error:  # TrainingArguments' own checks of values (e.g. warmup_steps < 0)
        if isinstance(error, UserInputError):
            raise
        raise UserInputError(str(error).strip().splitlines()[0]) from error
    check_numeric_arguments(training_args)  # before any model or data is loaded
    return model_args, data_args, training_args, recipe


def all_arguments(*groups) -> dict:
    """Every field of the argument dataclasses, by name (what a recipe is compared with)."""
    return {f.name: getattr(group, f.name) for group in groups for f in dataclasses.fields(group)}


def _truncate(dataset: Dataset, limit: int | None) -> Dataset:
    return dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset


def parse_eval_spec(spec: str, default_split: str) -> tuple[str, str, str | None, str]:
    """'[name=]path[:config[:split]]' -> (name, path, config, split)."""
    name, _, rest = spec.rpartition("=")
    path, config, split = (rest.split(":") + [None, None])[:3]
    if not path:
        raise UserInputError(f"--eval_datasets: bad entry {spec!r}; expected '[name=]path[:config[:split]]'")
    name = name or config or Path(path).name
    return name, path, config or None, split or default_split


def load_data(data_args: DataArguments, training_args: HardPosTrainingArguments):
    """(train set, {name: eval set}, {name: dataset id}, {name: description}, train identity) for the
    synthetic world or the Hub/local paths; descriptions name data without a Hub id in the model card, the
    train identity is the config, split and revision (Hub commit or data files' sha256) trained on. Synthetic eval sets
    are in-memory hard-positive tables; `--eval_datasets` entries are `BenchmarkEvalSet`s of any benchmark."""
    eval_ids: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    train_identity: dict[str, str | None] = {}
    if data_args.dataset is None:
        from hf_hardpos.synthetic.world import make_finetune_dataset, make_replace_dataset, make_swap_dataset

        seed = data_args.synthetic_seed
        train = make_finetune_dataset(data_args.synthetic_train_size, seed)
        descriptions["train"] = f"the synthetic world's fine-tuning set (`make_finetune_dataset`, seed {seed})"
        evals = {}
        if not data_args.eval_datasets:
            n = data_args.synthetic_eval_size
            evals = {
                "replace_attributes": make_replace_dataset(n, seed, "attributes"),
                "replace_relations": make_replace_dataset(n, seed, "relations"),
                "swap": make_swap_dataset(n, seed),
            }
            for name in evals:
                descriptions[name] = f"the synthetic world's {name} set (seed {seed})"
    else:
        if Path(data_args.dataset).expanduser().is_dir():
            # Read by content: `datasets`' cache would serve a rebuilt folder's old rows (README: Datasets).
            train, identity = load_local_split(data_args.dataset, data_args.dataset_config, data_args.train_split)
            descriptions["train"] = f"local folder, data files sha256 {identity['sha256'][:12]}"
            train_identity = {"config": identity["config"], "split": data_args.train_split}
        else:
            # Through the builder, whose hash is the Hub commit the rows were read from.
            builder = load_dataset_builder(
                data_args.dataset, data_args.dataset_config, revision=data_args.dataset_revision
            )
            builder.download_and_prepare()
            train = builder.as_dataset(split=data_args.train_split)
            train_identity = {"config": builder.config.name, "split": data_args.train_split,
                              "revision": f"commit {builder.hash}" if builder.hash else None}  # fmt: skip
        evals = {}
    evals = {name: _truncate(dataset, data_args.max_eval_samples) for name, dataset in evals.items()}
    for spec in data_args.eval_datasets:
        name, path, config, split = parse_eval_spec(spec, data_args.eval_split)
        if name in evals:
            raise UserInputError(f"--eval_datasets: two entries are named {name!r}; name one with 'other={spec}'")
        # The trainer recognises the benchmark and loads it before training starts.
        evals[name] = BenchmarkEvalSet(
            path, configs=[config] if config else None, split=split, max_rows=data_args.max_eval_samples
        )
        eval_ids[name] = path
    train = _truncate(train, data_args.max_train_samples)
    needed = [training_args.image_column, training_args.caption_column]
    columns.require_columns(
        train, needed + training_args.positive_columns + training_args.negative_columns, "the training set"
    )
    return train, evals, eval_ids, descriptions, train_identity


def load_model(model_args: ModelArguments, training_args: HardPosTrainingArguments) -> str:
    """The model folder or Hub id to load; builds the offline tiny CLIP when none is given."""
    if model_args.model_name_or_path:
        return model_args.model_name_or_path
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
    from hf_hardpos.synthetic.world import tokenizer_corpus

    folder = Path(training_args.output_dir) / TINY_CLIP_FOLDER
    # Built once per output_dir (a resumed run must see the same tokenizer), by the main process first.
    with training_args.main_process_first(desc="building the tiny CLIP"):
        if not (folder / "config.json").is_file():
            build_tiny_clip(folder, corpus=tokenizer_corpus(), seed=training_args.seed)
    return str(folder)


def main(argv: list[str] | None = None) -> dict[str, float]:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    model_args, data_args, training_args, recipe = parse_arguments(argv)
    if not training_args.should_log:
        logging.getLogger().setLevel(logging.WARNING)
    if data_args.dataset is None:
        logger.info("no --dataset: fine-tuning on the synthetic world (%d rows)", data_args.synthetic_train_size)
    recipe_report = None
    if recipe is not None:
        per_device, processes, accumulation = batch_layout(training_args)
        recipe_report = recipe.report(
            all_arguments(model_args, data_args, training_args),
            per_device=per_device,
            processes=processes,
            accumulation=accumulation,
        )
        logger.info("recipe %s v%s (%s); global batch %s", recipe.name, recipe.version, recipe.path,
                    recipe_report.global_batch)  # fmt: skip
        for line in recipe_report.deviations:
            logger.warning("deviation from recipe %s: %s", recipe.name, line)

    model_path = load_model(model_args, training_args)
    model = CLIPModel.from_pretrained(model_path)
    processor = CLIPProcessor.from_pretrained(model_path)
    train, evals, eval_ids, descriptions, train_identity = load_data(data_args, training_args)
    if data_args.check_all_images:  # the trainer checks the rest (and a sample of images) itself
        checked = validate_training_data(train, training_args, all_images=True)
        logger.info("decoded all %d training images before step 1", checked["images_decoded"])

    card_data = HardPosModelCardData(
        base_model=model_args.model_name_or_path,
        train_dataset_id=data_args.dataset,
        eval_dataset_ids=eval_ids,
        train_dataset_description=descriptions.pop("train", None),
        train_dataset_config=train_identity.get("config"),
        train_dataset_split=train_identity.get("split"),
        train_dataset_revision=train_identity.get("revision"),
        eval_dataset_descriptions=descriptions,
        recipe=recipe_report,
    )
    trainer = HardPosTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_datasets=evals,
        processor=processor,
        model_card_data=card_data,
    )
    # "last" / True: the last complete checkpoint (the trainer skips incomplete ones and says so).
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.log_metrics("train", result.metrics)

    metrics = dict(result.metrics)
    if evals:  # the final model's metrics, which go into the card; reused if its step was evaluated
        # With load_best_model_at_end the final model is the best checkpoint's, evaluated at its step.
        loaded = trainer.best_model_loaded
        step = loaded["step"] if loaded else trainer.state.global_step
        last = [e for e in trainer.state.log_history if e.get("step") == step and "eval_runtime" in e]
        eval_metrics = {k: v for k, v in last[-1].items() if k.startswith("eval_")} if last else trainer.evaluate()
        trainer.log_metrics("eval", eval_metrics)
        metrics.update(eval_metrics)
    trainer.save_state()
    if training_args.push_to_hub:  # saves the model, processor and card, then uploads output_dir
        trainer.push_to_hub(commit_message="End of training")
    else:
        trainer.save_model()
    if training_args.use_lora:
        merged = trainer.save_merged(str(Path(training_args.output_dir) / "merged"))
        logger.info("LoRA merged into a plain CLIPModel: %s", merged)
    return metrics


def run(argv: list[str] | None = None) -> int:
    """`main` with the exit status and one-line messages of the hardpos CLI: 2 for bad input or options,
    130 for Ctrl-C (after the trainer saved the current step when training had started)."""
    try:
        main(argv)
    except UserInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return UserInputError.exit_code
    except TrainingInterrupted as stop:
        print(stop, file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C) outside the training steps: nothing saved since the last checkpoint",
              file=sys.stderr)  # fmt: skip
        return TrainingInterrupted.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(run())
