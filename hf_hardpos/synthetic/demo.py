"""The embedded experiment: the paper's Table 1 / Table 3 in miniature, on the synthetic world.

Why it exists: the package's main job must run with no downloads on a laptop CPU. This module runs
the whole pipeline for real, with the same code a user runs on COCO and Visual Genome:

1. build a tiny CLIP and an offline tokenizer for the world's vocabulary (`build_tiny_clip`);
2. pretrain it contrastively (`HardPosTrainer`, CLIP loss only) on scenes paired with alt-text
   style captions (`captions.AltTextStyle`): under-specified, relations rarely said. This model
   plays the part of the public CLIP checkpoint, weak on compositional distinctions for the same
   reason; every fine-tune starts from it. It is cached under the output folder;
3. for each seed, fine-tune one copy per variant on precise captions with hard negatives and hard
   positives (the COCO schema): `contrastive` (CLIP loss only), `hn` (hard negatives only),
   `hp+hn` and, with the sweep, paper Table 3's `hn_weight=w` (HP weight 1, HN weight w;
   `hn_weight=1` *is* the `hp+hn` run, reported under both names). The runs are independent: on a
   Linux CPU they go one per core, each in a forked process (`forked_runs`), with the same numbers;
4. evaluate each model on synthetic REPLACE (attributes, relations) and SWAP with the package's
   scorer and metrics, aggregate over seeds, print the tables and the paper's controlled
   comparisons (`findings`: hp+hn vs hn, hn vs contrastive), write `results.json`,
   `run_info.json`, `results.md` and (with matplotlib) `results.png`; then `compare.md` and
   `report.html` through the package's own suite, compare and report (`run_report`).

Seeds vary the fine-tuning data sample and order; the evaluation sets are fixed (`EVAL_SEED`) so
variants and seeds are compared on the same rows. Nothing here looks at the outcome: the world, the
budgets and the learning rates are fixed in `DemoConfig`, and the numbers are what they are.
Determinism: on one machine with the same versions and thread count, a rerun gives byte-identical
`results.json` (torch's thread count is fixed by `DemoConfig.torch_threads` because CPU reductions
may sum in a different order with another count).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from transformers import ProgressCallback

from hf_hardpos.synthetic import findings, report, world
from hf_hardpos.synthetic.forked_runs import background, run_all, worker_count
from hf_hardpos.synthetic.run_report import write_run_report
from hf_hardpos.synthetic.runtime import quiet_libraries, torch_threads
from hf_hardpos.synthetic.stage_log import StageLog, TrainingLines
from hf_hardpos.synthetic.world_eval import (
    EVAL_SEED,
    evaluate_on_world,
    headline,
    image_groups,
    make_eval_sets,
)
from hf_hardpos.training.log_lines import LogLinesCallback

PRETRAINED = "pretrained"
PRETRAIN_KEY_FILE = "pretrain_key.json"


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


def sweep_variant(weight: float) -> Variant:
    return Variant(f"hn_weight={weight:g}", weight, 1.0)


# The tiny CLIP's architecture (keyword arguments of `build_tiny_clip`).
_MODEL_FIELDS = ("image_size", "patch_size", "hidden_size", "projection_dim", "num_layers")
# The modules whose source decides what the pretrained model sees and is (`world_digest`).
_WORLD_MODULES = ("captions", "lexicon", "scene", "tiny_clip", "world")
# Settings the pretrained model depends on; a cached one is reused only when all of them match.
_PRETRAIN_FIELDS = (
    "pretrain_seed", "pretrain_examples", "pretrain_epochs", "pretrain_learning_rate", "pretrain_batch_size",
    "weight_decay", "warmup_ratio", *_MODEL_FIELDS, "torch_threads",
)


@dataclass
class DemoConfig:
    """Every knob of the demo. The defaults are `hardpos demo`: under two minutes on 2 CPU cores.

    The budgets were set by runtime, then checked against the finding on several seed pairs at once
    (`benchmarks/demo_budgets.py`); no seed was tuned for. The pretraining *distribution* is fixed in
    `captions.AltTextStyle`, never by a fine-tuning result.
    """

    seeds: tuple[int, ...] = (0, 1)
    sweep: bool = False
    bootstrap_samples: int = 0  # > 0: bootstrap intervals over images (see `report.add_intervals`)
    pretrain_seed: int = 0
    pretrain_examples: int = 8_000
    pretrain_epochs: float = 5.0
    pretrain_learning_rate: float = 2e-3
    pretrain_batch_size: int = 128
    finetune_examples: int = 2_048
    finetune_epochs: float = 5.0  # the paper's fine-tuning recipe: 5 epochs
    finetune_learning_rate: float = 2e-3
    eval_examples: int = 300  # per eval set: REPLACE attributes, REPLACE relations, SWAP
    batch_size: int = 128
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    image_size: int = 32
    patch_size: int = 8
    hidden_size: int = 64
    projection_dim: int = 32
    num_layers: int = 2
    # Tiny matrices: one thread is as fast as two on 2 cores and leaves the other core to the data
    # pipeline; fixed so that reruns sum in the same order (determinism).
    torch_threads: int = 1
    # Batches (PNG decoding, image processing, tokenising) are built in this many worker processes,
    # in parallel with the training step on the other core; 0 = in the training process.
    dataloader_workers: int = 1
    # Fine-tunes run at a time, each in a forked process with one torch thread (`forked_runs`): None = one per
    # usable core; 1 = one after another in this process (the only choice with an accelerator). Same numbers.
    processes: int | None = None

    @classmethod
    def full(cls, seeds: tuple[int, ...] = (0, 1, 2, 3, 4)) -> DemoConfig:
        """`hardpos demo --full`: 5 seeds, the HN-weight sweep, larger eval sets, bootstrap intervals."""
        return cls(seeds=seeds, sweep=True, eval_examples=1_000, bootstrap_samples=1_000)

    @classmethod
    def quick(cls, seeds: tuple[int, ...] = (0,)) -> DemoConfig:
        """A smoke-test configuration (seconds): the same pipeline with tiny budgets, for tests."""
        return cls(
            seeds=seeds,
            pretrain_examples=256,
            pretrain_epochs=1.0,
            pretrain_batch_size=64,
            finetune_examples=64,
            finetune_epochs=1.0,
            eval_examples=48,
            batch_size=32,
            dataloader_workers=0,  # a worker process costs more than it saves on 2-step runs
        )

    def variants(self) -> list[Variant]:
        """Distinct fine-tuning runs per seed (a sweep entry equal to a main variant is not run twice)."""
        runs = list(MAIN_VARIANTS)
        if self.sweep:
            main = {(v.hard_negative_weight, v.hard_positive_weight) for v in MAIN_VARIANTS}
            runs += [sweep_variant(w) for w in SWEEP_WEIGHTS if (w, 1.0) not in main]
        return runs

    def aliases(self) -> dict[str, str]:
        """Sweep entries that are the same configuration as a main variant (name -> run name)."""
        if not self.sweep:
            return {}
        by_weights = {(v.hard_negative_weight, v.hard_positive_weight): v.name for v in MAIN_VARIANTS}
        return {sweep_variant(w).name: by_weights[(w, 1.0)] for w in SWEEP_WEIGHTS if (w, 1.0) in by_weights}

    def pretrain_settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _PRETRAIN_FIELDS}

    def schedule(self, pretraining: bool) -> tuple[float, float, int]:
        """(epochs, learning rate, batch size) of the pretraining run, or of each fine-tuning run."""
        if pretraining:
            return self.pretrain_epochs, self.pretrain_learning_rate, self.pretrain_batch_size
        return self.finetune_epochs, self.finetune_learning_rate, self.batch_size


@dataclass
class DemoResult:
    """What `run_demo` measured: per-variant, per-dataset metrics (over seeds) and the raw runs."""

    results: dict[str, dict[str, dict[str, float]]]
    per_seed: dict[str, dict[int, dict[str, dict[str, float]]]]
    timings: dict[str, float] = field(default_factory=dict)
    config: DemoConfig = field(default_factory=DemoConfig)
    output_dir: Path | None = None
    chart: Path | None = None
    comparisons: list[dict] = field(default_factory=list)  # `findings.compare`: the paper's controlled comparisons
    fine_tune_workers: int = 1  # fine-tunes that ran at a time (`forked_runs.worker_count`)


def run_demo(
    output_dir: str | Path,
    config: DemoConfig | None = None,
    *,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
) -> DemoResult:
    """Pretrain (or reuse the cached pretrained model), fine-tune every variant for every seed, evaluate, report.

    `progress`: tqdm bars for the training runs; None = only when stdout is a terminal. Either way
    each stage prints one line, so a log file stays readable.
    """
    config = config or DemoConfig()
    if not config.seeds:
        raise ValueError("DemoConfig.seeds is empty: give at least one seed")
    if progress is None:
        progress = sys.stdout.isatty()
    log = StageLog(log, enabled=not progress)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    wall, cpu = time.perf_counter(), time.process_time()

    runs = [(seed, variant) for seed in config.seeds for variant in config.variants()]
    workers = worker_count(config.processes, len(runs), config.torch_threads)
    with torch_threads(config.torch_threads), quiet_libraries():
        # Where fine-tunes are forked (`forked_runs`), a forked process renders the second half of the pretraining
        # rows while this one renders the first, then builds the eval and fine-tuning sets while pretraining runs;
        # else all here, in that order. Either way the same rows. `timings["data"]` is this process's time on the
        # eval and fine-tuning sets: submitting and waiting for them, or building them.
        with background(forked=workers > 1) as submit:
            second_half = None
            if workers > 1 and _cached_pretrained(output_dir / "models", config) is None:
                n = config.pretrain_examples
                second_half = submit(world.render_rows, "pretrain", n, config.pretrain_seed, image_size=config.image_size,
                                     start=n // 2)  # fmt: skip
            with _timed(timings, "data"), log.stage("data"):
                eval_sets_later = submit(make_eval_sets, config.eval_examples, config.image_size)
                finetune_sets_later = {
                    seed: submit(world.render_rows, "finetune", config.finetune_examples, seed, image_size=config.image_size)
                    for seed in config.seeds
                }
            with _timed(timings, "pretrain"), log.stage("pretrain"):
                pretrained_dir, reused = _pretrained_model(output_dir / "models", config, progress, log, second_half)
            log(
                f"[pretrain] {'reused the cached' if reused else 'trained the'} tiny CLIP at {pretrained_dir} "
                f"({timings['pretrain']:.1f} s)"
            )
            with _timed(timings, "data"), log.stage("data"):
                eval_sets = eval_sets_later.result()
                finetune_sets = {seed: later.result() for seed, later in finetune_sets_later.items()}
        log(
            f"[data] synthetic eval sets: REPLACE attributes, REPLACE relations, SWAP, {config.eval_examples} rows each "
            f"(seed {EVAL_SEED}); fine-tuning sets of {config.finetune_examples} rows for seeds "
            f"{' '.join(map(str, config.seeds))}: {timings['data']:.1f} s on this process's clock"
            + (" (built in a forked process while pretraining ran)" if workers > 1 else "")
        )
        per_seed: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
        outcomes: dict[str, dict[int, dict[str, dict[str, np.ndarray]]]] = {}
        with _timed(timings, "evaluate pretrained"), log.stage("evaluate"):
            metrics, rows = evaluate_on_world(*_load(pretrained_dir), eval_sets)
        per_seed[PRETRAINED], outcomes[PRETRAINED] = {config.pretrain_seed: metrics}, {config.pretrain_seed: rows}
        log(f"[evaluate] {PRETRAINED:<16} {headline(metrics)}")

        _fine_tune_all(runs, workers, pretrained_dir, eval_sets, finetune_sets, output_dir, config, progress, log,
                       timings, per_seed, outcomes)
    for alias, name in config.aliases().items():
        per_seed[alias], outcomes[alias] = per_seed[name], outcomes[name]

    results = {variant: report.mean_over_seeds(runs) for variant, runs in per_seed.items()}
    groups = image_groups(eval_sets)
    if config.bootstrap_samples:
        for variant, summary in results.items():
            report.add_intervals(summary, outcomes[variant], groups, config.bootstrap_samples)
    comparisons = findings.compare(results, outcomes, groups)
    timings["total"] = time.perf_counter() - wall
    timings["total_cpu"] = time.process_time() - cpu
    result = DemoResult(results, per_seed, timings, config, output_dir, comparisons=comparisons, fine_tune_workers=workers)
    # The report pages are written in a forked process while this one writes the results, where forks are safe
    # (else here, first).
    with background(forked=workers > 1) as submit:
        with log.stage("report"):
            report_later = submit(_run_report, output_dir, eval_sets, config.seeds[0], config.torch_threads, result.results)
        _write(result, log)
        log(_tables(result, markdown=False))
        with log.stage("report"):
            report_files, report_lines = report_later.result()
    for line in report_lines:
        log(line)
    written = ["results.json", "results.md", "run_info.json"] + ([report.CHART_NAME] if result.chart else [])
    written += report_files
    log(
        f"total {timings['total']:.1f} s wall, {timings['total_cpu']:.1f} s CPU (this process); "
        f"wrote {', '.join(written)} to {output_dir}"
    )
    return result


def _run_report(output_dir: Path, eval_sets: dict, seed: int, threads: int, results: dict) -> tuple[list[str], list[str]]:
    """`write_run_report` of seed `seed`'s models, with every variant's spread over seeds (`results`): (the files
    written, its log lines, to be printed by the caller)."""
    lines: list[str] = []
    return write_run_report(output_dir, eval_sets, seed, EVAL_SEED, threads, lines.append, results), lines


def _fine_tune_all(runs: list[tuple[int, Variant]], workers: int, pretrained_dir: Path, eval_sets: dict,
                   finetune_sets: dict, output_dir: Path, config: DemoConfig, progress: bool, log: StageLog,
                   timings: dict[str, float], per_seed: dict, outcomes: dict) -> None:
    """Fine-tune each (seed, variant) of `runs` from the pretrained model and evaluate it, `workers` at a time
    (`forked_runs`); record its metrics in `per_seed`, its per-row outcomes in `outcomes` and its time in
    `timings` (variant -> seed -> ...).

    Whatever order the runs end in, the records are kept in the order of `runs`, so `results.json` and
    `run_info.json` do not depend on the number of processes.
    """
    if workers > 1:
        log(f"[fine-tune] {len(runs)} runs, {workers} at a time in forked processes (one torch thread each)")
        runs_to_start = sorted(runs, key=lambda run: _text_columns(run[1]), reverse=True)  # the longest first
    else:
        runs_to_start = runs
    fine_tune = functools.partial(
        _fine_tune, pretrained_dir, eval_sets, finetune_sets, output_dir, config, progress and workers == 1
    )
    ended = {}
    with _timed(timings, "fine-tune"), log.stage("fine-tune"):  # all runs, wall clock; each run's own time below
        for (seed, variant), (metrics, rows, seconds) in run_all(fine_tune, runs_to_start, workers, log):
            ended[seed, variant.name] = metrics, rows, seconds
            log(f"[fine-tune] seed {seed} {variant.name:<16} {seconds:5.1f} s  {headline(metrics)}")
    for seed, variant in runs:
        metrics, rows, seconds = ended[seed, variant.name]
        per_seed.setdefault(variant.name, {})[seed] = metrics
        outcomes.setdefault(variant.name, {})[seed] = rows
        timings[f"{variant.name} seed {seed}"] = seconds


def _text_columns(variant: Variant) -> int:
    """How many caption columns a variant's batches hold (its step time grows with them)."""
    return 1 + 2 * (variant.hard_negative_weight > 0) + 2 * (variant.hard_positive_weight > 0)


