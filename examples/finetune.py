#!/usr/bin/env python
"""Fine-tune CLIP with hard positives and hard negatives (Kamath et al. 2024; CE-CLIP losses optional).

Three ways to run it:

    # No arguments: a small real fine-tune on the embedded synthetic world, on CPU, in a few minutes.
    # A tiny CLIP is built offline; the synthetic REPLACE/SWAP sets are evaluated after every epoch.
    accelerate launch examples/finetune.py

    # The paper's recipe: CLIP ViT-B/32 on COCO with one hard positive and one hard negative per
    # caption, 5 epochs, HN and HP weights 1 (any TrainingArguments flag can be added).
    accelerate launch examples/finetune.py --model_name_or_path openai/clip-vit-base-patch32 \\
        --dataset hardpos/coco --eval_datasets hardpos/replace:attributes hardpos/replace:relations hardpos/swap \\
        --output_dir clip-hardpos --per_device_train_batch_size 128 --dataloader_num_workers 8

    # One JSON/YAML file holding any of the flags below.
    python examples/finetune.py recipe.yaml

Defaults depend on the data: without `--dataset` the synthetic demo's settings apply
(`SYNTHETIC_DEFAULTS`), with it the paper's (`PAPER_RECIPE`); flags given explicitly always win.
Standard Trainer flags work: --output_dir, --max_steps, --per_device_train_batch_size,
--resume_from_checkpoint, --push_to_hub, --use_lora, ...
Two CPU processes: `torchrun --nproc_per_node 2 examples/finetune.py --use_cpu ...`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from datasets import Dataset, load_dataset
from transformers import CLIPModel, CLIPProcessor, HfArgumentParser
from transformers.trainer_utils import get_last_checkpoint

from hf_hardpos import columns
from hf_hardpos.training import HardPosModelCardData, HardPosTrainer, HardPosTrainingArguments

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
# The paper's recipe (SPEC section 5): 5 epochs, hard-negative and hard-positive weights 1 (the
# HardPosTrainingArguments defaults). Everything else is a TrainingArguments default unless given.
PAPER_RECIPE = {
    "num_train_epochs": 5,
    # not part of the recipe: how often to log/evaluate/save, and the scoring batch (no effect on results)
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
    train_split: str = field(default="train", metadata={"help": "Split of --dataset to train on."})
    eval_datasets: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Eval sets with c/c_n/c_p columns, each '[name=]path[:config[:split]]', e.g. "
            "hardpos/replace:attributes hardpos/swap. Default without --dataset: the synthetic REPLACE "
            "(attributes, relations) and SWAP sets."
        },
    )
    eval_split: str = field(default="test", metadata={"help": "Split used when an eval set names none."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Truncate the training set."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Truncate each eval set."})
    synthetic_train_size: int = field(default=2048, metadata={"help": "Rows of the synthetic training set."})
    synthetic_eval_size: int = field(default=256, metadata={"help": "Rows of each synthetic eval set."})
    synthetic_seed: int = field(default=0, metadata={"help": "Seed of the synthetic world."})


def recipe_defaults(dataset: str | None) -> dict:
    return dict(PAPER_RECIPE) if dataset else dict(SYNTHETIC_DEFAULTS)


def parse_arguments(argv: list[str] | None = None):
    """CLI flags, or a single .json/.yaml file; the mode's defaults fill what is not given."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = HfArgumentParser((ModelArguments, DataArguments, HardPosTrainingArguments))
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        text = Path(argv[0]).read_text(encoding="utf-8")
        config = json.loads(text) if argv[0].endswith(".json") else yaml.safe_load(text)
        if not isinstance(config, dict):
            raise ValueError(f"{argv[0]} must hold a mapping of argument names to values")
        return parser.parse_dict({**recipe_defaults(config.get("dataset")), **config})
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--dataset", default=None)
    known, _ = peek.parse_known_args(argv)
    parser.set_defaults(**recipe_defaults(known.dataset))
    return parser.parse_args_into_dataclasses(args=argv)


def _check_columns(dataset: Dataset, needed: list[str], what: str) -> None:
    missing = [c for c in needed if c not in dataset.column_names]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}; it has {dataset.column_names}")


def _truncate(dataset: Dataset, limit: int | None) -> Dataset:
    return dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset


def parse_eval_spec(spec: str, default_split: str) -> tuple[str, str, str | None, str]:
    """'[name=]path[:config[:split]]' -> (name, path, config, split)."""
    name, _, rest = spec.rpartition("=")
    path, config, split = (rest.split(":") + [None, None])[:3]
    if not path:
        raise ValueError(f"bad eval set {spec!r}: expected '[name=]path[:config[:split]]'")
    name = name or config or Path(path).name
    return name, path, config or None, split or default_split


def load_data(data_args: DataArguments, training_args: HardPosTrainingArguments):
    """(train set, {name: eval set}, {name: dataset id}, {name: description}) for the synthetic world or
    the Hub/local paths; descriptions name data without a Hub id in the model card."""
    eval_ids: dict[str, str] = {}
    descriptions: dict[str, str] = {}
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
        train = load_dataset(data_args.dataset, data_args.dataset_config, split=data_args.train_split)
        evals = {}
    for spec in data_args.eval_datasets:
        name, path, config, split = parse_eval_spec(spec, data_args.eval_split)
        evals[name] = load_dataset(path, config, split=split)
        eval_ids[name] = path
    train = _truncate(train, data_args.max_train_samples)
    needed = [training_args.image_column, training_args.caption_column]
    _check_columns(train, needed + training_args.positive_columns + training_args.negative_columns, "the training set")
    for name, dataset in evals.items():
        evals[name] = _truncate(dataset, data_args.max_eval_samples)
        _check_columns(evals[name], [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], f"eval set {name!r}")
    return train, evals, eval_ids, descriptions


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
    model_args, data_args, training_args = parse_arguments(argv)
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO if training_args.should_log else logging.WARNING,
    )
    if data_args.dataset is None:
        logger.info("no --dataset: fine-tuning on the synthetic world (%d rows)", data_args.synthetic_train_size)

    model_path = load_model(model_args, training_args)
    model = CLIPModel.from_pretrained(model_path)
    processor = CLIPProcessor.from_pretrained(model_path)
    train, evals, eval_ids, descriptions = load_data(data_args, training_args)

    card_data = HardPosModelCardData(
        base_model=model_args.model_name_or_path,
        train_dataset_id=data_args.dataset,
        eval_dataset_ids=eval_ids,
        train_dataset_description=descriptions.pop("train", None),
        eval_dataset_descriptions=descriptions,
    )
    trainer = HardPosTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_datasets=evals,
        processor=processor,
        model_card_data=card_data,
    )

    checkpoint = training_args.resume_from_checkpoint
    if checkpoint in ("True", "true", "last"):
        checkpoint = get_last_checkpoint(training_args.output_dir)
        if checkpoint is None:
            raise ValueError(f"--resume_from_checkpoint: no checkpoint in {training_args.output_dir}")
    result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.log_metrics("train", result.metrics)

    metrics = dict(result.metrics)
    if evals:  # the final model's metrics, which go into the card; reused if the last step was evaluated
        step = trainer.state.global_step
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


if __name__ == "__main__":
    main()
