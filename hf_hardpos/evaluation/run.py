"""`evaluate_model`: what `hardpos eval` runs on a hard-positive dataset, resumable per config."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from datasets import Dataset, DatasetDict

from .. import columns
from ..embedding_cache import EmbeddingCache
from ..errors import UserInputError
from ..image_processing import DEFAULT_IMAGE_BACKEND
from ..metrics import metrics_from_scores
from ..model_source import ModelSource, model_location
from ..protocol import resolve_protocol
from ..provenance import digest_of, environment
from ..published import beside_ours
from ..scoring import EXIF_ORIENTATION, ITMScorer, default_num_workers, pick_device
from .. import output_folder
from . import intervals
from .aggregation import replace_aggregates
from .definitions import RESULT_VERSIONS
from .eval_data import dataset_source, load_eval_sets
from ..output_folder import check_output_writable
from .report import EvaluationReport
from .tasks.hard_positive import image_groups, score_eval_set


def check_run_options(batch_size: int, num_workers: int | None, max_rows: int | None, bootstrap_samples: int = 0) -> None:
    """Refuse invalid numbers before anything is loaded (never silently replaced by a default)."""
    if batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {batch_size}")
    if num_workers is not None and num_workers < 0:  # None: the machine's default, resolved by the runner
        raise UserInputError(f"--num-workers must be >= 0, got {num_workers}")
    if max_rows is not None and max_rows < 1:
        raise UserInputError(f"--max-rows must be >= 1, got {max_rows}")
    if bootstrap_samples < 0:
        raise UserInputError(f"--bootstrap must be >= 0, got {bootstrap_samples}")


def evaluate_model(
    model: str | ModelSource,
    dataset: str | Dataset | DatasetDict,
    configs: Sequence[str] | None = None,
    split: str = "test",
    *,
    batch_size: int = 64,
    num_workers: int | None = None,
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
    as `ITMScorer` is) builds the scorer otherwise: `evaluation.multi_model` passes one that shares decoded pixels
    between models, or shards the work across processes.
    """
    num_workers = default_num_workers() if num_workers is None else num_workers
    check_run_options(batch_size, num_workers, max_rows, bootstrap_samples)
    if output_dir is not None:
        check_output_writable(output_dir)
    source = ModelSource.resolve(model, open_clip_config, activation, tokenizer, progress=progress)
    identity = source.identity
    eval_sets = load_eval_sets(dataset, configs, split)
    for name, eval_set in eval_sets.items():  # before the model is loaded, not after
        columns.require_columns(
            eval_set.dataset, [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], f"{dataset} config {name!r}"
        )
    max_length = source.context_length()
    chosen = resolve_protocol(protocol, source.name, identity, pick_device(device).type, precision, image_backend, preset)
    precision, image_backend = chosen.precision, chosen.image_backend
    settings = {
        "protocol": chosen.to_dict(),
        "split": split,
        "max_rows": max_rows,
        "precision": precision,
        "allow_tf32": allow_tf32,
        "device": pick_device(device).type,
        "max_length": max_length,
        "image_processor": source.image_processor_settings(image_backend),
        "versions": RESULT_VERSIONS,
        "exif_orientation": EXIF_ORIENTATION,
    }
    report = EvaluationReport(model=source.name, dataset=str(dataset), source=dataset_source(dataset))
    report.run = {
        "model_identity": identity,
        # Intervals are recomputed from the per-row scores on every run (`intervals`), so --bootstrap is recorded
        # beside the scoring settings, not in the key that decides what to rescore.
        "settings": {**settings, "batch_size": batch_size, "num_workers": num_workers, "bootstrap_samples": bootstrap_samples},
        "settings_key": digest_of(settings),
        "environment": environment(),
        "preset": preset,  # the `hardpos zoo` preset the weights are, when given (published rows)
    }
    known = source.known
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
                require_same_model(output_dir, source)
                report.merge_saved(output_dir, keys, log=log)
        _score_missing(
            report, eval_sets, keys, output_dir, source, scorer_provider, cache_dir,
            batch_size, num_workers, device, precision, allow_tf32, progress, max_rows, bootstrap_samples, log,
            make_scorer=make_scorer,
        )
    return report


def _score_missing(
    report: EvaluationReport, eval_sets, keys, output_dir, source: ModelSource, scorer_provider, cache_dir,
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
        loaded_model, processor = source.load(settings["image_processor"]["backend"])
        cache = None
        if cache_dir is not None:
            if report.run["key"] is None:
                log(f"embedding cache not used: the model's revision is unknown offline ({source.name})")
            else:
                embedding_settings = {
                    k: settings[k] for k in ("precision", "allow_tf32", "device", "max_length", "versions", "image_processor")
                }
                cache = EmbeddingCache(cache_dir, namespace=digest_of([identity, embedding_settings]))
        scorer = (make_scorer or ITMScorer)(
            loaded_model, processor, batch_size, num_workers, device, precision, allow_tf32, progress, cache
        )
    pixels = getattr(scorer, "pixels", None) if todo else None  # a `pixel_store.PixelStore`, when shared
    for name in todo:
        eval_set = eval_sets[name].dataset
        if max_rows is not None:
            eval_set = eval_set.select(range(min(max_rows, len(eval_set))))
        pixels_before = pixels.snapshot() if pixels is not None else None
        s = score_eval_set(scorer, eval_set)
        groups = image_groups(eval_set)
        if groups is not None:
            s["image_id"] = groups
        truncation = s.pop("truncation")
        report.scores[name] = s
        report.results[name] = metrics_from_scores(s["original"], s["negative"], s["positive"])
        report.provenance[name] = {
            "key": keys[name],
            "source": report.source,
            "key_parts": {"model": identity, "settings": report.run["settings_key"]},
            "dataset": eval_sets[name].identity,
            "split": split,
            "truncation": truncation.to_dict(),
        }
        pixel_record = pixels.record(pixels_before) if pixels is not None else None
        if pixel_record is not None:  # how many of this config's pixels the --pixel-cache served, rejected, ...
            report.provenance[name]["pixels"] = pixel_record
        if output_dir is not None:
            report.save(output_dir)
    # Report the configs asked for first, in that order, then those kept from earlier runs.
    order = [*eval_sets, *(c for c in report.results if c not in eval_sets)]
    report.results = {config: report.results[config] for config in order}
    report.provenance = {config: report.provenance[config] for config in order if config in report.provenance}
    report.aggregates = replace_aggregates(report.results, report.scores)
    intervals.attach(report.results, report.aggregates, report.provenance, report.scores, bootstrap_samples)
    report.published = beside_ours(report.model, report.dataset, {**report.results, **report.aggregates}, report.run.get("preset"))
    if output_dir is not None:
        report.save(output_dir)


def require_same_model(output_dir: str | Path, source: ModelSource) -> None:
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
    if saved.get("results") and model_location(saved_identity) not in (None, source.location):
        raise UserInputError(
            f"--output {output_dir} holds the results of another model ({saved.get('model')}); use one --output per "
            f"model, or --no-resume to replace them with {source.name}'s"
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
