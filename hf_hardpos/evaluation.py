"""Evaluate a model on hard-positive sets: scores -> metrics -> Table-1-style report.

`evaluate_dataset` is the building block (one in-memory eval set, used by the trainer during
training); `evaluate_model` is what `hardpos eval` runs: it loads a model and a Hub or local dataset
by name, evaluates each config, adds the paper's REPLACE aggregate and writes the results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict, get_dataset_config_names, load_dataset

from . import columns
from .metrics import METRIC_NAMES, augmented_correct, brittle, check_scores, compute_metrics, metric_with_interval
from .metrics import original_correct
from .scoring import ITMScorer

from .columns import REPLACE_AGGREGATE, REPLACE_SUBSETS
from .tables import TIE_RULE, metrics_table


def metrics_from_scores(
    original: np.ndarray,
    negative: np.ndarray,
    positive: np.ndarray,
    bootstrap_samples: int = 0,
    confidence_level: float = 0.95,
) -> dict[str, float | int]:
    """`compute_metrics`, plus bootstrap intervals of the three rates when asked for."""
    result = compute_metrics(original, negative, positive)
    if bootstrap_samples:
        original, negative, positive = check_scores(
            original_scores=original, negative_scores=negative, positive_scores=positive
        )
        per_row = {
            "original_accuracy": original_correct(original, negative),
            "augmented_accuracy": augmented_correct(original, negative, positive),
            "brittleness": brittle(original, negative, positive),
        }
        for name, outcome in per_row.items():
            result.update(metric_with_interval(name, outcome, bootstrap_samples, confidence_level))
    return result


def score_eval_set(
    scorer: ITMScorer,
    dataset: Dataset,
    caption_column: str = columns.CAPTION,
    negative_column: str = columns.HARD_NEGATIVE,
    positive_column: str = columns.HARD_POSITIVE,
    image_column: str = columns.IMAGE,
) -> dict[str, np.ndarray]:
    """s_c, s_n, s_p per row, keyed `original`, `negative`, `positive`."""
    scores = scorer.score(dataset, image_column, (caption_column, negative_column, positive_column))
    return {
        "original": scores[caption_column],
        "negative": scores[negative_column],
        "positive": scores[positive_column],
    }


def evaluate_dataset(
    model,
    processor,
    dataset: Dataset,
    *,
    batch_size: int = 64,
    num_workers: int = 0,
    device: str | None = None,
    progress: bool = True,
    bootstrap_samples: int = 0,
) -> dict[str, float | int]:
    """Metrics of `model` on one eval set in the shared schema (image, caption, hard_negative, hard_positive)."""
    scorer = ITMScorer(model, processor, batch_size, num_workers, device, progress=progress)
    s = score_eval_set(scorer, dataset)
    return metrics_from_scores(s["original"], s["negative"], s["positive"], bootstrap_samples)


def add_replace_aggregate(results: dict[str, dict]) -> dict[str, dict]:
    """The paper's REPLACE number: the unweighted mean of the attributes and relations subsets."""
    if not all(name in results for name in REPLACE_SUBSETS):
        return {}
    keys = [*METRIC_NAMES, "mean_original_score", "mean_negative_score", "mean_positive_score"]
    mean = {k: float(np.mean([results[s][k] for s in REPLACE_SUBSETS])) for k in keys}
    mean["num_examples"] = int(sum(results[s]["num_examples"] for s in REPLACE_SUBSETS))
    return {REPLACE_AGGREGATE: mean}


