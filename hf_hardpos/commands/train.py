"""`hardpos train`: fine-tune a CLIP model with hard positives and hard negatives (Kamath et al. 2024;
CE-CLIP's losses optional), evaluating any benchmark `hardpos eval` knows along the way.

With no arguments: a small real fine-tune on the synthetic world, on CPU, in minutes. It starts from the
demo's pretrained tiny CLIP (trained once and cached under HF_HOME), evaluates the synthetic REPLACE and
SWAP sets before the first step and after every epoch, and writes the model, its card and the Trainer's
state to ./hardpos-synthetic.

    hardpos train
    hardpos train examples/recipes/svlc.yaml --dataset hardpos/coco \\
        --eval_datasets hardpos/replace:attributes hardpos/swap --output_dir clip-hardpos
    hardpos train --dataset hardpos/coco --output_dir clip-hardpos --use_lora --max_steps 100
    accelerate launch -m hf_hardpos train ...   (several processes; or examples/finetune.py)

A recipe (examples/recipes/*.yaml) or a YAML/JSON file of flags goes first; flags override it. Every
`transformers.TrainingArguments` flag is accepted, spelt as the Trainer spells it (--learning_rate);
`hardpos train --help` lists them all with their defaults. Bad options or data: one line, exit status 2;
Ctrl-C saves the current step as a checkpoint and exits with 130 (--resume_from_checkpoint last resumes).

How (for readers of the code): `main(argv)` parses the arguments (`training.finetune_args`), loads the
model and data, trains with `HardPosTrainer`, evaluates and saves; `finetune(argv)` is `main` with the
exit statuses, what `examples/finetune.py` calls under `accelerate launch` / `torchrun` (every process
runs it; the Trainer shares the work). This module composes training, evaluation and the synthetic world,
so it sits on the commands floor, above all three. The no-argument start model is the demo's (contrastive
pretraining on alt-text-like captions, weak on compositional distinctions as public CLIP checkpoints
are; from random weights a fine-tune ends below chance): built by the demo's own pretraining step (same
data, settings and cache key) into `HF_HOME/hardpos/synthetic-pretrained/<settings digest>/`, never into
the output folder, in a child process that does not see the launcher's variables (inside a `torchrun`
rank a Trainer would join that rank's process group; the fine-tune's precision flags would change the
cached model). Logs read well in a file: bars become lines (`hf_hardpos.progress`), log entries JSON
numbers (`training.log_lines`), and warnings about settings nobody chose are avoided at their source
(pinned memory only with an accelerator, the image processor's backend named).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import columns, output_folder, progress
from ..command_parsers import add_command
from ..errors import UserInputError

if TYPE_CHECKING:  # torch, transformers and datasets load when the command runs, not when it is listed
    from datasets import Dataset

logger = logging.getLogger(__name__)

START_MODEL_CACHE = ("hardpos", "synthetic-pretrained")  # under HF_HOME
# What a launcher sets for the processes it starts; a child process that trains alone must not see it.
_LAUNCHER_VARIABLES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                       "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"}  # fmt: skip
_LAUNCHER_PREFIXES = ("TORCHELASTIC_", "ACCELERATE_")


def register(subparsers: argparse._SubParsersAction) -> None:
    # The Trainer's flags are parsed by HfArgumentParser (training.finetune_args), so the command takes
    # everything after its name, --help included, as it is.
    add_command(subparsers, __name__, run, own_arguments=True)


def run(args: argparse.Namespace) -> int:
    return finetune(args.arguments, prog="hardpos train")


def _demo_config(examples: int | None, epochs: float | None):
    """The demo's `DemoConfig`, with a smaller pretraining budget where one is given (tests, smoke runs)."""
    from ..synthetic.demo import DemoConfig

    budget = {"pretrain_examples": examples, "pretrain_epochs": epochs}
    return dataclasses.replace(DemoConfig(), **{k: v for k, v in budget.items() if v is not None})


def start_model_cache(config) -> Path:
    """Where the pretrained model of `config` is cached: one folder per pretraining setting, so a quick
    test model never replaces the demo's."""
    from huggingface_hub import constants

    from ..provenance import digest_of

    return Path(constants.HF_HOME).joinpath(*START_MODEL_CACHE, digest_of(config.pretrain_settings()))