def _fine_tune(pretrained_dir: Path, eval_sets: dict, finetune_sets: dict, output_dir: Path, config: DemoConfig,
               progress: bool, run: tuple[int, Variant], log: Callable[[str], None]):
    """One fine-tune from the pretrained model, then its evaluation: (metrics, per-row outcomes, seconds)."""
    seed, variant = run
    began = time.perf_counter()
    label = f"fine-tune seed {seed} {variant.name}"
    stage_log = StageLog(log, enabled=not progress)
    with torch_threads(config.torch_threads), stage_log.stage(label):
        model, processor = _load(pretrained_dir)
        folder = output_dir / "models" / variant.name / f"seed-{seed}"
        model = _train(model, processor, finetune_sets[seed], variant, seed, folder, config, progress, stage_log)
        metrics, rows = evaluate_on_world(model, processor, eval_sets)
    return metrics, rows, time.perf_counter() - began


def _tables(result: DemoResult, markdown: bool) -> str:
    """The tables of paper Tables 1-3 in miniature, then the controlled comparisons."""
    config = result.config
    tables = report.format_tables(
        result.results, config.seeds, config.eval_examples, markdown=markdown, bootstrap_samples=config.bootstrap_samples
    )
    return "\n".join([tables, "", *findings.format_comparisons(result.comparisons, result.results)])


