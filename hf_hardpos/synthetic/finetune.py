"""`hardpos train` with no arguments: the demo's hp+hn fine-tune of seed 0, as a run folder of its own.

Why: the command's first run should show what the package is for, and the demo already shows it (hard
positives with hard negatives leave the model less brittle than hard negatives alone). So this is that
fine-tune, not a look-alike: the demo's start model (reused from the demo's cache or a demo output
folder; pretrained only when neither holds it), the demo's fine-tuning rows, recipe (`DemoConfig`: 5
epochs, batch 128, learning rate 2e-3, cosine schedule) and eval sets, trained by the same function
(`tiny_training.variant_trainer`). Its final REPLACE (pooled) and SWAP rates are therefore the demo's
hp+hn row for that seed (tests/synthetic/test_finetune.py checks it against a demo run). What it adds
is what a `hardpos train` folder holds: a checkpoint per epoch (a rerun after an interrupt resumes from
the last complete one), the model and its card, `eval_results.json` / `all_results.json` as
transformers' example scripts write them, and a table: the start model, the demo's hn row (read from a
demo output folder when one holds it) and this run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hf_hardpos.errors import UserInputError
from hf_hardpos.synthetic import world
from hf_hardpos.synthetic.config import MAIN_VARIANTS, DemoConfig
from hf_hardpos.synthetic.runtime import quiet_libraries, torch_threads
from hf_hardpos.synthetic.stage_log import StageLog
from hf_hardpos.synthetic.tiny_training import (
    PRETRAINED,
    cached_pretrained,
    load_model,
    pretrained_model,
    variant_trainer,
)
from hf_hardpos.synthetic.world_eval import EVAL_SEED, evaluate_on_world, make_eval_sets

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = "hardpos-synthetic"
# Where `hardpos demo` writes in the README's main command; its pretrained model and hn row are reused from there.
DEFAULT_DEMO_DIR = "runs/demo"
START_MODEL_CACHE = ("hardpos", "synthetic-pretrained")  # under HF_HOME, one folder per pretraining setting
VARIANT, COMPARED = "hp+hn", "hn"
SHOWN = ("replace", "swap")  # REPLACE pooled over attributes and relations (the paper's column), SWAP
RATES = ("orig_acc", "aug_acc", "brittleness")
# DemoConfig fields that do not change what one seed's fine-tune trains or is scored on.
_RUN_ONLY_FIELDS = {"seeds", "sweep", "bootstrap_samples", "processes"}


@dataclass
class FinetuneResult:
    """What the no-argument fine-tune measured, each as `evaluate_on_world` returns it (dataset -> metric)."""

    metrics: dict[str, dict[str, float]]  # the fine-tuned model
    start: dict[str, dict[str, float]]  # the start model
    demo_rows: dict[str, dict[str, dict[str, float]]]  # variant -> metrics of the same seed in a demo folder
    output_dir: Path
    start_model: Path
    start_model_reused: bool


def start_model_cache(config: DemoConfig) -> Path:
    """Where the pretrained model of `config` is cached: one folder per pretraining setting, so a quick
    test model never replaces the demo's."""
    from huggingface_hub import constants

    from hf_hardpos.provenance import digest_of

    return Path(constants.HF_HOME).joinpath(*START_MODEL_CACHE, digest_of(config.pretrain_settings()))


def start_model(
    config: DemoConfig, demo_dirs: list[Path], log: StageLog, progress: bool
) -> tuple[Path, bool]:
    """(folder of the demo's pretrained tiny CLIP, whether it was reused): from a demo output folder or the
    cache when one holds it for `config`'s settings, else pretrained into the cache first (under a file lock,
    so two runs never train it twice)."""
    from filelock import FileLock

    for folder in demo_dirs:
        if (found := cached_pretrained(folder / "models", config)) is not None:
            return found, True
    cache = start_model_cache(config)
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache) + ".lock"):
        return pretrained_model(cache, config, progress, log)