def _start_model(training_args, examples: int | None, epochs: float | None) -> str:
    """The folder of the demo's pretrained tiny CLIP, trained first (in a child process) when not cached."""
    from filelock import FileLock

    from ..synthetic.demo import PRETRAINED

    config = _demo_config(examples, epochs)
    models_dir = start_model_cache(config)
    models_dir.mkdir(parents=True, exist_ok=True)
    logger.info("start model: the demo's pretrained tiny CLIP (%d pairs, %g epochs), from the cache %s or trained "
                "into it first", config.pretrain_examples, config.pretrain_epochs, models_dir)  # fmt: skip
    with training_args.main_process_first(desc="pretraining the tiny CLIP"), FileLock(str(models_dir) + ".lock"):
        child = (f"from {__name__} import pretrain_start_model; pretrain_start_model({str(models_dir)!r}, "
                 f"{config.pretrain_examples!r}, {config.pretrain_epochs!r}, {not training_args.disable_tqdm!r})")
        command = [sys.executable, "-c", child]
        environment = {name: value for name, value in os.environ.items()
                       if name not in _LAUNCHER_VARIABLES and not name.startswith(_LAUNCHER_PREFIXES)}  # fmt: skip
        if subprocess.run(command, env=environment).returncode != 0:
            raise UserInputError(f"pretraining the start model into {models_dir} failed (see above); "
                                 "or give --model_name_or_path")  # fmt: skip
    return str(models_dir / PRETRAINED)


def pretrain_start_model(models_dir: str | Path, examples: int, epochs: float, bars: bool) -> None:
    """Reuse or train the demo's pretrained model in `models_dir`, as `run_demo` runs its pretraining step
    (its thread count, library chatter silenced); what the child process of `_start_model` runs."""
    from ..synthetic import demo, runtime
    from ..synthetic.stage_log import StageLog

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    config = _demo_config(examples, epochs)
    log = StageLog(logger.info, enabled=not bars)  # a line at least every few seconds while it trains
    with progress.configure(enabled=bars), runtime.torch_threads(config.torch_threads), runtime.quiet_libraries(), \
            log.stage("pretrain"):
        folder, reused = demo._pretrained_model(Path(models_dir), config, bars, log)
    logger.info("start model: %s %s", "reused" if reused else "trained and cached", folder)


def _truncate(dataset: Dataset, limit: int | None) -> Dataset:
    return dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset


def _synthetic_data(data_args) -> tuple[Dataset, dict, dict[str, str]]:
    """The synthetic world's fine-tuning set and (unless --eval_datasets) its REPLACE and SWAP sets."""
    from ..synthetic.world import make_finetune_dataset, make_replace_dataset, make_swap_dataset

    seed, n = data_args.synthetic_seed, data_args.synthetic_eval_size
    train = make_finetune_dataset(data_args.synthetic_train_size, seed)
    descriptions = {"train": f"the synthetic world's fine-tuning set (`make_finetune_dataset`, seed {seed})"}
    evals = {}
    if not data_args.eval_datasets:
        evals = {
            "replace_attributes": make_replace_dataset(n, seed, "attributes"),
            "replace_relations": make_replace_dataset(n, seed, "relations"),
            "swap": make_swap_dataset(n, seed),
        }
        descriptions.update({name: f"the synthetic world's {name} set (seed {seed})" for name in evals})
    return train, evals, descriptions


def _dataset_train(data_args) -> tuple[Dataset, dict[str, str | None], dict[str, str]]:
    """The training split of --dataset (a local folder read by content, or a Hub id through its builder)."""
    from datasets import load_dataset_builder

    from ..evaluation.eval_data import load_local_split

    if Path(data_args.dataset).expanduser().is_dir():
        # Read by content: `datasets`' cache would serve a rebuilt folder's old rows (docs: Datasets).
        train, identity = load_local_split(data_args.dataset, data_args.dataset_config, data_args.train_split)
        return (train, {"config": identity["config"], "split": data_args.train_split},
                {"train": f"local folder, data files sha256 {identity['sha256'][:12]}"})  # fmt: skip
    # Through the builder, whose hash is the Hub commit the rows were read from.
    builder = load_dataset_builder(data_args.dataset, data_args.dataset_config, revision=data_args.dataset_revision)
    builder.download_and_prepare()
    identity = {"config": builder.config.name, "split": data_args.train_split,
                "revision": f"commit {builder.hash}" if builder.hash else None}  # fmt: skip
    return builder.as_dataset(split=data_args.train_split), identity, {}


def load_data(data_args, training_args):
    """(train set, {name: eval set}, {name: dataset id}, {name: description}, train identity) for the
    synthetic world or the Hub/local paths; descriptions name data without a Hub id in the model card, the
    train identity is the config, split and revision (Hub commit or data files' sha256) trained on. Synthetic eval sets
    are in-memory hard-positive tables; `--eval_datasets` entries are `BenchmarkEvalSet`s of any benchmark."""
    from ..evaluation.training_sets import BenchmarkEvalSet
    from ..training.finetune_args import parse_eval_spec

    if data_args.dataset is None:
        train, evals, descriptions = _synthetic_data(data_args)
        train_identity: dict[str, str | None] = {}
    else:
        train, train_identity, descriptions = _dataset_train(data_args)
        evals = {}
    evals = {name: _truncate(dataset, data_args.max_eval_samples) for name, dataset in evals.items()}
    eval_ids: dict[str, str] = {}
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