def _pretrained_model(
    models_dir: Path, config: DemoConfig, progress: bool, log: StageLog, second_half: Future | None = None
) -> tuple[Path, bool]:
    """The pretrained tiny CLIP: reused from `models_dir` when its key matches, else built and trained.

    `second_half`: the pretraining rows from `pretrain_examples // 2` on, being rendered elsewhere
    (`forked_runs.background`) while this process renders the first half.
    """
    from hf_hardpos.provenance import digest_of

    if (folder := _cached_pretrained(models_dir, config)) is not None:
        return folder, True
    half = config.pretrain_examples // 2 if second_half is not None else config.pretrain_examples
    dataset = world.render_rows("pretrain", half, config.pretrain_seed, image_size=config.image_size)
    if second_half is not None:
        dataset = world.RenderedRows(dataset.column_names, dataset.rows + second_half.result().rows)
    log(f"[pretrain] {len(dataset)} image / alt-text pairs, {config.pretrain_epochs:g} epochs, batch {config.pretrain_batch_size}")
    _pretrain(models_dir, dataset, config, progress, log)
    key = _pretrain_key(config)
    (models_dir / PRETRAINED / PRETRAIN_KEY_FILE).write_text(json.dumps({"digest": digest_of(key), **key}, indent=2) + "\n")
    return models_dir / PRETRAINED, False