def demo_rows(demo_dirs: list[Path], config: DemoConfig, seed: int) -> tuple[dict, Path | None]:
    """The demo's per-seed rows of `seed` ({variant: metrics}) from the first demo folder whose run used
    `config`'s settings, and that folder; ({}, None) when none did."""
    settings = {
        k: v
        for k, v in json.loads(json.dumps(dataclasses.asdict(config))).items()
        if k not in _RUN_ONLY_FIELDS
    }
    for folder in demo_dirs:
        try:
            info = json.loads((folder / "run_info.json").read_text())
            ran = {k: v for k, v in info["config"].items() if k not in _RUN_ONLY_FIELDS}
            rows = {
                variant: runs[str(seed)] for variant, runs in info["per_seed"].items() if str(seed) in runs
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # no demo there, or not one this code can read
        if ran == settings and rows:
            return rows, folder
    return {}, None


def demo_finetune(
    output_dir: str | Path = DEFAULT_OUTPUT_DIR,
    config: DemoConfig | None = None,
    *,
    seed: int = 0,
    demo_dirs: list[str | Path] | None = None,
    resume_from_checkpoint: str | bool | None = None,
    progress: bool = False,
    log: Callable[[str], None] = print,
) -> FinetuneResult:
    """Fine-tune the demo's start model as the demo's hp+hn run of `seed`, checkpointing every epoch; evaluate
    before and after, write the folder and print the table.

    `config`: the demo's settings (default `DemoConfig()`, what `hardpos demo` runs). `demo_dirs`: demo
    output folders to reuse the start model and read the hn row from (default: ./runs/demo).
    `resume_from_checkpoint`: as `hardpos train`'s flag; by default a rerun resumes from the last complete
    checkpoint of `output_dir` (`checkpointing.checkpoint_to_resume`).
    """
    from hf_hardpos.training.card_data import HardPosModelCardData
    from hf_hardpos.training.checkpointing import checkpoint_to_resume

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UserInputError("hardpos train without --dataset is the demo's one-process fine-tune; launch it without "
                             "accelerate/torchrun, or give --dataset")  # fmt: skip
    config = config or DemoConfig()
    folders = [Path(d) for d in (demo_dirs if demo_dirs is not None else [DEFAULT_DEMO_DIR])]
    output_dir = Path(output_dir)
    resume = checkpoint_to_resume(output_dir, resume_from_checkpoint)
    stage_log = StageLog(log, enabled=not progress)
    variant = next(v for v in MAIN_VARIANTS if v.name == VARIANT)
    with torch_threads(config.torch_threads), quiet_libraries():
        with stage_log.stage("start model"):
            pretrained_dir, reused = start_model(config, folders, stage_log, progress)
        log(f"[start model] {'reused' if reused else 'pretrained'} the demo's tiny CLIP: {pretrained_dir}")
        with stage_log.stage("data"):
            eval_sets = make_eval_sets(config.eval_examples, config.image_size)
            rows = world.render_rows("finetune", config.finetune_examples, seed, image_size=config.image_size)
        with stage_log.stage("evaluate"):
            start, _ = evaluate_on_world(*load_model(pretrained_dir), eval_sets)
        card_data = HardPosModelCardData(
            base_model=None,
            train_dataset_description=f"the synthetic world's fine-tuning rows (`world.render_rows('finetune', "
            f"{config.finetune_examples}, seed={seed})`), as `hardpos demo` fine-tunes on",
        )
        model, processor = load_model(pretrained_dir)
        trainer = variant_trainer(model, processor, rows, variant, seed, output_dir, config, progress=progress,
                                  log=stage_log, card_data=card_data, save_strategy="epoch")  # fmt: skip
        with stage_log.stage(f"fine-tune seed {seed} {variant.name}"):
            train_result = trainer.train(resume_from_checkpoint=resume)
        with stage_log.stage("evaluate"):
            metrics, _ = evaluate_on_world(trainer.model, processor, eval_sets)
        trainer.save_model()
    trainer.save_state()
    trainer.save_metrics("train", train_result.metrics)
    trainer.save_metrics("eval", flat_metrics(metrics))
    found, demo_dir = demo_rows(folders, config, seed)
    result = FinetuneResult(metrics, start, found, output_dir, pretrained_dir, reused)
    for line in comparison_table(result, config, seed, demo_dir):
        log(line)
    return result


def flat_metrics(metrics: dict[str, dict[str, float]]) -> dict[str, float]:
    """`eval_<dataset>_<metric>`, as the Trainer names evaluation metrics (what eval_results.json holds)."""
    return {
        f"eval_{dataset}_{name}": value
        for dataset, values in metrics.items()
        for name, value in values.items()
    }


def comparison_table(
    result: FinetuneResult, config: DemoConfig, seed: int, demo_dir: Path | None
) -> list[str]:
    """The start model, the demo's hn row of `seed` (when a demo folder holds it) and this run, in %."""
    labels = ("REPL orig", "aug", "brittle", "SWAP orig", "aug", "brittle")
    header = f"{'model':<34}" + "".join(
        f"{label:>11}" for label in labels
    )  # one space at least between labels

    def row(label: str, metrics: dict[str, dict[str, float]]) -> str:
        return f"{label:<34}" + "".join(f"{100 * metrics[d][r]:>11.1f}" for d in SHOWN for r in RATES)

    lines = [
        f"[result] rates in % on the demo's eval sets ({config.eval_examples} rows each, seed {EVAL_SEED}); REPLACE "
        "pooled over attributes and relations; brittleness: lower is better",
        header,
        row(f"start model ({PRETRAINED})", result.start),
    ]
    if COMPARED in result.demo_rows:
        lines.append(row(f"demo {COMPARED}, seed {seed}", result.demo_rows[COMPARED]))
    lines.append(row(f"this run: {VARIANT}, seed {seed}", result.metrics))
    if demo_dir is None:
        lines.append(f"(the demo's {COMPARED} row of seed {seed}: run `hardpos demo --output-dir {DEFAULT_DEMO_DIR}` "
                     "with its default settings)")  # fmt: skip
    elif VARIANT in result.demo_rows:
        same = all(result.demo_rows[VARIANT][d][r] == result.metrics[d][r] for d in SHOWN for r in RATES)
        lines.append(f"(demo rows from {demo_dir}; its {VARIANT} seed {seed} row is "
                     f"{'the same' if same else 'DIFFERENT: other versions or thread settings?'})")  # fmt: skip
    lines.append(f"[saved] {result.output_dir}: model, README.md card, eval_results.json, all_results.json")
    return lines


__all__ = ["DEFAULT_OUTPUT_DIR", "FinetuneResult", "demo_finetune", "start_model", "start_model_cache"]
