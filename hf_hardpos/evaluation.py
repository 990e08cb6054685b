"""Evaluate a model on hard-positive sets: scores -> metrics -> Table-1-style report.

`evaluate_dataset` is the building block (one in-memory eval set, used by the trainer during
training); `evaluate_model` is what `hardpos eval` runs: it loads a model and a Hub or local dataset
by name, evaluates each config, adds REPLACE's aggregates (the paper's pooled column and the macro
mean of the subsets, see `aggregation`) and writes the results.

Every saved config carries the identity of what produced it (model and dataset content, every
setting that changes a score, library versions); a rerun reuses a saved config only when all of
them match, and says why it recomputes otherwise (see `provenance`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset, DatasetDict, get_dataset_config_names, load_dataset, load_dataset_builder

from . import __version__, columns, output_folder, open_clip_native
from .aggregation import describe_all, replace_aggregates
from .errors import UserInputError
from .metrics import augmented_correct, brittle, check_scores, compute_metrics, metric_with_interval
from .metrics import original_correct
from .embedding_cache import EmbeddingCache
from .provenance import describe_model, digest_of, environment, hub_revision, model_identity, sha256_files
from .scoring import EXIF_ORIENTATION, ITMScorer, pick_device, text_context_length
from .image_processing import DEFAULT_IMAGE_BACKEND, image_processor_settings, load_image_processor
from .protocol import resolve_protocol
from .published import beside_ours
from .tables import TIE_RULE, metrics_table, published_table

SCORE_DEFINITION = "cosine similarity of L2-normalised image and text embeddings (no logit scale)"

# Bumped whenever a metric, a tie rule or the score definition changes, so results saved under the
# old definitions are recomputed instead of reused; part of every result key with the package version.
METRIC_DEFINITIONS_VERSION = 1
RESULT_VERSIONS = {"hf_hardpos": __version__, "metric_definitions": METRIC_DEFINITIONS_VERSION}


def metrics_from_scores(
    original: np.ndarray,
    negative: np.ndarray,
    positive: np.ndarray,
    bootstrap_samples: int = 0,
    confidence_level: float = 0.95,
    groups: Sequence | np.ndarray | None = None,
) -> dict[str, float | int]:
    """`compute_metrics`, plus bootstrap intervals of the three rates when asked for.

    `groups` (the rows' image ids) makes the bootstrap resample images rather than rows.
    """
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
            result.update(metric_with_interval(name, outcome, bootstrap_samples, confidence_level, groups=groups))
    return result


def bootstrap_description(bootstrap_samples: int, by_image: bool, confidence_level: float = 0.95) -> str | None:
    if not bootstrap_samples:
        return None
    unit = "images (all rows of a drawn image_id)" if by_image else "rows (the set has no image_id column)"
    return f"{confidence_level:.0%} percentile bootstrap, {bootstrap_samples} resamples over {unit}"


def score_eval_set(
    scorer: ITMScorer,
    dataset: Dataset,
    caption_column: str = columns.CAPTION,
    negative_column: str = columns.HARD_NEGATIVE,
    positive_column: str = columns.HARD_POSITIVE,
    image_column: str = columns.IMAGE,
) -> dict[str, Any]:
    """s_c, s_n, s_p per row, keyed `original`, `negative`, `positive`, plus the truncation report."""
    scores = scorer.score(dataset, image_column, (caption_column, negative_column, positive_column))
    return {
        "original": scores[caption_column],
        "negative": scores[negative_column],
        "positive": scores[positive_column],
        "truncation": scores.truncation,
    }


def _image_groups(dataset: Dataset) -> np.ndarray | None:
    if columns.IMAGE_ID not in dataset.column_names:
        return None
    return np.asarray([str(v) for v in dataset[columns.IMAGE_ID]])


def evaluate_dataset(
    model,
    processor,
    dataset: Dataset,
    *,
    batch_size: int = 64,
    num_workers: int = 0,
    device: str | None = None,
    precision: str = "fp32",
    progress: bool = True,
    bootstrap_samples: int = 0,
) -> dict[str, float | int]:
    """Metrics of `model` on one eval set in the shared schema (image, caption, hard_negative, hard_positive)."""
    scorer = ITMScorer(model, processor, batch_size, num_workers, device, precision=precision, progress=progress)
    s = score_eval_set(scorer, dataset)
    groups = _image_groups(dataset)
    return metrics_from_scores(s["original"], s["negative"], s["positive"], bootstrap_samples, groups=groups)


@dataclass
class EvalSet:
    """One config of a dataset, with the identity of its content (for resume keys and metrics.json)."""

    name: str
    dataset: Dataset
    identity: dict[str, Any]


@dataclass
class EvaluationReport:
    """What `evaluate_model` measured: per-config metrics, their provenance, aggregates, per-row scores.

    `provenance[config]` holds the resume key of that config and the inputs it was computed from; a
    saved config is reused only when a rerun would compute the same key.
    """

    model: str
    dataset: str
    source: str = ""  # the dataset's resolved folder or Hub id (`dataset_source`)
    output_dir: str | None = None  # where it was saved (a partial run may go beside --output)
    run: dict = field(default_factory=dict)  # model identity, scorer settings, environment
    results: dict[str, dict] = field(default_factory=dict)
    provenance: dict[str, dict] = field(default_factory=dict)
    aggregates: dict[str, dict] = field(default_factory=dict)
    published: dict = field(default_factory=dict)  # a known paper row beside ours (`published.beside_ours`)
    scores: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    saved_configs: set[str] = field(default_factory=set, repr=False)  # scores already on disk

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "dataset": self.dataset,
            "run": self.run,
            "metric_definitions": {"score": SCORE_DEFINITION, "tie_rule": TIE_RULE},
            "results": self.results,
            "provenance": self.provenance,
            "aggregates": self.aggregates,
            "aggregation": dict(zip(self.aggregates, describe_all(self.aggregates))),
            "published": self.published,
        }

    def table(self) -> str:
        lines = [metrics_table({**self.results, **self.aggregates}), f"rates: {TIE_RULE}", *self.settings_lines()]
        if self.published:
            lines.insert(1, published_table(self.published))
        lines.append(f"model: {self.model_line()}")
        return "\n".join([*lines, *self.data_lines()])

    def settings_lines(self) -> list[str]:
        """How the scores were computed (definition, precision, device, text length)."""
        settings = self.run.get("settings", {})
        if not settings:
            return []
        line = (
            f"scores: {SCORE_DEFINITION}; {settings.get('precision')} on {settings.get('device')}, "
            f"text max_length {settings.get('max_length')}"
        )
        if settings.get("image_processor"):
            line += f"; image processor: {settings['image_processor'].get('backend')} backend"
        protocol = settings.get("protocol") or {}
        if protocol.get("name") == "paper":
            line += f"; protocol paper ({'; '.join(protocol['notes'])})"
        return [line]

    def model_line(self) -> str:
        return describe_model(self.model, self.run.get("model_identity", {}))

    def data_lines(self) -> list[str]:
        """Each config's data identity, truncation and interval method, then the aggregation rule."""
        lines = []
        for config, prov in self.provenance.items():
            data_id = prov.get("dataset", {})
            ident = data_id.get("sha256") or data_id.get("revision") or data_id.get("fingerprint") or "unknown"
            source = prov.get("source", self.dataset)  # each config names the dataset it was computed on
            line = f"data: {source} [{config}] split {prov.get('split')} ({str(ident)[:12]})"
            truncation = prov.get("truncation", {})
            if truncation.get("truncated_captions"):
                line += (
                    f"; {truncation['truncated_captions']} captions cut at {truncation['max_length']} tokens, "
                    f"{truncation['num_rows_made_identical_by_truncation']} rows made two captions identical"
                )
            if prov.get("bootstrap"):
                line += f"; CI: {prov['bootstrap']}"
            lines.append(line)
        lines.extend(describe_all(self.aggregates))
        return lines

    def save(self, output_dir: str | Path) -> Path:
        """Write one `scores-<config>.parquet` per config (row, s_c, s_n, s_p, outcomes), then `metrics.json`.

        Every file is written under a temporary name and renamed (`output_folder`), `metrics.json`
        last, so an interrupted save never leaves a config listed whose scores are missing. Callers
        hold the folder's lock (`evaluate_model` does, from reading what is saved to its last write).
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
            with output_folder.atomic_path(target) as partial:
                pq.write_table(pa.table(table), partial)
            self.saved_configs.add(config)
        output_folder.write_json(output_dir / "metrics.json", self.to_dict())
        return output_dir

    def merge_saved(self, output_dir: str | Path, keys: dict[str, str | None], log=print) -> None:
        """Take over the configs saved in `output_dir` that are still valid.

        A requested config is reused when its saved key equals `keys[config]`; otherwise it is
        recomputed, and the reason is logged. Configs saved earlier but not requested now are kept
        (one output folder collects a model's configs across runs) if they were computed with the
        same model content and scorer settings on the same dataset (`source`); otherwise they are
        dropped, with a message, so a config of another dataset is never reported as this one's.
        """
        saved_file = Path(output_dir) / "metrics.json"
        if not saved_file.exists():
            return
        saved = json.loads(saved_file.read_text())
        same_run = saved.get("run", {}).get("key") == self.run.get("key") and self.run.get("key") is not None
        for config, metrics in saved.get("results", {}).items():
            prov = saved.get("provenance", {}).get(config, {})
            if config in keys:
                if keys[config] is None or prov.get("key") != keys[config]:
                    log(f"{config}: saved scores in {output_dir} came from other inputs or settings "
                        f"({_what_differs(prov, self.run, keys[config])}); recomputing")
                    continue
            elif not same_run:
                log(f"{config}: dropped from {saved_file.name}: computed with another model or other settings")
                continue
            elif prov.get("source") != self.source:
                log(f"{config}: dropped from {saved_file.name}: computed on {prov.get('source', saved.get('dataset'))}, "
                    f"not on {self.source}")
                continue
            scores_file = Path(output_dir) / f"scores-{config}.parquet"
            if not scores_file.exists():
                log(f"{config}: {scores_file.name} is missing; recomputing")
                continue
            table = pq.read_table(scores_file).to_pydict()
            self.results[config] = metrics
            self.provenance[config] = prov
            self.scores[config] = {
                "original": np.asarray(table["original_score"]),
                "negative": np.asarray(table["negative_score"]),
                "positive": np.asarray(table["positive_score"]),
            }
            if "image_id" in table:
                self.scores[config]["image_id"] = np.asarray(table["image_id"])
            self.saved_configs.add(config)
            why = "same model, dataset content and settings" if config in keys else "kept from an earlier run, same model and settings"
            log(f"{config}: reusing the scores saved in {output_dir} ({why})")


def _is_difference_key(name: str, value: Any) -> bool:
    """Rates and mean scores are differenced; counts and interval bounds are not (the difference of two
    interval ends is no interval of the difference)."""
    return isinstance(value, float) and not name.startswith("num_") and "_ci_" not in name


def rows_by_activation(rows: Mapping[str, Mapping[str, Mapping]]) -> dict[str, dict]:
    """Interleave the rows of one model converted with each activation, for one side-by-side table.

    `rows` maps activation -> row name -> metrics. Each row appears as `name [activation]`, then
    `name [other - first]`: the difference of every rate and mean score from the first activation's,
    on the same data (same rows, same images), so the table shows how much the GELU/QuickGELU choice
    alone moves each number.
    """
    activations = list(rows)
    first = activations[0]
    names = list(dict.fromkeys(name for per_activation in rows.values() for name in per_activation))
    combined: dict[str, dict] = {}
    for name in names:
        for activation in activations:
            if name in rows[activation]:
                combined[f"{name} [{activation}]"] = dict(rows[activation][name])
        base = rows[first].get(name)
        for activation in activations[1:]:
            other = rows[activation].get(name)
            if base is None or other is None:
                continue
            combined[f"{name} [{activation} - {first}]"] = {
                k: other[k] - v for k, v in base.items() if _is_difference_key(k, v) and _is_difference_key(k, other.get(k))
            }
    return combined


def difference_rule(activations: Sequence[str], units: str = "rates in percentage points, mean scores in cosine") -> str:
    """The line printed under a side-by-side table, saying what its difference rows are."""
    first = activations[0]
    others = ", ".join(f"[{a} - {first}]" for a in activations[1:])
    return (
        f"{others} rows: {', '.join(activations[1:])} minus {first}, row by row on the same data ({units}); "
        "the same checkpoint, converted once per activation"
    )


def activation_comparison_table(reports: Mapping[str, EvaluationReport]) -> str:
    """One table for `hardpos eval --activation both`: each config's rows per activation and their difference.

    `reports` maps activation -> the report of the checkpoint converted with it. The lines under the
    table say how each figure was obtained, with one model line per activation (same checkpoint
    sha256, different `hidden_act`).
    """
    first = next(iter(reports.values()))
    rows = {activation: {**r.results, **r.aggregates} for activation, r in reports.items()}
    lines = [
        metrics_table(rows_by_activation(rows), label="config [activation]"),
        f"rates: {TIE_RULE}",
        difference_rule(list(reports)),
        *first.settings_lines(),
        *(f"model [{activation}]: {r.model_line()}" for activation, r in reports.items()),
        *first.data_lines(),
    ]
    return "\n".join(lines)


def _what_differs(saved_provenance: dict, run: dict, new_key: str | None) -> str:
    if new_key is None:
        return "a Hub revision is unknown offline, so equality cannot be proven"
    saved_parts = saved_provenance.get("key_parts", {})
    current_parts = {"model": run.get("model_identity"), "settings": run.get("settings_key")}
    differing = [name for name, value in current_parts.items() if saved_parts.get(name) != value]
    return ", ".join(f"{name} changed" for name in differing) or "the dataset's content changed"


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1


def require_model_exists(name_or_path: str) -> None:
    """Refuse a path-like model name that does not exist ("not found", not a Hub id error); cheap, so
    `hardpos eval` runs it before reading any data."""
    if _looks_like_path(name_or_path) and not open_clip_native.is_native(name_or_path) \
            and not Path(name_or_path).expanduser().exists():
        raise UserInputError(f"model not found: {name_or_path} (no such folder)")


def require_dataset_exists(name_or_path: str) -> None:
    """Refuse a path-like dataset name that does not exist, before it is taken for a Hub id (whose
    validation error would say nothing about a mistyped folder)."""
    if _looks_like_path(name_or_path) and not Path(name_or_path).expanduser().exists():
        raise UserInputError(f"dataset not found: {name_or_path} (no such folder; a Hub id looks like owner/name)")


def identify_model(name_or_path: str) -> dict[str, Any]:
    """`provenance.model_identity`, refusing a path-like name that does not exist ("not found")."""
    require_model_exists(name_or_path)
    if open_clip_native.is_native(name_or_path):
        return open_clip_native.identity(name_or_path)
    return model_identity(name_or_path)


def load_model_and_processor(name_or_path: str, image_backend: str = DEFAULT_IMAGE_BACKEND):
    """`AutoModel` + `AutoProcessor` from a Hub id or a local folder (CLIP, SigLIP, ...), in float32.

    float32 whatever dtype the weights were saved in: transformers 5 loads `dtype="auto"`, so a
    checkpoint saved in half precision would otherwise be scored in half precision (outcomes of
    near-tied rows flip) while the report says fp32; `--dtype` is the one switch for lower precision.
    Refuses, with a one-line reason naming the file to add, a path that does not exist, a model that
    is not a dual encoder (the scorer needs `get_image_features` and `get_text_features`), a missing
    or degenerate tokenizer and a missing image processor (`model_checks`).
    """
    import torch
    from transformers import AutoModel, AutoProcessor

    from .model_checks import check_image_processor, check_tokenizer

    if open_clip_native.is_native(name_or_path):  # built by open_clip, with its own transforms and tokenizer
        return open_clip_native.load(name_or_path)
    require_model_exists(name_or_path)
    path = Path(name_or_path).expanduser()
    where = "local folder" if path.exists() else "Hub id (offline: it must be in the local cache)"
    try:
        model = AutoModel.from_pretrained(name_or_path, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as err:
        raise UserInputError(f"cannot load model {name_or_path!r} as a {where}: {_first_line(err)}") from err
    missing = [m for m in ("get_image_features", "get_text_features") if not hasattr(model, m)]
    if missing:
        raise UserInputError(
            f"{name_or_path} is a {type(model).__name__}, not a dual encoder "
            "(needs get_image_features/get_text_features)"
        )
    try:
        processor = AutoProcessor.from_pretrained(name_or_path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserInputError(
            f"cannot load the processor of model {name_or_path!r} ({where}): add preprocessor_config.json (or "
            f"processor_config.json) and the tokenizer files from the base model ({_first_line(err)})"
        ) from err
    if getattr(processor, "image_processor", None) is not None:  # pinned, not the backend AutoProcessor picked
        processor.image_processor = load_image_processor(name_or_path, image_backend)
    check_image_processor(name_or_path, processor)
    text_config = getattr(model.config, "text_config", model.config)
    check_tokenizer(name_or_path, getattr(processor, "tokenizer", None), text_config)
    return model, processor


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def content_cache_dir(digest: str) -> str:
    """A datasets cache folder private to one content digest (see `load_local_split`): `datasets` keys
    local files on their path and modification time, which a copy with `cp -p` / `rsync -a` keeps."""
    from datasets import config

    return os.path.join(config.HF_DATASETS_CACHE, "hardpos-by-content", digest[:32])


def load_local_split(folder: str | Path, config: str | None, split: str) -> tuple[Dataset, dict]:
    """One split of a local Hub-style dataset folder, read by content, with the identity of that content.

    `datasets` keys its cache for a local folder on the folder's name and README, not on the data
    files, so two folders named alike (or one rebuilt in place) could return each other's cached
    rows. The split is therefore loaded into a cache folder named by the sha256 of its data files.
    Used for evaluation sets and training sets alike.
    """
    folder = Path(folder).expanduser().resolve()
    try:
        builder = load_dataset_builder(str(folder), config)
    except ValueError as err:
        raise UserInputError(f"{folder}: {str(err).splitlines()[0]}") from err
    config = builder.config.name
    data_files = (builder.config.data_files or {}).get(split)
    if not data_files:
        splits = sorted((builder.config.data_files or {}).keys())
        raise UserInputError(f"{folder} config {config!r} has no files for split {split!r} (splits: {splits})")
    digest = sha256_files(data_files, root=folder)
    if all(str(f).endswith(".parquet") for f in data_files):
        if sum(_parquet_rows(f) for f in data_files) == 0:
            raise UserInputError(f"{folder} config {config!r} split {split!r} has no rows ({len(data_files)} empty file(s))")
    from datasets.exceptions import DatasetGenerationError

    try:
        dataset = load_dataset(str(folder), config, split=split, cache_dir=content_cache_dir(digest))
    except (ValueError, DatasetGenerationError) as err:  # e.g. a parquet file with no rows, a garbled file
        raise UserInputError(f"{folder} config {config!r} split {split!r}: cannot read ({_first_line(err)})") from err
    if len(dataset) == 0:
        raise UserInputError(f"{folder} config {config!r} split {split!r} has no rows")
    return dataset, {"path": str(folder), "config": config, "split": split, "sha256": digest}


def _parquet_rows(path: str | Path) -> int:
    """Rows in a parquet file, from its footer; a garbled file is refused by name."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as err:
        raise UserInputError(f"{path}: not a readable parquet file ({_first_line(err)}); rebuild or re-download it") from err


def dataset_source(dataset: str | Dataset | DatasetDict) -> str:
    """The dataset a result belongs to: a local folder's resolved path, a Hub id, or an in-memory
    dataset's fingerprint; saved configs from another source are never merged into this one's report."""
    if isinstance(dataset, DatasetDict):
        return "in-memory:" + ",".join(d._fingerprint for d in dataset.values())
    if isinstance(dataset, Dataset):
        return f"in-memory:{dataset._fingerprint}"
    folder = Path(dataset).expanduser()
    return str(folder.resolve()) if folder.exists() else str(dataset)


def load_eval_sets(
    dataset: str | Dataset | DatasetDict, configs: Sequence[str] | None, split: str
) -> dict[str, EvalSet]:
    """The requested configs, each with the identity of its content.

    A local folder is read by content (`load_local_split`), and only when its README declares every
    data file (`check_declared_folder`): never pooled into an undeclared "default" config.
    """
    if isinstance(dataset, Dataset):
        return {configs[0] if configs else "default": EvalSet("default", dataset, {"fingerprint": dataset._fingerprint})}
    if isinstance(dataset, DatasetDict):
        chosen = dataset[split]
        name = configs[0] if configs else "default"
        return {name: EvalSet(name, chosen, {"fingerprint": chosen._fingerprint})}
    require_dataset_exists(dataset)
    folder = Path(dataset).expanduser()
    if folder.is_dir():
        from .data.hub_folder import check_declared_folder

        check_declared_folder(folder)
    try:
        available = get_dataset_config_names(str(folder) if folder.exists() else dataset)
    except Exception as err:  # offline Hub ids, unreadable READMEs: say which dataset and why
        raise UserInputError(f"cannot read dataset {dataset!r}: {str(err).splitlines()[0]}") from err
    names = list(configs) if configs else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UserInputError(f"dataset {dataset!r} has no config(s) {unknown}; available: {list(available)}")
    if folder.exists():
        return {name: EvalSet(name, *load_local_split(folder, name, split)) for name in names}
    revision = hub_revision(dataset, "dataset")
    sets = {}
    for name in names:
        loaded = load_dataset(dataset, name, split=split, revision=revision)
        sets[name] = EvalSet(name, loaded, {"hub_id": dataset, "config": name, "split": split, "revision": revision})
    return sets


def check_run_options(batch_size: int, num_workers: int, max_rows: int | None, bootstrap_samples: int = 0) -> None:
    """Refuse invalid numbers before anything is loaded (never silently replaced by a default)."""
    if batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {batch_size}")
    if num_workers < 0:
        raise UserInputError(f"--num-workers must be >= 0, got {num_workers}")
    if max_rows is not None and max_rows < 1:
        raise UserInputError(f"--max-rows must be >= 1, got {max_rows}")
    if bootstrap_samples < 0:
        raise UserInputError(f"--bootstrap must be >= 0, got {bootstrap_samples}")


def check_output_writable(output_dir: str | Path) -> None:
    """Fail before any scoring if results could not be saved (the work would be lost)."""
    output_dir = Path(output_dir)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        output_folder.write_text(output_dir / ".hardpos-write-test", "ok")  # a unique temporary name, renamed
        (output_dir / ".hardpos-write-test").unlink(missing_ok=True)  # another run may have removed it
    except OSError as err:
        raise UserInputError(f"--output {output_dir} is not writable ({err.strerror or err})") from err


def evaluate_model(
    model: str,
    dataset: str | Dataset | DatasetDict,
    configs: Sequence[str] | None = None,
    split: str = "test",
    *,
    batch_size: int = 64,
    num_workers: int = 0,
    device: str | None = None,
    precision: str = "fp32",
    allow_tf32: bool = False,
    max_rows: int | None = None,
    bootstrap_samples: int = 0,
    output_dir: str | Path | None = None,
    resume: bool = True,
    progress: bool = True,
    cache_dir: str | Path | None = None,
    scorer_provider: Callable[[], ITMScorer] | None = None,
    make_scorer: Callable[..., ITMScorer] | None = None,
    open_clip_config: str | Path | dict | None = None,
    activation: str | None = None,
    tokenizer: str | Path | None = None,
    preset: str | None = None,
    image_backend: str = DEFAULT_IMAGE_BACKEND,
    protocol: str = "default",
    log=print,
) -> EvaluationReport:
    """Evaluate a Hub/local model, or a checkpoint file, on every config of a Hub/local hard-positive dataset.

    `model` may be an open_clip / OpenAI TorchScript / TSVLC-LoRA checkpoint file: it is converted
    once into the conversion cache (`conversion.resolve_model`, with `open_clip_config` — required
    except for OpenAI archives —, `activation` "quick_gelu"/"gelu" (default: the config's) and
    `tokenizer`) and scored like any HF model; `run["model_identity"]["converted_from"]` then names
    the checkpoint's sha256 and the activation. These three options are refused for HF models.

    `configs=None` evaluates all configs the dataset declares. With `output_dir`, each config's
    `scores-<config>.parquet` and the running `metrics.json` are written as soon as that config is
    done; rerunning (`resume=True`) reuses a saved config only if the model's and the dataset's
    content and every score-changing setting are unchanged, and keeps the configs of earlier runs
    of the same model and settings, so one folder collects them all. With `cache_dir`, embeddings
    persist on disk by content (see `EmbeddingCache`), shared by every dataset this model scores.
    `protocol="paper"` scores as the paper's code did (`hf_hardpos.protocol`: its preprocessing, and float16
    weights for OpenAI's on CUDA), setting `precision` and `image_backend` itself.
    `image_backend` picks the image processor's backend (`image_processing`: pil by default); its
    description is recorded in `metrics.json` and part of every resume and embedding-cache key.
    `preset` (a `hardpos zoo` name) or a Hub id the paper scored (`hf_hardpos.published`) adds the
    paper's figures and our difference to the report (`report.published`, table and `metrics.json`).
    `scorer_provider` lets a caller that scores several datasets with one model (a benchmark suite)
    share one scorer and its cache; it is called only if something must be scored, and its scorer
    must have been built with the same `precision`, `allow_tf32` and `device`. `make_scorer` (called
    as `ITMScorer` is) builds the scorer otherwise: `multi_eval` passes one that shares decoded pixels
    between models, or shards the work across processes.
    """
    from .conversion import resolve_model

    check_run_options(batch_size, num_workers, max_rows, bootstrap_samples)
    if output_dir is not None:
        check_output_writable(output_dir)
    model_path = resolve_model(model, open_clip_config, activation, tokenizer, progress=progress)
    identity = identify_model(model_path)
    eval_sets = load_eval_sets(dataset, configs, split)
    for name, eval_set in eval_sets.items():  # before the model is loaded, not after
        columns.require_columns(
            eval_set.dataset, [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], f"{dataset} config {name!r}"
        )

    from transformers import AutoConfig

    try:
        if open_clip_native.is_native(model_path):
            max_length = open_clip_native.context_length(model_path)
        else:
            max_length = text_context_length(AutoConfig.from_pretrained(model_path))
    except (OSError, ValueError) as err:
        raise UserInputError(f"cannot read the text context length of model {model!r}: {str(err).splitlines()[0]}") from err
    chosen = resolve_protocol(protocol, str(model), identity, pick_device(device).type, precision, image_backend, preset)
    precision, image_backend = chosen.precision, chosen.image_backend
    settings = {
        "protocol": chosen.to_dict(),
        "split": split,
        "max_rows": max_rows,
        "bootstrap_samples": bootstrap_samples,
        "precision": precision,
        "allow_tf32": allow_tf32,
        "device": pick_device(device).type,
        "max_length": max_length,
        "image_processor": image_processor_settings(model_path, image_backend),
        "versions": RESULT_VERSIONS,
        "exif_orientation": EXIF_ORIENTATION,
    }
    report = EvaluationReport(model=str(model), dataset=str(dataset), source=dataset_source(dataset))
    report.run = {
        "model_identity": identity,
        "settings": {**settings, "batch_size": batch_size, "num_workers": num_workers},
        "settings_key": digest_of(settings),
        "environment": environment(),
        "preset": preset,  # the `hardpos zoo` preset the weights are, when given (published rows)
    }
    known = None not in (identity.get("sha256"), identity.get("revision", "local"))
    report.run["key"] = digest_of([identity, settings]) if known else None
    keys = {}
    for name, eval_set in eval_sets.items():
        data_known = eval_set.identity.get("revision", "local") is not None
        keys[name] = digest_of([identity, eval_set.identity, settings]) if known and data_known else None
    with contextlib.ExitStack() as held:
        if output_dir is not None:
            held.enter_context(output_folder.locked(output_dir, log))
            output_dir = partial_run_folder(output_dir, max_rows, log)
            held.enter_context(output_folder.locked(output_dir, log))
            report.output_dir = str(output_dir)
            if resume:
                require_same_model(output_dir, identity, model)
                report.merge_saved(output_dir, keys, log=log)
        _score_missing(
            report, eval_sets, keys, output_dir, model, model_path, scorer_provider, cache_dir,
            batch_size, num_workers, device, precision, allow_tf32, progress, max_rows, bootstrap_samples, log,
            make_scorer=make_scorer,
        )
    return report


def _model_location(identity: Mapping[str, Any]) -> str | None:
    """Where a model comes from (its folder or Hub id), whatever its content: a folder whose weights were
    replaced is the same model, re-evaluated; another folder is another model."""
    return identity.get("path") or identity.get("hub_id") or identity.get("checkpoint_sha256")


def require_same_model(output_dir: str | Path, identity: Mapping[str, Any], model: str) -> None:
    """Refuse to resume into a folder holding another model's results: merging would drop them (or, run
    concurrently, file one model's scores under the other's name). One `--output` per model."""
    saved_file = Path(output_dir) / "metrics.json"
    if not saved_file.exists():
        return
    try:
        saved = json.loads(saved_file.read_text())
    except (OSError, ValueError):
        return
    saved_identity = saved.get("run", {}).get("model_identity") or {}
    if saved.get("results") and _model_location(saved_identity) not in (None, _model_location(identity)):
        raise UserInputError(
            f"--output {output_dir} holds the results of another model ({saved.get('model')}); use one --output per "
            f"model, or --no-resume to replace them with {model}'s"
        )


def partial_run_folder(output_dir: str | Path, max_rows: int | None, log=print) -> Path:
    """Where a `--max-rows N` run saves: `output_dir`, unless that holds a fuller result (all rows, or
    more than N), which a partial run must never replace; then `output_dir/max-rows-N`, said in the log."""
    output_dir = Path(output_dir)
    saved_file = output_dir / "metrics.json"
    if max_rows is None or not saved_file.exists():
        return output_dir
    try:
        saved = json.loads(saved_file.read_text())
    except (OSError, ValueError):
        return output_dir
    saved_rows = saved.get("run", {}).get("settings", {}).get("max_rows")
    if saved.get("results") and (saved_rows is None or saved_rows > max_rows):
        beside = output_dir / f"max-rows-{max_rows}"
        held = "all rows" if saved_rows is None else f"the first {saved_rows} rows"
        log(f"{output_dir} holds a result on {held}; this --max-rows {max_rows} run is saved in {beside} instead")
        return beside
    return output_dir


def _score_missing(
    report: EvaluationReport, eval_sets, keys, output_dir, model, model_path, scorer_provider, cache_dir,
    batch_size, num_workers, device, precision, allow_tf32, progress, max_rows, bootstrap_samples, log,
    make_scorer: Callable[..., ITMScorer] | None = None,
) -> None:
    """Score the configs `report` does not hold yet, saving after each; then order and aggregate."""
    settings = report.run["settings"]
    identity = report.run["model_identity"]
    split = settings["split"]
    todo = [name for name in eval_sets if name not in report.results]
    if todo and scorer_provider is not None:
        scorer = scorer_provider()
        if (scorer.precision, scorer.allow_tf32, scorer.device.type) != (precision, allow_tf32, settings["device"]):
            raise ValueError("scorer_provider's scorer was built with other precision/TF32/device settings")
    elif todo:
        loaded_model, processor = load_model_and_processor(model_path, settings["image_processor"]["backend"])
        cache = None
        if cache_dir is not None:
            if report.run["key"] is None:
                log(f"embedding cache not used: the model's revision is unknown offline ({model})")
            else:
                embedding_settings = {
                    k: settings[k] for k in ("precision", "allow_tf32", "device", "max_length", "versions", "image_processor")
                }
                cache = EmbeddingCache(cache_dir, namespace=digest_of([identity, embedding_settings]))
        scorer = (make_scorer or ITMScorer)(
            loaded_model, processor, batch_size, num_workers, device, precision, allow_tf32, progress, cache
        )
    for name in todo:
        eval_set = eval_sets[name].dataset
        if max_rows is not None:
            eval_set = eval_set.select(range(min(max_rows, len(eval_set))))
        s = score_eval_set(scorer, eval_set)
        groups = _image_groups(eval_set)
        if groups is not None:
            s["image_id"] = groups
        truncation = s.pop("truncation")
        report.scores[name] = s
        report.results[name] = metrics_from_scores(
            s["original"], s["negative"], s["positive"], bootstrap_samples, groups=groups
        )
        report.provenance[name] = {
            "key": keys[name],
            "source": report.source,
            "key_parts": {"model": identity, "settings": report.run["settings_key"]},
            "dataset": eval_sets[name].identity,
            "split": split,
            "truncation": truncation.to_dict(),
            "bootstrap": bootstrap_description(bootstrap_samples, groups is not None),
        }
        if output_dir is not None:
            report.save(output_dir)
    # Report the configs asked for first, in that order, then those kept from earlier runs.
    order = [*eval_sets, *(c for c in report.results if c not in eval_sets)]
    report.results = {config: report.results[config] for config in order}
    report.provenance = {config: report.provenance[config] for config in order if config in report.provenance}
    report.aggregates = replace_aggregates(report.results, report.scores, bootstrap_samples)
    report.published = beside_ours(report.model, report.dataset, {**report.results, **report.aggregates}, report.run.get("preset"))
    if output_dir is not None:
        report.save(output_dir)