def _pretrain_key(config: DemoConfig) -> dict[str, Any]:
    """Every pretraining setting and the versions the weights depend on, so a cached model is never reused
    across settings that would have trained a different one."""
    return {"settings": config.pretrain_settings(), "world": world_digest(), "environment": _environment()}


def _cached_pretrained(models_dir: Path, config: DemoConfig) -> Path | None:
    """The pretrained model's folder under `models_dir` when its key matches `config`'s, else None."""
    from hf_hardpos.provenance import digest_of

    folder = models_dir / PRETRAINED
    key_file = folder / PRETRAIN_KEY_FILE
    if key_file.is_file() and (folder / "model.safetensors").is_file():
        try:
            if json.loads(key_file.read_text())["digest"] == digest_of(_pretrain_key(config)):
                return folder
        except (ValueError, KeyError):
            pass  # an unreadable key file: train again and overwrite it
    return None


def world_digest() -> str:
    """sha256 over the source of the synthetic world and the tiny CLIP: a cached pretrained model is reused
    only while the scenes, captions and architecture that trained it are unchanged."""
    from hf_hardpos.provenance import sha256_files

    folder = Path(__file__).parent
    return sha256_files(sorted(folder / f"{name}.py" for name in _WORLD_MODULES), root=folder)


def _pretrain(models_dir: Path, dataset, config: DemoConfig, progress: bool, log: StageLog) -> None:
    """Build the tiny CLIP and train it with the CLIP loss only; save it as a Hub-style folder."""
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
    from hf_hardpos.synthetic.world import tokenizer_corpus

    architecture = {name: getattr(config, name) for name in _MODEL_FIELDS}
    init_dir = build_tiny_clip(models_dir / "init", tokenizer_corpus(), seed=config.pretrain_seed, **architecture)
    variant = Variant(PRETRAINED, 0.0, 0.0)
    _train(*_load(init_dir), dataset, variant, config.pretrain_seed, models_dir / PRETRAINED, config, progress, log)


