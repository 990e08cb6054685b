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
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hf_hardpos.synthetic import findings, report, world
from hf_hardpos.synthetic.config import MAIN_VARIANTS, SWEEP_WEIGHTS, DemoConfig, Variant
from hf_hardpos.synthetic.forked_runs import background, run_all, worker_count
from hf_hardpos.synthetic.run_report import write_run_report
from hf_hardpos.synthetic.runtime import quiet_libraries, torch_threads
from hf_hardpos.synthetic.stage_log import StageLog
from hf_hardpos.synthetic.tiny_training import (
    PRETRAINED,
    cached_pretrained,
    environment,
    load_model,
    pretrained_model,
    train_variant,
)
from hf_hardpos.synthetic.world_eval import (
    EVAL_SEED,
    evaluate_on_world,
    headline,
    image_groups,
    make_eval_sets,
)


@dataclass
class DemoResult:
    """What `run_demo` measured: per-variant, per-dataset metrics (over seeds) and the raw runs."""

    results: dict[str, dict[str, dict[str, float]]]
    per_seed: dict[str, dict[int, dict[str, dict[str, float]]]]
    timings: dict[str, float] = field(default_factory=dict)
    config: DemoConfig = field(default_factory=DemoConfig)
    output_dir: Path | None = None
    chart: Path | None = None
    comparisons: list[dict] = field(
        default_factory=list
    )  # `findings.compare`: the paper's controlled comparisons
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
            if workers > 1 and cached_pretrained(output_dir / "models", config) is None:
                n = config.pretrain_examples
                second_half = submit(world.render_rows, "pretrain", n, config.pretrain_seed, image_size=config.image_size,
                                     start=n // 2)  # fmt: skip
            with _timed(timings, "data"), log.stage("data"):
                eval_sets_later = submit(make_eval_sets, config.eval_examples, config.image_size)
                finetune_sets_later = {
                    seed: submit(
                        world.render_rows,
                        "finetune",
                        config.finetune_examples,
                        seed,
                        image_size=config.image_size,
                    )
                    for seed in config.seeds
                }
            with _timed(timings, "pretrain"), log.stage("pretrain"):
                pretrained_dir, reused = pretrained_model(
                    output_dir / "models", config, progress, log, second_half
                )
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
            + (
                (
                    " (built in a forked process while pretraining ran)"
                    if not reused
                    else " (built in a forked process)"
                )
                if workers > 1
                else ""
            )
        )
        per_seed: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
        outcomes: dict[str, dict[int, dict[str, dict[str, np.ndarray]]]] = {}
        with _timed(timings, "evaluate pretrained"), log.stage("evaluate"):
            metrics, rows = evaluate_on_world(*load_model(pretrained_dir), eval_sets)
        per_seed[PRETRAINED], outcomes[PRETRAINED] = (
            {config.pretrain_seed: metrics},
            {config.pretrain_seed: rows},
        )
        log(f"[evaluate] {PRETRAINED:<16} {headline(metrics)}")

        _fine_tune_all(
            runs,
            workers,
            _Inputs(pretrained_dir, eval_sets, finetune_sets, output_dir),
            config,
            progress=progress,
            log=log,
            timings=timings,
            per_seed=per_seed,
            outcomes=outcomes,
        )
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
    result = DemoResult(
        results, per_seed, timings, config, output_dir, comparisons=comparisons, fine_tune_workers=workers
    )
    # The report pages are written in a forked process while this one writes the results, where forks are safe
    # (else here, first).
    with background(forked=workers > 1) as submit:
        with log.stage("report"):
            report_later = submit(
                _run_report, output_dir, eval_sets, config.seeds[0], config.torch_threads, result.results
            )
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


def _run_report(
    output_dir: Path, eval_sets: dict, seed: int, threads: int, results: dict
) -> tuple[list[str], list[str]]:
    """`write_run_report` of seed `seed`'s models, with every variant's spread over seeds (`results`): (the files
    written, its log lines, to be printed by the caller)."""
    lines: list[str] = []
    return write_run_report(output_dir, eval_sets, seed, EVAL_SEED, threads, lines.append, results), lines


@dataclass(frozen=True)
class _Inputs:
    """What every fine-tune of a demo reads: the start model, the eval sets, the fine-tuning set of each seed,
    and the folder its model goes under."""

    pretrained_dir: Path
    eval_sets: dict
    finetune_sets: dict
    output_dir: Path


def _fine_tune_all(
    runs: list[tuple[int, Variant]],
    workers: int,
    inputs: _Inputs,
    config: DemoConfig,
    *,
    progress: bool,
    log: StageLog,
    timings: dict[str, float],
    per_seed: dict,
    outcomes: dict,
) -> None:
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
    fine_tune = functools.partial(_fine_tune, inputs, config, progress and workers == 1)
    ended = {}
    with (
        _timed(timings, "fine-tune"),
        log.stage("fine-tune"),
    ):  # all runs, wall clock; each run's own time below
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


def _fine_tune(
    inputs: _Inputs, config: DemoConfig, progress: bool, run: tuple[int, Variant], log: Callable[[str], None]
):
    """One fine-tune from the pretrained model, then its evaluation: (metrics, per-row outcomes, seconds)."""
    seed, variant = run
    began = time.perf_counter()
    label = f"fine-tune seed {seed} {variant.name}"
    stage_log = StageLog(log, enabled=not progress)
    with torch_threads(config.torch_threads), stage_log.stage(label):
        model, processor = load_model(inputs.pretrained_dir)
        folder = inputs.output_dir / "models" / variant.name / f"seed-{seed}"
        model = train_variant(model, processor, inputs.finetune_sets[seed], variant, seed, folder, config, progress,
                              stage_log)  # fmt: skip
        metrics, rows = evaluate_on_world(model, processor, inputs.eval_sets)
    return metrics, rows, time.perf_counter() - began


def _tables(result: DemoResult, markdown: bool) -> str:
    """The tables of paper Tables 1-3 in miniature, then the controlled comparisons."""
    config = result.config
    tables = report.format_tables(
        result.results,
        config.seeds,
        config.eval_examples,
        markdown=markdown,
        bootstrap_samples=config.bootstrap_samples,
    )
    return "\n".join([tables, "", *findings.format_comparisons(result.comparisons, result.results)])


def _write(result: DemoResult, log: Callable[[str], None]) -> None:
    assert result.output_dir is not None
    out, config = result.output_dir, result.config
    (out / "results.json").write_text(json.dumps(result.results, indent=2) + "\n")
    with torch_threads(config.torch_threads):
        machine = environment()
    info = {
        "config": dataclasses.asdict(config),
        "eval_seed": EVAL_SEED,
        "environment": machine,
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
        (out / report.CHART_NAME).unlink(
            missing_ok=True
        )  # never leave an older run's chart beside new tables
        log(
            f"[chart] matplotlib is not installed, so no {report.CHART_NAME} was drawn (the tables are written). "
            "matplotlib is a dependency of hf_hardpos, so this install is incomplete: pip install matplotlib"
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