def _recipe_report(recipe, model_args, data_args, training_args):
    """What the card says about the recipe, with every deviation logged as a warning."""
    from ..training.finetune_args import all_arguments
    from ..training.recipe import batch_layout

    per_device, processes, accumulation = batch_layout(training_args)
    report = recipe.report(all_arguments(model_args, data_args, training_args), per_device=per_device,
                           processes=processes, accumulation=accumulation)  # fmt: skip
    logger.info("recipe %s v%s (%s); global batch %s", recipe.name, recipe.version, recipe.path, report.global_batch)
    for line in report.deviations:
        logger.warning("deviation from recipe %s: %s", recipe.name, line)
    return report


def _final_eval_metrics(trainer) -> dict[str, float]:
    """The final model's metrics (which go into the card), reused if its step was evaluated; with
    load_best_model_at_end the final model is the best checkpoint's, evaluated at its step."""
    loaded = trainer.best_model_loaded
    step = loaded["step"] if loaded else trainer.state.global_step
    last = [e for e in trainer.state.log_history if e.get("step") == step and "eval_runtime" in e]
    return {k: v for k, v in last[-1].items() if k.startswith("eval_")} if last else trainer.evaluate()


def _before_and_after(trainer, after: dict[str, float]) -> None:
    """One line per eval set: brittleness of the start model (the step-0 evaluation) and of the final one."""
    first = next((e for e in trainer.state.log_history if e.get("step") == 0 and "eval_runtime" in e), None)
    if first is None:
        return
    for key in sorted(k for k in after if k.endswith("_brittleness") and k in first):
        logger.info("%s: %.1f %% before fine-tuning, %.1f %% after", key[len("eval_"):], 100 * first[key],
                    100 * after[key])  # fmt: skip


def _train(model_args, data_args, training_args, recipe) -> dict[str, float]:
    from transformers import CLIPModel, CLIPProcessor

    from ..image_processing import DEFAULT_IMAGE_BACKEND
    from ..model_checks import refuse_remote_code
    from ..training.card_data import HardPosModelCardData
    from ..training.trainer import HardPosTrainer
    from ..training.validation import validate_training_data

    output_folder.refuse_links(training_args.output_dir, "--output_dir")  # the Trainer's saves open names
    recipe_report = _recipe_report(recipe, model_args, data_args, training_args) if recipe is not None else None
    model_path = model_args.model_name_or_path or _start_model(
        training_args, data_args.synthetic_pretrain_examples, data_args.synthetic_pretrain_epochs
    )
    refuse_remote_code(model_path)
    model = CLIPModel.from_pretrained(model_path, trust_remote_code=False)
    # The backend named, as `hardpos eval` does (`image_processing`): no fallback warning, the same pixels.
    processor = CLIPProcessor.from_pretrained(model_path, backend=DEFAULT_IMAGE_BACKEND, trust_remote_code=False)
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
    trainer = HardPosTrainer(model=model, args=training_args, train_dataset=train, eval_datasets=evals,
                             processor=processor, model_card_data=card_data)  # fmt: skip
    # "last" / True: the last complete checkpoint (the trainer skips incomplete ones and says so).
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    metrics = dict(result.metrics)  # logged by the Trainer already, as every evaluation was
    if evals:
        eval_metrics = _final_eval_metrics(trainer)
        if trainer.is_world_process_zero():
            _before_and_after(trainer, eval_metrics)
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


def main(argv: list[str] | None = None, prog: str | None = None) -> dict[str, float]:
    """Parse `argv` (default: `sys.argv[1:]`), fine-tune, evaluate and save; the metrics of the final model.

    Off a terminal, progress bars become lines (`hf_hardpos.progress.configure`) for the whole run.
    """
    from ..training.finetune_args import parse_arguments

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    model_args, data_args, training_args, recipe = parse_arguments(argv, prog)
    if not training_args.should_log:
        logging.getLogger().setLevel(logging.WARNING)
    if data_args.dataset is None:
        logger.info("no --dataset: fine-tuning on the synthetic world (%d rows)", data_args.synthetic_train_size)
    with progress.configure(enabled=not training_args.disable_tqdm):
        return _train(model_args, data_args, training_args, recipe)


def finetune(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`main` with the exit status and one-line messages of the hardpos CLI: 2 for bad input or options,
    130 for Ctrl-C (after the trainer saved the current step when training had started)."""
    from ..training.interrupt import TrainingInterrupted

    try:
        main(argv, prog)
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