def _train(model, processor, dataset, variant: Variant, seed: int, output_dir: Path, config: DemoConfig, progress: bool,
           log: StageLog):
    """Train `model` with `variant`'s loss weights (the pretraining is the variant named `PRETRAINED`),
    save it to `output_dir` and return it. Only the caption columns the variant's loss reads are batched.
    Off a terminal, `log` gets the step and loss every few seconds (`TrainingLines`)."""
    import torch

    from hf_hardpos import columns
    from hf_hardpos.training import HardPosTrainer, HardPosTrainingArguments

    epochs, learning_rate, batch_size = config.schedule(variant.name == PRETRAINED)
    uses_negatives = variant.hard_negative_weight > 0
    uses_positives = variant.hard_positive_weight > 0
    args = HardPosTrainingArguments(
        output_dir=str(output_dir),
        hard_negative_weight=variant.hard_negative_weight,
        hard_positive_weight=variant.hard_positive_weight,
        positive_columns=list(columns.FINETUNE_POSITIVE_COLUMNS) if uses_positives else [],
        negative_columns=list(columns.FINETUNE_NEGATIVE_COLUMNS) if uses_negatives else [],
        per_device_train_batch_size=batch_size,
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
        dataloader_num_workers=config.dataloader_workers,
        dataloader_persistent_workers=config.dataloader_workers > 0,
    )
    trainer = HardPosTrainer(model=model, args=args, train_dataset=dataset, processor=processor)
    # The demo prints one line per run and its own step lines (`TrainingLines`, on the stage log's clock); the
    # trainer's log lines would print every step and log entry a second time.
    trainer.remove_callback(LogLinesCallback)
    label = "pretrain" if variant.name == PRETRAINED else f"fine-tune seed {seed} {variant.name}"
    trainer.add_callback(TrainingLines(log, label))
    if progress:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(_BarOnlyProgressCallback())
    trainer.train()
    trainer.save_model(str(output_dir))
    return trainer.model