@dataclass
class EvaluationReport:
    """What `evaluate_model` measured: per-config metrics, aggregates and per-row scores.

    `settings` (split, row limit, bootstrap) identify the run together with the model and dataset:
    a saved report is reused for resuming only when all of them match.
    """

    model: str
    dataset: str
    settings: dict = field(default_factory=dict)
    results: dict[str, dict] = field(default_factory=dict)
    aggregates: dict[str, dict] = field(default_factory=dict)
    scores: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    saved_configs: set[str] = field(default_factory=set, repr=False)  # scores already on disk

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "dataset": self.dataset,
            "settings": self.settings,
            "results": self.results,
            "aggregates": self.aggregates,
        }

    def table(self) -> str:
        return format_table({**self.results, **self.aggregates})

    def save(self, output_dir: str | Path) -> Path:
        """Write one `scores-<config>.parquet` per config (row, s_c, s_n, s_p, outcomes), then `metrics.json`.

        `metrics.json` is replaced atomically and last, so an interrupted save never leaves a
        config listed whose scores are missing.
        """
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        for config, s in self.scores.items():
            if config in self.saved_configs:
                continue
            target = output_dir / f"scores-{config}.parquet"
            table = {
                "row": np.arange(len(s["original"])),
                "original_score": s["original"],
                "negative_score": s["negative"],
                "positive_score": s["positive"],
                "original_correct": original_correct(s["original"], s["negative"]),
                "augmented_correct": augmented_correct(s["original"], s["negative"], s["positive"]),
                "brittle": brittle(s["original"], s["negative"], s["positive"]),
            }
            if "image_id" in s:
                table["image_id"] = s["image_id"]
            Dataset.from_dict(table).to_parquet(str(target.with_suffix(".tmp")))
            target.with_suffix(".tmp").replace(target)
            self.saved_configs.add(config)
        partial = output_dir / "metrics.json.tmp"
        partial.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        partial.replace(output_dir / "metrics.json")
        return output_dir

    @classmethod
    def resume(cls, output_dir: str | Path, model: str, dataset: str, settings: dict) -> EvaluationReport:
        """The configs already evaluated into `output_dir` by the same run, or an empty report."""
        report = cls(model=model, dataset=dataset, settings=settings)
        saved_file = Path(output_dir) / "metrics.json"
        if not saved_file.exists():
            return report
        saved = json.loads(saved_file.read_text())
        if (saved.get("model"), saved.get("dataset"), saved.get("settings")) != (model, dataset, settings):
            return report
        for config, metrics in saved["results"].items():
            table = Dataset.from_parquet(str(Path(output_dir) / f"scores-{config}.parquet"))
            report.results[config] = metrics
            report.scores[config] = {
                "original": np.asarray(table["original_score"]),
                "negative": np.asarray(table["negative_score"]),
                "positive": np.asarray(table["positive_score"]),
            }
            report.saved_configs.add(config)
        return report


def format_table(results: dict[str, dict]) -> str:
    """A paper-Table-1-style text table; rates in percent, scores as cosine similarities."""
    lines = [metrics_table(results), f"rates: {TIE_RULE}"]
    if REPLACE_AGGREGATE in results:
        lines.append(f"{REPLACE_AGGREGATE}: unweighted mean of the two subsets (the paper's REPLACE column)")
    return "\n".join(lines)


def load_model_and_processor(name_or_path: str):
    """`AutoModel` + `AutoProcessor` from a Hub id or a local folder (CLIP, SigLIP, ...)."""
    from transformers import AutoModel, AutoProcessor

    return AutoModel.from_pretrained(name_or_path), AutoProcessor.from_pretrained(name_or_path)


def _load_eval_sets(dataset: str | Dataset | DatasetDict, configs: Sequence[str] | None, split: str) -> dict[str, Dataset]:
    if isinstance(dataset, Dataset):
        return {configs[0] if configs else "default": dataset}
    if isinstance(dataset, DatasetDict):
        return {configs[0] if configs else "default": dataset[split]}
    names = list(configs) if configs else get_dataset_config_names(dataset)
    return {name: load_dataset(dataset, name, split=split) for name in names}


def evaluate_model(
    model: str,
    dataset: str | Dataset | DatasetDict,
    configs: Sequence[str] | None = None,
    split: str = "test",
    *,
    batch_size: int = 64,
    num_workers: int = 0,
    device: str | None = None,
    max_rows: int | None = None,
    bootstrap_samples: int = 0,
    output_dir: str | Path | None = None,
    resume: bool = True,
    progress: bool = True,
) -> EvaluationReport:
    """Evaluate a Hub/local model on every config of a Hub/local hard-positive dataset.

    `configs=None` evaluates all configs the dataset declares. With `output_dir`, each config's
    `scores-<config>.parquet` and the running `metrics.json` are written as soon as that config is
    done; rerunning the same command (`resume=True`) skips the configs already there.
    """
    settings = {"split": split, "max_rows": max_rows, "bootstrap_samples": bootstrap_samples}
    if output_dir is not None and resume:
        report = EvaluationReport.resume(output_dir, str(model), str(dataset), settings)
    else:
        report = EvaluationReport(model=str(model), dataset=str(dataset), settings=settings)
    eval_sets = _load_eval_sets(dataset, configs, split)
    todo = [config for config in eval_sets if config not in report.results]
    if todo:
        loaded_model, processor = load_model_and_processor(model)
        scorer = ITMScorer(loaded_model, processor, batch_size, num_workers, device, progress=progress)
    for config in todo:
        eval_set = eval_sets[config]
        if max_rows is not None:
            eval_set = eval_set.select(range(min(max_rows, len(eval_set))))
        s = score_eval_set(scorer, eval_set)
        if columns.IMAGE_ID in eval_set.column_names:
            s["image_id"] = np.asarray([str(v) for v in eval_set[columns.IMAGE_ID]])
        report.scores[config] = s
        report.results[config] = metrics_from_scores(s["original"], s["negative"], s["positive"], bootstrap_samples)
        if output_dir is not None:
            report.save(output_dir)
    # Report in the order asked for, reused configs included.
    report.results = {config: report.results[config] for config in eval_sets}
    report.aggregates = add_replace_aggregate(report.results)
    if output_dir is not None:
        report.save(output_dir)
    return report
