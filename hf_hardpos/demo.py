"""The embedded experiment: the paper's Table 1 / Table 3 in miniature, on the synthetic world.

Why it exists: the package's main job must run with no downloads on a laptop CPU. This module runs
the whole pipeline for real, with the same code a user runs on COCO and Visual Genome:

1. build a tiny CLIP and an offline tokenizer for the world's vocabulary (`build_tiny_clip`);
2. pretrain it contrastively on synthetic image-caption pairs (`HardPosTrainer`, CLIP loss only).
   This model plays the part of the public CLIP checkpoint: every fine-tune starts from it. The
   pairs come in groups of the same two objects in different relations, batched together, because
   from independent random scenes the tiny CLIP never needs, and never learns, where objects are;
3. for each seed, fine-tune one copy per variant on a synthetic fine-tuning set in the COCO schema:
   `contrastive` (CLIP loss only), `hn` (hard negatives only), `hp+hn` (hard positives and negatives)
   and, for paper Table 3, `hn_weight=w` (HP weight 1, HN weight w). `hn_weight=1` is the `hp+hn`
   configuration, so it is that run, not a second identical one;
4. evaluate each model on synthetic REPLACE (attributes, relations) and SWAP with the package's
   evaluator, average over seeds, print the table, write `results.json`, `run_info.json`, a
   Markdown table and a PNG chart.

Seeds vary the fine-tuning data sample and order; the evaluation sets are fixed (`EVAL_SEED`) so
variants and seeds are compared on the same rows. Nothing here looks at the outcome: the world, the
budgets and the learning rates are fixed in `DemoConfig`, and the numbers are what they are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from transformers import PrinterCallback, ProgressCallback

from hf_hardpos.synthetic import report

# The evaluation sets are drawn once with this seed, whatever the training seeds are.
EVAL_SEED = 1000


@dataclass(frozen=True)
class Variant:
    """A fine-tuning recipe: the weights of the hard-negative and hard-positive loss terms."""

    name: str
    hard_negative_weight: float
    hard_positive_weight: float


MAIN_VARIANTS = (
    Variant("contrastive", 0.0, 0.0),
    Variant("hn", 1.0, 0.0),
    Variant("hp+hn", 1.0, 1.0),
)
SWEEP_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # paper Table 3: HN weight swept, HP weight fixed at 1
PRETRAINED = "pretrained"


def sweep_variant(weight: float) -> Variant:
    return Variant(f"hn_weight={weight:g}", weight, 1.0)


@dataclass
class DemoConfig:
    """Every knob of the demo; the defaults fit 2 CPU cores in under 10 minutes."""

    seeds: tuple[int, ...] = (0, 1, 2)
    sweep: bool = True
    pretrain_seed: int = 0
    pretrain_examples: int = 20_000
    # Chosen by the *pretrained* model's own accuracy and the runtime only (never by a fine-tuned
    # variant): with independent scenes (2, 8 or 12 epochs) the tiny CLIP stayed at chance on REPLACE
    # relations; relation groups (below) with 12 epochs reached ~63%, with 16 epochs ~75%.
    pretrain_epochs: float = 16.0
    pretrain_learning_rate: float = 2e-3
    pretrain_batch_size: int = 128
    # Rows per group of relation-contrasting pretraining scenes (`world.sample_pretrain_groups`):
    # contrastive pretraining learns only what its in-batch negatives demand, and random batches
    # almost never hold two images that differ only in the relation. 1 = independent scenes.
    # Groups are batched whole, so the pretraining batch size must be a multiple of this.
    pretrain_relation_group_size: int = 4
    finetune_examples: int = 3_000
    finetune_epochs: float = 5.0  # the paper's fine-tuning recipe: 5 epochs
    finetune_learning_rate: float = 5e-4
    eval_examples: int = 500  # per eval set: REPLACE attributes, REPLACE relations, SWAP
    batch_size: int = 128
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    image_size: int = 32
    patch_size: int = 8
    hidden_size: int = 64
    projection_dim: int = 32
    num_layers: int = 2

    @classmethod
    def quick(cls, seeds: tuple[int, ...] = (0,)) -> DemoConfig:
        """A smoke-test configuration (well under a minute): same pipeline, tiny budgets."""
        return cls(
            seeds=seeds,
            pretrain_examples=512,
            pretrain_epochs=1.0,
            finetune_examples=128,
            finetune_epochs=1.0,
            eval_examples=64,
            batch_size=64,
            pretrain_batch_size=64,
        )

    def variants(self) -> list[Variant]:
        """Distinct fine-tuning runs per seed (the sweep's weight-1 entry is `hp+hn` itself)."""
        runs = list(MAIN_VARIANTS)
        if self.sweep:
            runs += [sweep_variant(w) for w in SWEEP_WEIGHTS if (w, 1.0) not in _main_weights()]
        return runs

    def aliases(self) -> dict[str, str]:
        """Sweep entries that are the same configuration as a main variant (name -> run name)."""
        if not self.sweep:
            return {}
        by_weights = {(v.hard_negative_weight, v.hard_positive_weight): v.name for v in MAIN_VARIANTS}
        return {sweep_variant(w).name: by_weights[(w, 1.0)] for w in SWEEP_WEIGHTS if (w, 1.0) in by_weights}


def _main_weights() -> set[tuple[float, float]]:
    return {(v.hard_negative_weight, v.hard_positive_weight) for v in MAIN_VARIANTS}


@dataclass
class DemoResult:
    """What `run_demo` measured: per-variant, per-dataset metrics (mean over seeds) and the raw runs."""

    results: dict[str, dict[str, dict[str, float]]]
    per_seed: dict[str, dict[int, dict[str, dict[str, float]]]]
    timings: dict[str, float] = field(default_factory=dict)
    config: DemoConfig = field(default_factory=DemoConfig)
    output_dir: Path | None = None


def run_demo(
    output_dir: str | Path,
    config: DemoConfig | None = None,
    *,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> DemoResult:
    """Pretrain, fine-tune every variant for every seed, evaluate, and write the reports to `output_dir`."""
    config = config or DemoConfig()
    if not config.seeds:
        raise ValueError("DemoConfig.seeds is empty: give at least one seed")
    if config.pretrain_batch_size % config.pretrain_relation_group_size:
        raise ValueError(
            f"DemoConfig.pretrain_batch_size ({config.pretrain_batch_size}) must be a multiple of "
            f"pretrain_relation_group_size ({config.pretrain_relation_group_size}) so no group is split across batches"
        )
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    start = time.perf_counter()

    with _quiet_libraries(), _timed(timings, "data"):
        from hf_hardpos.synthetic import world

        eval_sets = make_eval_sets(config.eval_examples, config.image_size)
        pretrain_set = world.make_pretrain_dataset(
            config.pretrain_examples,
            config.pretrain_seed,
            image_size=config.image_size,
            relation_group_size=config.pretrain_relation_group_size,
        )
    log(
        f"synthetic world: {len(pretrain_set)} pretraining pairs, {config.finetune_examples} fine-tuning rows per "
        f"seed, eval sets of {config.eval_examples} rows ({timings['data']:.1f} s)"
    )

    with _quiet_libraries(), _timed(timings, "pretrain"):
        pretrained_dir = _pretrain(output_dir / "models", pretrain_set, config, progress)
    per_seed: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    with _quiet_libraries(), _timed(timings, "evaluate pretrained"):
        model, processor = _load(pretrained_dir)
        per_seed[PRETRAINED] = {config.pretrain_seed: evaluate_on_world(model, processor, eval_sets)}
    log(f"pretrained tiny CLIP in {timings['pretrain']:.1f} s: {_headline(per_seed[PRETRAINED][config.pretrain_seed])}")

    for seed in config.seeds:
        with _quiet_libraries():
            finetune_set = world.make_finetune_dataset(config.finetune_examples, seed, image_size=config.image_size)
        for variant in config.variants():
            began = time.perf_counter()
            with _quiet_libraries():
                model = _finetune(pretrained_dir, variant, finetune_set, seed, output_dir, config, progress)
                per_seed.setdefault(variant.name, {})[seed] = evaluate_on_world(model, processor, eval_sets)
            seconds = time.perf_counter() - began
            timings[f"{variant.name} seed {seed}"] = seconds
            log(f"seed {seed} {variant.name:<16} {seconds:6.1f} s  {_headline(per_seed[variant.name][seed])}")
    for alias, name in config.aliases().items():
        per_seed[alias] = per_seed[name]

    timings["total"] = time.perf_counter() - start
    result = DemoResult(
        results={variant: report.mean_over_seeds(runs) for variant, runs in per_seed.items()},
        per_seed=per_seed,
        timings=timings,
        config=config,
        output_dir=output_dir,
    )
    _write(result)
    log(report.format_tables(result.results, result.per_seed, config.seeds, config.eval_examples))
    log(f"total {timings['total']:.1f} s; wrote {output_dir / 'results.json'}, {output_dir / report.CHART_NAME}")
    return result


def _pretrain(models_dir: Path, dataset, config: DemoConfig, progress: bool) -> Path:
    """Build the tiny CLIP and train it with the CLIP loss only; save it as a Hub-style folder."""
    from transformers import CLIPModel, CLIPProcessor

    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
    from hf_hardpos.synthetic.world import tokenizer_corpus

    init_dir = build_tiny_clip(
        models_dir / "init",
        tokenizer_corpus(),
        image_size=config.image_size,
        patch_size=config.patch_size,
        hidden_size=config.hidden_size,
        projection_dim=config.projection_dim,
        num_layers=config.num_layers,
        seed=config.pretrain_seed,
    )
    model, processor = CLIPModel.from_pretrained(init_dir), CLIPProcessor.from_pretrained(init_dir)
    trainer = _trainer(
        model,
        processor,
        dataset,
        Variant(PRETRAINED, 0.0, 0.0),
        seed=config.pretrain_seed,
        epochs=config.pretrain_epochs,
        learning_rate=config.pretrain_learning_rate,
        batch_size=config.pretrain_batch_size,
        # Groups of relation-contrasting rows must stay together in a batch: the data is already in
        # a random order of groups, so read it in order rather than reshuffling rows apart.
        in_order=config.pretrain_relation_group_size > 1,
        output_dir=models_dir / PRETRAINED,
        config=config,
        progress=progress,
    )
    trainer.train()
    trainer.save_model(str(models_dir / PRETRAINED))
    return models_dir / PRETRAINED


def _finetune(
    pretrained_dir: Path,
    variant: Variant,
    dataset,
    seed: int,
    output_dir: Path,
    config: DemoConfig,
    progress: bool,
):
    """Fine-tune a fresh copy of the pretrained model with `variant`'s loss weights; return the model."""
    model, processor = _load(pretrained_dir)
    trainer = _trainer(
        model,
        processor,
        dataset,
        variant,
        seed=seed,
        epochs=config.finetune_epochs,
        learning_rate=config.finetune_learning_rate,
        batch_size=config.batch_size,
        output_dir=output_dir / "models" / variant.name / f"seed-{seed}",
        config=config,
        progress=progress,
    )
    trainer.train()
    trainer.save_model(str(trainer.args.output_dir))
    return trainer.model


def _trainer(
    model,
    processor,
    dataset,
    variant: Variant,
    *,
    seed: int,
    epochs: float,
    learning_rate: float,
    batch_size: int,
    output_dir: Path,
    config: DemoConfig,
    in_order: bool = False,
    progress: bool,
):
    """A `HardPosTrainer` for one run: only the caption columns the variant's loss reads are batched."""
    import torch

    from hf_hardpos import columns
    from hf_hardpos.training import HardPosTrainer, HardPosTrainingArguments

    uses_negatives = variant.hard_negative_weight > 0
    uses_positives = variant.hard_positive_weight > 0
    negative_columns = list(columns.FINETUNE_NEGATIVE_COLUMNS) if uses_negatives else []
    args = HardPosTrainingArguments(
        output_dir=str(output_dir),
        hard_negative_weight=variant.hard_negative_weight,
        hard_positive_weight=variant.hard_positive_weight,
        positive_columns=list(columns.FINETUNE_POSITIVE_COLUMNS) if uses_positives else [],
        negative_columns=negative_columns,
        per_device_train_batch_size=batch_size,
        train_sampling_strategy="sequential" if in_order else "random",
        num_train_epochs=epochs,
        learning_rate=learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_ratio,
        lr_scheduler_type="cosine",
        seed=seed,
        save_strategy="no",
        report_to="none",
        logging_steps=0.25,
        disable_tqdm=not progress,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    trainer = HardPosTrainer(model=model, args=args, train_dataset=dataset, processor=processor)
    # The demo prints one line per run; the Trainer's per-log dict lines would drown it.
    trainer.remove_callback(PrinterCallback)
    if progress:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(_BarOnlyProgressCallback())
    return trainer


class _BarOnlyProgressCallback(ProgressCallback):
    """The Trainer's progress bar without its printed log dicts (the loss terms stay in `log_history`)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


def _load(folder: Path):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(folder), CLIPProcessor.from_pretrained(folder)


def make_eval_sets(examples: int, image_size: int = 32) -> dict:
    """The fixed synthetic REPLACE (two subsets) and SWAP sets every model is evaluated on."""
    from hf_hardpos.synthetic import world

    return {
        "replace_attributes": world.make_replace_dataset(examples, EVAL_SEED, "attributes", image_size=image_size),
        "replace_relations": world.make_replace_dataset(examples, EVAL_SEED, "relations", image_size=image_size),
        "swap": world.make_swap_dataset(examples, EVAL_SEED, image_size=image_size),
    }


def evaluate_on_world(model, processor, eval_sets: dict) -> dict[str, dict[str, float]]:
    """Metrics on each eval set plus the paper's REPLACE column (mean of the two subsets)."""
    from hf_hardpos.evaluation import REPLACE_AGGREGATE, add_replace_aggregate, evaluate_dataset

    model.eval()
    raw = {
        name: evaluate_dataset(model, processor, dataset, batch_size=256, progress=False)
        for name, dataset in eval_sets.items()
    }
    subsets = {"attributes": raw["replace_attributes"], "relations": raw["replace_relations"]}
    raw["replace"] = add_replace_aggregate(subsets)[REPLACE_AGGREGATE]
    return {name: report.rename_metrics(raw[name]) for name in report.DATASETS}


def _headline(metrics: dict[str, dict[str, float]]) -> str:
    return "  ".join(
        f"{name.upper()} orig {100 * metrics[name]['orig_acc']:.1f} aug {100 * metrics[name]['aug_acc']:.1f} "
        f"brittle {100 * metrics[name]['brittleness']:.1f}"
        for name in ("replace", "swap")
    )


def _write(result: DemoResult) -> None:
    assert result.output_dir is not None
    out = result.output_dir
    (out / "results.json").write_text(json.dumps(result.results, indent=2) + "\n")
    info = {
        "config": dataclasses.asdict(result.config),
        "eval_seed": EVAL_SEED,
        "aggregation": {
            "replace": "unweighted mean of replace_attributes and replace_relations (the paper's REPLACE)",
            "seeds": "each metric is the mean over seeds; <metric>_std is the sample standard deviation",
        },
        "aliases": result.config.aliases(),
        "per_seed": {v: {str(s): m for s, m in runs.items()} for v, runs in result.per_seed.items()},
        "timings_seconds": {k: round(v, 2) for k, v in result.timings.items()},
    }
    (out / "run_info.json").write_text(json.dumps(info, indent=2) + "\n")
    tables = report.format_tables(
        result.results, result.per_seed, result.config.seeds, result.config.eval_examples, markdown=True
    )
    (out / "results.md").write_text(tables + "\n")
    report.plot_results(result.results, out / report.CHART_NAME, result.config.seeds)


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    began = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - began


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Silence library chatter (PIL image-processor fallback, weight-loading reports) for a readable log."""
    import transformers

    previous = transformers.logging.get_verbosity()
    datasets_logger = logging.getLogger("datasets")
    previous_datasets = datasets_logger.level
    bars_were_on = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # "Loading weights", "Writing model shards"
    datasets_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        transformers.logging.set_verbosity(previous)
        if bars_were_on:
            transformers.utils.logging.enable_progress_bar()
        datasets_logger.setLevel(previous_datasets)


__all__ = [
    "DemoConfig",
    "DemoResult",
    "MAIN_VARIANTS",
    "SWEEP_WEIGHTS",
    "Variant",
    "evaluate_on_world",
    "make_eval_sets",
    "run_demo",
]

