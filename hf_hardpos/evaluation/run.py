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
from ..metrics import metrics_from_scores
from ..model_source import ModelSource, model_location
from ..protocol import resolve_protocol
from ..provenance import digest_of, environment
from .published_rows import beside_ours
from ..scoring import EXIF_ORIENTATION, ITMScorer, pick_device
from .. import output_folder
from . import intervals
from .aggregation import replace_aggregates
from .definitions import RESULT_VERSIONS
from .eval_data import dataset_source, load_eval_sets
from .options import RunOptions, split_keywords
from ..output_folder import check_output_writable
from .report import EvaluationReport
from .tasks.hard_positive import image_groups, score_eval_set


def evaluate_model(
    model: str | ModelSource,
    dataset: str | Dataset | DatasetDict,
    configs: Sequence[str] | None = None,
    split: str = "test",
    *,
    output_dir: str | Path | None = None,
    scorer_provider: Callable[[], ITMScorer] | None = None,
    options: RunOptions | None = None,
    **keywords,
) -> EvaluationReport:
    """Evaluate a Hub/local model, or a checkpoint file, on every config of a Hub/local hard-positive dataset.

    Settings are `RunOptions`' fields (`batch_size`, `num_workers`, `device`, `precision`, `allow_tf32`,
    `image_backend`, `protocol`, `max_rows`, `bootstrap_samples`, `cache_dir`, `resume`, `progress`,
    `preset`, `make_scorer`, `log`), given as keywords or as one `options` object, and `ModelOptions`'
    (`open_clip_config`, `activation`, `tokenizer`).

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
    given, conversion = split_keywords(keywords)
    options = (options or given).resolved()
    if output_dir is not None:
        check_output_writable(output_dir)
    source = ModelSource.resolve(model, conversion.open_clip_config, conversion.activation, conversion.tokenizer,
                                 progress=options.progress)
    eval_sets = load_eval_sets(dataset, configs, split)
    for name, eval_set in eval_sets.items():  # before the model is loaded, not after
        columns.require_columns(
            eval_set.dataset, [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], f"{dataset} config {name!r}"
        )
    report, options = _new_report(source, dataset, split, options)
    keys = {}
    for name, eval_set in eval_sets.items():
        data_known = eval_set.identity.get("revision", "local") is not None
        known = report.run["key"] is not None and data_known
        keys[name] = digest_of([source.identity, eval_set.identity, _key_settings(report)]) if known else None
    log = options.log
    with contextlib.ExitStack() as held:
        if output_dir is not None:
            held.enter_context(output_folder.locked(output_dir, log))
            output_dir = partial_run_folder(output_dir, options.max_rows, log)
            held.enter_context(output_folder.locked(output_dir, log))
            report.output_dir = str(output_dir)
            if options.resume:
                require_same_model(output_dir, source)
                report.merge_saved(output_dir, keys, log=log)
        _score_missing(report, eval_sets, keys, output_dir, source, scorer_provider, options)
    return report


def _key_settings(report: EvaluationReport) -> dict:
    """The score-changing settings of `report.run` (what the resume keys are made of)."""
    recorded = report.run["settings"]
    return {k: v for k, v in recorded.items() if k not in ("batch_size", "num_workers", "bootstrap_samples")}


def _new_report(source: ModelSource, dataset, split: str, options: RunOptions) -> tuple[EvaluationReport, RunOptions]:
    """An empty report with its run record (identity, settings, keys), and the options as the protocol sets them."""
    identity = source.identity
    device = pick_device(options.device).type
    chosen = resolve_protocol(options.protocol, source.name, identity, device, options.precision,
                              options.image_backend, options.preset)
    options = options.replace(precision=chosen.precision, image_backend=chosen.image_backend)
    settings = {
        "protocol": chosen.to_dict(),
        "split": split,
        "max_rows": options.max_rows,
        "precision": options.precision,
        "allow_tf32": options.allow_tf32,
        "device": device,
        "max_length": source.context_length(),
        "image_processor": source.image_processor_settings(options.image_backend),
        "versions": RESULT_VERSIONS,
        "exif_orientation": EXIF_ORIENTATION,
    }
    report = EvaluationReport(model=source.name, dataset=str(dataset), source=dataset_source(dataset))
    report.run = {
        "model_identity": identity,
        # Intervals are recomputed from the per-row scores on every run (`intervals`), so --bootstrap is recorded
        # beside the scoring settings, not in the key that decides what to rescore.
        "settings": {**settings, "batch_size": options.batch_size, "num_workers": options.num_workers,
                     "bootstrap_samples": options.bootstrap_samples},
        "settings_key": digest_of(settings),
        "environment": environment(),
        "preset": options.preset,  # the `hardpos zoo` preset the weights are, when given (published rows)
    }
    report.run["key"] = digest_of([identity, settings]) if source.known else None
    return report, options


def _scorer_for(report: EvaluationReport, source: ModelSource, scorer_provider, options: RunOptions) -> ITMScorer:
    """The shared scorer `scorer_provider` gives (checked against the settings), or one built here."""
    settings = report.run["settings"]
    if scorer_provider is not None:
        scorer = scorer_provider()
        if (scorer.precision, scorer.allow_tf32, scorer.device.type) != (options.precision, options.allow_tf32,
                                                                         settings["device"]):
            raise ValueError("scorer_provider's scorer was built with other precision/TF32/device settings")
        return scorer
    loaded_model, processor = source.load(settings["image_processor"]["backend"])
    cache = None
    if options.cache_dir is not None:
        if report.run["key"] is None:
            options.log(f"embedding cache not used: the model's revision is unknown offline ({source.name})")
        else:
            embedding_settings = {
                k: settings[k] for k in ("precision", "allow_tf32", "device", "max_length", "versions", "image_processor")
            }
            cache = EmbeddingCache(options.cache_dir, namespace=digest_of([report.run["model_identity"], embedding_settings]))
    return (options.make_scorer or ITMScorer)(loaded_model, processor, cache=cache, **options.scorer_keywords())


def _score_missing(
    report: EvaluationReport, eval_sets, keys, output_dir, source: ModelSource, scorer_provider, options: RunOptions,
) -> None:
    """Score the configs `report` does not hold yet, saving after each; then order and aggregate."""
    settings = report.run["settings"]
    todo = [name for name in eval_sets if name not in report.results]
    scorer = _scorer_for(report, source, scorer_provider, options) if todo else None
    pixels = getattr(scorer, "pixels", None) if todo else None  # a `pixel_store.PixelStore`, when shared
    for name in todo:
        eval_set = eval_sets[name].dataset
        if options.max_rows is not None:
            eval_set = eval_set.select(range(min(options.max_rows, len(eval_set))))
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
            "key_parts": {"model": report.run["model_identity"], "settings": report.run["settings_key"]},
            "dataset": eval_sets[name].identity,
            "split": settings["split"],
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
    intervals.attach(report.results, report.aggregates, report.provenance, report.scores, options.bootstrap_samples)
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