class _BarOnlyProgressCallback(ProgressCallback):
    """The Trainer's progress bar without its printed log dicts (the loss terms stay in `log_history`)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


def _load(folder: Path):
    from transformers import CLIPModel, CLIPProcessor

    return (CLIPModel.from_pretrained(folder, trust_remote_code=False),
            CLIPProcessor.from_pretrained(folder, trust_remote_code=False))


def _environment() -> dict[str, Any]:
    """Versions and thread settings the numbers depend on (recorded in run_info.json and the cache key)."""
    import torch

    from hf_hardpos.provenance import environment

    return {
        **environment("numpy", "pillow", "tokenizers", "accelerate"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }


def _write(result: DemoResult, log: Callable[[str], None]) -> None:
    assert result.output_dir is not None
    out, config = result.output_dir, result.config
    (out / "results.json").write_text(json.dumps(result.results, indent=2) + "\n")
    with torch_threads(config.torch_threads):
        environment = _environment()
    info = {
        "config": dataclasses.asdict(config),
        "eval_seed": EVAL_SEED,
        "environment": environment,
        "determinism": "results.json is byte-identical across reruns on one machine with these versions and "
        "thread settings (checked by tests/synthetic/test_demo.py); other machines may differ in the last digits",
        "aggregation": {
            "replace": report.AGGREGATION_NOTE,
            "seeds": "each metric is the mean over seeds; <metric>_std is the sample standard deviation",
            "intervals": report.interval_note(config.bootstrap_samples) if config.bootstrap_samples else None,
            "ties": "strict comparisons: a tie is never correct and never brittle",
        },
        "aliases": config.aliases(),
        "comparisons": {"method": findings.METHOD, "records": result.comparisons},
        "per_seed": {v: {str(s): m for s, m in runs.items()} for v, runs in result.per_seed.items()},
        "fine_tune_workers": result.fine_tune_workers,
        "timings_seconds": {k: round(v, 2) for k, v in result.timings.items()},
    }
    (out / "run_info.json").write_text(json.dumps(info, indent=2) + "\n")
    (out / "results.md").write_text(_tables(result, markdown=True) + "\n")
    try:
        result.chart = report.plot_results(result.results, out / report.CHART_NAME, config.seeds)
    except ImportError:
        (out / report.CHART_NAME).unlink(missing_ok=True)  # never leave an older run's chart beside new tables
        log(
            f"[chart] matplotlib is not installed, so no {report.CHART_NAME} was drawn (the tables are written). "
            'matplotlib is a dependency of hf_hardpos, so this install is incomplete: pip install matplotlib'
        )


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Add the block's wall-clock seconds to `timings[name]` (a stage timed in several blocks sums them)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - began


__all__ = [
    "MAIN_VARIANTS",
    "SWEEP_WEIGHTS",
    "DemoConfig",
    "DemoResult",
    "Variant",
    "run_demo",
]
