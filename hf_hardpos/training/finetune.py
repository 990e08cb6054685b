"""Fine-tune CLIP with hard positives and hard negatives: what `hardpos train` and `examples/finetune.py` run.

`main(argv)` parses the arguments (`training.finetune_args`: a recipe or flags file, then flags), loads
the model and data, trains with `HardPosTrainer`, evaluates, and saves the model and its card;
`run(argv)` is `main` with the CLI's exit statuses (2 for bad input, 130 for Ctrl-C). Both work under
`accelerate launch` / `torchrun` (every process runs them; the Trainer shares the work).

Without `--model_name_or_path` the start model is the demo's tiny CLIP pretrained on the synthetic world
(`training.start_model`: the model `hardpos demo` fine-tunes), cached under HF_HOME, so the output folder
holds only the run. Without `--dataset` the run fine-tunes on the synthetic world and evaluates its
REPLACE and SWAP sets before the first step and after every epoch.

Logs are meant to be read from a file as well as a terminal: off a terminal every progress bar becomes
a line every few seconds (`hf_hardpos.progress`), the Trainer's progress and log dicts are JSON lines
with numbers (`training.log_lines`), and warnings about settings the user did not choose are avoided at
their source (pinned memory only with an accelerator, the image processor's backend named explicitly).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from datasets import Dataset, load_dataset_builder

from .. import columns, progress
from ..errors import UserInputError
from ..evaluation.eval_data import load_local_split
from ..image_processing import DEFAULT_IMAGE_BACKEND
from .finetune_args import DataArguments, all_arguments, parse_arguments, parse_eval_spec
from .interrupt import TrainingInterrupted
from .log_lines import use_log_lines
from .recipe import batch_layout
from .start_model import start_model
from .training_args import HardPosTrainingArguments
from .validation import validate_training_data

logger = logging.getLogger(__name__)

__all__ = ["load_data", "main", "run"]


def _truncate(dataset: Dataset, limit: int | None) -> Dataset:
    return dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset


def _synthetic_data(data_args: DataArguments) -> tuple[Dataset, dict, dict[str, str]]:
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


def _dataset_train(data_args: DataArguments) -> tuple[Dataset, dict[str, str | None], dict[str, str]]:
    """The training split of --dataset (a local folder read by content, or a Hub id through its builder)."""
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


def load_data(data_args: DataArguments, training_args: HardPosTrainingArguments):
    """(train set, {name: eval set}, {name: dataset id}, {name: description}, train identity) for the
    synthetic world or the Hub/local paths; descriptions name data without a Hub id in the model card, the
    train identity is the config, split and revision (Hub commit or data files' sha256) trained on. Synthetic eval sets
    are in-memory hard-positive tables; `--eval_datasets` entries are `BenchmarkEvalSet`s of any benchmark."""
    from ..evaluation.training_sets import BenchmarkEvalSet

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

    from .model_card import HardPosModelCardData
    from .trainer import HardPosTrainer

    recipe_report = _recipe_report(recipe, model_args, data_args, training_args) if recipe is not None else None
    model_path = model_args.model_name_or_path or start_model(
        training_args, data_args.synthetic_pretrain_examples, data_args.synthetic_pretrain_epochs
    )
    model = CLIPModel.from_pretrained(model_path)
    # The backend named, as `hardpos eval` does (`image_processing`): no fallback warning, the same pixels.
    processor = CLIPProcessor.from_pretrained(model_path, backend=DEFAULT_IMAGE_BACKEND)
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
    use_log_lines(trainer)
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
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    model_args, data_args, training_args, recipe = parse_arguments(argv, prog)
    if not training_args.should_log:
        logging.getLogger().setLevel(logging.WARNING)
    if data_args.dataset is None:
        logger.info("no --dataset: fine-tuning on the synthetic world (%d rows)", data_args.synthetic_train_size)
    with progress.configure(enabled=not training_args.disable_tqdm):
        return _train(model_args, data_args, training_args, recipe)


def run(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`main` with the exit status and one-line messages of the hardpos CLI: 2 for bad input or options,
    130 for Ctrl-C (after the trainer saved the current step when training had started)."""
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
