"""`hardpos train`: fine-tune a CLIP model with hard positives and hard negatives (Kamath et al. 2024;
CE-CLIP's losses optional), evaluating any benchmark `hardpos eval` knows along the way.

With no arguments it is the demo's hp+hn fine-tune of seed 0 (`hf_hardpos.synthetic.finetune`): the
demo's start model (reused from `hardpos demo`'s folder or cache), data, recipe and eval sets, so its
REPLACE and SWAP rates are the demo's hp+hn row; it prints them beside the start model and the demo's hn
row, and writes ./hardpos-synthetic. `--output_dir`, `--resume_from_checkpoint` and `--demo_dir` are the
only flags it takes; anything else is a fine-tune of your own, which needs --dataset and a model (--model_name_or_path
or a recipe's).

    hardpos train
    hardpos train examples/recipes/svlc.yaml --dataset hardpos/coco \
        --eval_datasets hardpos/replace:attributes hardpos/swap --output_dir clip-hardpos
    accelerate launch -m hf_hardpos train ...   (several processes; or examples/finetune.py)

A recipe (examples/recipes/*.yaml) or a YAML/JSON file of flags goes first; flags override it. Every
`transformers.TrainingArguments` flag is accepted, spelt as the Trainer spells it (--learning_rate);
`hardpos train --help` lists the common ones with the defaults a run gets, `--help-all` all of them. Bad
options or data: one line, exit status 2; Ctrl-C saves the current step as a checkpoint and exits with 130;
the same command again resumes from the last complete checkpoint of --output_dir and says so.

How (for readers of the code): `main(argv)` parses the arguments (`training.finetune_args`), loads the
model and data, trains with `HardPosTrainer`, evaluates and saves; `finetune(argv)` is `main` with the
exit statuses, what `examples/finetune.py` calls under `accelerate launch` / `torchrun` (every process
runs it; the Trainer shares the work). The one seam to the synthetic world is `_demo_run`. Logs read well
in a file: bars become lines (`hf_hardpos.progress`), log entries JSON numbers (`training.log_lines`), and
warnings about settings nobody chose are avoided at their source (pinned memory only with an accelerator,
the image processor's backend named).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import columns, output_folder, progress
from ..errors import UserInputError, first_line
from ._parsers import add_command

if TYPE_CHECKING:  # torch, transformers and datasets load when the command runs, not when it is listed
    from datasets import Dataset

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    # The Trainer's flags are parsed by HfArgumentParser (training.finetune_args), so the command takes
    # everything after its name, --help included, as it is.
    add_command(subparsers, __name__, run, own_arguments=True)


def run(args: argparse.Namespace) -> int:
    return finetune(args.arguments, prog="hardpos train")


def _truncate(dataset: Dataset, limit: int | None) -> Dataset:
    return dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset


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
    builder = load_dataset_builder(
        data_args.dataset, data_args.dataset_config, revision=data_args.dataset_revision
    )
    builder.download_and_prepare()
    identity = {"config": builder.config.name, "split": data_args.train_split,
                "revision": f"commit {builder.hash}" if builder.hash else None}  # fmt: skip
    return builder.as_dataset(split=data_args.train_split), identity, {}


def load_data(data_args, training_args):
    """(train set, {name: eval set}, {name: dataset id}, {name: description}, train identity) of --dataset and
    --eval_datasets; descriptions name data without a Hub id in the model card, the train identity is the
    config, split and revision (Hub commit or data files' sha256) trained on. `--eval_datasets` entries are
    `BenchmarkEvalSet`s of any benchmark."""
    from ..evaluation.training_sets import BenchmarkEvalSet
    from ..training.finetune_args import parse_eval_spec

    train, train_identity, descriptions = _dataset_train(data_args)
    evals: dict = {}
    eval_ids: dict[str, str] = {}
    for spec in data_args.eval_datasets:
        name, path, config, split = parse_eval_spec(spec, data_args.eval_split)
        if name in evals:
            raise UserInputError(
                f"--eval_datasets: two entries are named {name!r}; name one with 'other={spec}'"
            )
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


def check_inputs(model_args, data_args) -> None:
    """Fail in a second, in one line, on a model or dataset that names a missing local folder (`looks_like_path`:
    never sent to the Hub, whose retries take half a minute), and on a --dataset of several configs given
    none (with the list); before any model is loaded."""
    from datasets import get_dataset_config_names

    from ..evaluation.eval_data import require_dataset_exists
    from ..provenance import local_folder_note, looks_like_path
    from ..training.finetune_args import parse_eval_spec

    model = model_args.model_name_or_path
    if model is None:
        raise UserInputError("--model_name_or_path is required (a Hub id or local folder of a CLIP model), or a "
                             "recipe that names one")  # fmt: skip
    if looks_like_path(model) and not Path(model).expanduser().exists():
        raise UserInputError(
            f"--model_name_or_path {model}: no such local folder (a Hub id looks like owner/name)"
        )
    require_dataset_exists(data_args.dataset)
    for spec in data_args.eval_datasets:
        require_dataset_exists(parse_eval_spec(spec, data_args.eval_split)[1])
    if data_args.dataset_config is None:
        try:
            configs = get_dataset_config_names(data_args.dataset, revision=data_args.dataset_revision)
        except Exception as error:  # noqa: BLE001 -- whatever the Hub or the folder says, in one line
            raise UserInputError(f"--dataset {data_args.dataset}: cannot read it ({first_line(error)}); "
                                 f"{local_folder_note(data_args.dataset)}") from None  # fmt: skip
        if len(configs) > 1:
            raise UserInputError(f"--dataset {data_args.dataset} has {len(configs)} configs; pick one with "
                                 f"--dataset_config: {', '.join(configs)}")  # fmt: skip


def _recipe_report(recipe, model_args, data_args, training_args):
    """What the card says about the recipe, with every deviation logged as a warning."""
    from ..training.finetune_args import all_arguments
    from ..training.recipe import batch_layout

    per_device, processes, accumulation = batch_layout(training_args)
    report = recipe.report(all_arguments(model_args, data_args, training_args), per_device=per_device,
                           processes=processes, accumulation=accumulation)  # fmt: skip
    logger.info(
        "recipe %s v%s (%s); global batch %s", recipe.name, recipe.version, recipe.path, report.global_batch
    )
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
    from ..provenance import local_folder_note
    from ..training.card_data import HardPosModelCardData
    from ..training.checkpointing import checkpoint_to_resume
    from ..training.trainer import HardPosTrainer
    from ..training.validation import validate_training_data

    output_folder.refuse_links(training_args.output_dir, "--output_dir")  # the Trainer's saves open names
    resume = checkpoint_to_resume(training_args.output_dir, training_args.resume_from_checkpoint)
    recipe_report = (
        _recipe_report(recipe, model_args, data_args, training_args) if recipe is not None else None
    )
    model_path = model_args.model_name_or_path
    refuse_remote_code(model_path)
    try:
        model = CLIPModel.from_pretrained(model_path, trust_remote_code=False)
        # The backend named, as `hardpos eval` does (`image_processing`): no fallback warning, the same pixels.
        processor = CLIPProcessor.from_pretrained(
            model_path, backend=DEFAULT_IMAGE_BACKEND, trust_remote_code=False
        )
    except OSError as error:  # a Hub id that cannot be reached (or is not there), a folder without a model
        raise UserInputError(f"--model_name_or_path {model_path}: cannot load it ({first_line(error)}); "
                             f"{local_folder_note(model_path)}") from None  # fmt: skip
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
    # "last" / True: the last complete checkpoint (the trainer skips incomplete ones and says so); a rerun into a
    # folder with checkpoints resumes from the last complete one (`checkpoint_to_resume`).
    result = trainer.train(resume_from_checkpoint=resume)
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


# The only flags of the no-argument run (each with its dashed alias); anything else is a fine-tune of one's own.
_DEMO_FLAGS = ("output_dir", "resume_from_checkpoint", "demo_dir")


def _demo_run(argv: list[str], prog: str | None) -> dict[str, float] | None:
    """The seam to the synthetic world: with no --dataset, no model and no arguments file, `hardpos train` is the
    demo's hp+hn fine-tune (`synthetic.finetune.demo_finetune`); its final metrics, or None for any other run."""
    if any(a in ("-h", "--help", "--help-all") or a.endswith((".yaml", ".yml", ".json")) for a in argv):
        return None
    flags = {a.split("=", 1)[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
    if flags & {"dataset", "model_name_or_path"}:
        return None
    parser = argparse.ArgumentParser(prog=prog, add_help=False)
    for name in _DEMO_FLAGS:
        parser.add_argument(
            f"--{name}", f"--{name.replace('_', '-')}", nargs="+" if name == "demo_dir" else None
        )
    known, unknown = parser.parse_known_args(argv)
    if unknown:
        raise UserInputError(f"{' '.join(unknown)}: without --dataset, hardpos train is the demo's hp+hn fine-tune, "
                             "which takes only --output_dir, --resume_from_checkpoint and --demo_dir; a fine-tune "
                             "of your own needs --model_name_or_path and --dataset (see --help)")  # fmt: skip
    from ..synthetic.finetune import DEFAULT_OUTPUT_DIR, demo_finetune, flat_metrics

    bars = sys.stderr.isatty()
    with progress.configure(enabled=bars):
        result = demo_finetune(known.output_dir or DEFAULT_OUTPUT_DIR, demo_dirs=known.demo_dir,
                               resume_from_checkpoint=known.resume_from_checkpoint, progress=bars)  # fmt: skip
    return flat_metrics(result.metrics)


def main(argv: list[str] | None = None, prog: str | None = None) -> dict[str, float]:
    """Parse `argv` (default: `sys.argv[1:]`), fine-tune, evaluate and save; the metrics of the final model.

    Off a terminal, progress bars become lines (`hf_hardpos.progress.configure`) for the whole run.
    """
    from ..training.finetune_args import parse_arguments

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    argv = sys.argv[1:] if argv is None else list(argv)
    demo = _demo_run(argv, prog)
    if demo is not None:
        return demo
    model_args, data_args, training_args, recipe = parse_arguments(argv, prog)
    if not training_args.should_log:
        logging.getLogger().setLevel(logging.WARNING)
    check_inputs(model_args, data_args)
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
