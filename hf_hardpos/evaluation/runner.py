"""The one runner: any registered task on one dataset, resumable per unit, keyed by content, one `Section`.

`hardpos eval --dataset`, every dataset of a suite and the trainer's evaluations all score through here,
so a number logged in training equals the CLI's and every output folder resumes the same way.

A dataset is scored in *units*: one per config for a task that scores its configs independently
(`Task.per_config`: the hard-positive rates, whose configs are REPLACE's subsets), else the whole
dataset as one unit (caption selection's aggregates, Winoground, zero-shot). With a folder, each
unit's result is saved as soon as it is done, in that folder's `metrics.json` (and its per-row scores
in `scores-<row>.parquet` when the task keeps them, `Task.row_scores`), under a key made of the model's
content, the unit's data content (local files by sha256, Hub ids by commit), the task and every
score-changing setting. A rerun reuses a saved unit only when its key is the same, and keeps the units
of earlier runs of the same model and settings on the same dataset, so one folder collects them all.
Aggregates over units (REPLACE's pooled column, intervals) are recomputed from the saved rows each run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import DatasetDict

from .. import output_folder
from ..compute import pick_device
from ..errors import UserInputError
from ..model_source import ModelSource
from ..protocol import resolve_protocol
from ..provenance import digest_of, environment
from ..scoring import EXIF_ORIENTATION, ITMScorer
from .definitions import EMBEDDING_VERSIONS, RESULT_VERSIONS
from .eval_data import dataset_identity, dataset_source, load_eval_sets
from .options import RunOptions
from .paper_data import build_record
from .published_rows import beside_ours
from .report import EvaluationReport
from .run_folder import partial_run_folder, read_saved, require_same_model
from .section import WHOLE, Section
from .tasks import Task, TaskData, get_task


class LazyScorer:
    """Loads the model only when some unit actually needs scoring (a fully resumed run does not)."""

    def __init__(self, source: ModelSource, options: RunOptions, cache=None):
        self.source, self.options, self.cache, self.scorer = source, options, cache, None

    def __call__(self) -> ITMScorer:
        if self.scorer is None:
            loaded, processor = self.source.load(self.options.image_backend)
            keywords = {"cache": self.cache, **self.options.scorer_keywords()}
            make = self.options.make_scorer
            self.scorer = (
                ITMScorer(loaded, processor, **keywords)
                if make is None
                else make(self.source, loaded, processor, **keywords)
            )
        return self.scorer


@dataclass(frozen=True)
class ModelRun:
    """What every dataset one model scores in one run shares: the model, the options (as the protocol set
    them), the score-changing settings every key is made of, and one scorer (one embedding cache)."""

    source: ModelSource
    options: RunOptions
    settings: dict
    scorer: Callable[[], ITMScorer]

    @classmethod
    def start(cls, source: ModelSource, options: RunOptions) -> ModelRun:
        """`options` resolved for `source`: `--protocol paper` sets precision and image backend."""
        device = pick_device(options.device).type
        chosen = resolve_protocol(
            options.protocol,
            source,
            device,
            options.precision,
            options.image_backend,
            options.preset,
        )
        options = options.replace(precision=chosen.precision, image_backend=chosen.image_backend)
        settings = {
            "protocol": chosen.to_dict(),
            "max_rows": options.max_rows,
            "precision": options.precision,
            "allow_tf32": options.allow_tf32,
            "device": device,
            "max_length": source.context_length(),
            "image_processor": source.image_processor_settings(options.image_backend),
            "versions": RESULT_VERSIONS,
            "exif_orientation": EXIF_ORIENTATION,
        }
        return cls(
            source,
            options,
            settings,
            LazyScorer(source, options, _embedding_cache(source, settings, options)),
        )

    def record(self, split: str) -> dict[str, Any]:
        """The `run` entry of a dataset's `metrics.json`: model identity, settings, their keys, environment."""
        settings = {**self.settings, "split": split}
        return {
            "model_identity": self.source.identity,
            # Intervals are recomputed from the per-row scores on every run (`intervals`), so --bootstrap is
            # recorded beside the scoring settings, not in the key that decides what to rescore.
            "settings": {
                **settings,
                "batch_size": self.options.batch_size,
                "num_workers": self.options.num_workers,
                "bootstrap_samples": self.options.bootstrap_samples,
            },
            "settings_key": digest_of(settings),
            "environment": environment(),
            "preset": self.options.preset,  # the `hardpos zoo` preset the weights are, when given (published rows)
            "key": digest_of([self.source.identity, settings]) if self.source.known else None,
        }


def _embedding_cache(source: ModelSource, settings: dict, options: RunOptions):
    """The on-disk embedding cache of `--cache-dir`, namespaced by the model and what changes an embedding."""
    if options.cache_dir is None:
        return None
    if not source.known:
        options.log(f"embedding cache not used: the model's revision is unknown offline ({source.name})")
        return None
    from ..embedding_cache import EmbeddingCache

    embedding_settings = {
        k: settings[k] for k in ("precision", "allow_tf32", "device", "max_length", "image_processor")
    }
    embedding_settings["versions"] = EMBEDDING_VERSIONS
    return EmbeddingCache(options.cache_dir, namespace=digest_of([source.identity, embedding_settings]))


def dataset_units(task: Task, data: TaskData, where: str) -> dict[str, tuple[TaskData, dict | None]]:
    """The units `data` is scored in, each with its data identity when loading it told (else None).

    A `per_config` task's configs are loaded here, once, and their columns checked (`Task.required_columns`)
    before any model is loaded; any other task's dataset is one unit, loaded by the task itself.
    """
    if not task.per_config:
        return {WHOLE: (data, None)}
    if isinstance(data.source, Mapping) and not isinstance(
        data.source, DatasetDict
    ):  # rows loaded by the caller
        loaded = {name: (rows, None) for name, rows in data.source.items()}
    else:
        eval_sets = load_eval_sets(data.source, data.configs, data.split)
        loaded = {name: (s.dataset, s.identity) for name, s in eval_sets.items()}
    units = {}
    for name, (rows, identity) in loaded.items():
        task.check_columns(rows, f"{where} config {name!r}")
        units[name] = (TaskData({name: rows}, [name], data.split), identity)
    return units


def score_dataset(
    task_name: str, scorer: ITMScorer, data: TaskData, options: RunOptions | None = None
) -> Section:
    """`data` scored with `scorer`, nothing saved or resumed: the trainer's evaluations (`training_sets`)."""
    task = get_task(task_name)
    options = options or RunOptions(progress=False)
    units = dataset_units(task, data, data.describe())
    section = Section(task.name, data.describe())
    _score_units(task, {name: unit for name, (unit, _) in units.items()}, section, lambda: scorer, options)
    _finish(task, section, list(units), options)
    return section


def run_dataset(
    run: ModelRun,
    task_name: str,
    data: TaskData,
    folder: str | Path | None,
    *,
    label: str | None = None,
    text_only: bool = False,
) -> EvaluationReport:
    """`data` scored by `run`'s model with the registered task `task_name`, resumed from and saved in `folder`.

    `label` names the dataset as the user gave it (default: `data.describe()`); `text_only` adds the
    task's text-only figure (`Task.text_only`, SugarCrepe++'s TOT) to every config.
    """
    task = get_task(task_name)
    label = label or data.describe()
    if text_only and task.text_only is None:
        raise UserInputError(
            f"{label}: text_only applies to tasks with a text-only figure, not to {task.name}"
        )
    units = dataset_units(task, data, label)
    report = EvaluationReport(run.source.name, label, Section(task.name, label), run.record(data.split))
    report.source = dataset_source(data.source) if isinstance(data.source, str) else label
    keys = _unit_keys(run, task, data, units, report.run)
    with contextlib.ExitStack() as held:
        if folder is not None:
            held.enter_context(output_folder.locked(folder, run.options.log))
            folder = partial_run_folder(folder, run.options.max_rows, run.options.log)
            held.enter_context(output_folder.locked(folder, run.options.log))
            report.output_dir = str(folder)
            if run.options.resume:
                require_same_model(folder, run.source)
                _reuse_saved(report, task, folder, keys, run.options.log)
        todo = {name: unit for name, (unit, _) in units.items() if name not in report.section.provenance}
        if todo:
            report.section.aggregates = {}

        # What the data's build recorded (sources, counts): whether a difference to a paper may be shown.
        build = build_record(data.source) if isinstance(data.source, str) else None

        def saved(name: str) -> None:
            report.section.provenance[name].update(_unit_provenance(report, keys, units, name, data.split))
            if build is not None:
                report.section.provenance[name]["build"] = build
            if folder is not None:
                save(report, task, folder)

        _score_units(task, todo, report.section, run.scorer, run.options, saved)
        _finish(task, report.section, list(units), run.options)
        if text_only:
            task.text_only(report.section, run.scorer(), data, run.options.max_rows)
        report.section.published = beside_ours(
            run.source.name,
            label,
            report.section.rows(),
            run.options.preset,
            task.name,
            report.section.provenance,
            run.options.max_rows,
        )
        if folder is not None:
            save(report, task, folder)
    return report


def _unit_keys(run: ModelRun, task: Task, data: TaskData, units, record: dict) -> dict[str, str | None]:
    """Each unit's resume key, or None when a Hub revision is unknown (offline): then nothing is reused."""
    settings = {**run.settings, "split": data.split}
    keys = {}
    for name, (unit, identity) in units.items():
        if identity is None:
            identity = dataset_identity(data.source, data.split) if isinstance(data.source, str) else {}
            units[name] = (unit, identity)
        known = record["key"] is not None and identity.get("revision", "local") is not None
        keys[name] = (
            digest_of([run.source.identity, identity, task.name, unit.configs, settings]) if known else None
        )
    return keys


def _unit_provenance(report: EvaluationReport, keys, units, name: str, split: str) -> dict[str, Any]:
    """What a unit's result was computed from: its key and the inputs the key is made of."""
    return {
        "key": keys[name],
        "source": report.source,
        "key_parts": {"model": report.run["model_identity"], "settings": report.run["settings_key"]},
        "dataset": units[name][1],
        "split": split,
    }


def _score_units(
    task: Task,
    todo: Mapping[str, TaskData],
    section: Section,
    scorer: Callable[[], ITMScorer],
    options: RunOptions,
    done: Callable[[str], None] | None = None,
) -> None:
    """Score each unit of `todo` into `section` (results, per-row scores, provenance), calling `done` after each."""
    for name, unit in todo.items():
        current = scorer()
        pixels = getattr(current, "pixels", None)  # a `pixel_store.PixelStore`, when shared
        before = pixels.snapshot() if pixels is not None else None
        fresh = task.score(current, unit, options.max_rows)
        section.results.update(fresh.results)
        section.aggregates.update(fresh.aggregates)
        section.tie_rule, section.aggregation = fresh.tie_rule, fresh.aggregation
        section.row_scores.update(fresh.row_scores)
        provenance = {**fresh.provenance.get(name, {}), "rows": list(fresh.results)}
        record = pixels.record(before) if pixels is not None else None
        if record is not None:  # how many of this unit's pixels the --pixel-cache served, rejected, ...
            provenance["pixels"] = record
        section.provenance[name] = provenance
        if done is not None:
            done(name)


def _finish(task: Task, section: Section, asked: list[str], options: RunOptions) -> None:
    """Rows of the units asked for first, in that order, then those kept from earlier runs; then the task's
    aggregates over units (`Task.aggregate`)."""
    first = [
        row
        for unit in asked
        if unit in section.provenance
        for row in section.provenance[unit].get("rows", [unit])
    ]
    order = [*first, *(row for row in section.results if row not in first)]
    section.results = {row: section.results[row] for row in order if row in section.results}
    units = [
        *(u for u in asked if u in section.provenance),
        *(u for u in section.provenance if u not in asked),
    ]
    section.provenance = {unit: section.provenance[unit] for unit in units}
    if task.aggregate is not None:
        task.aggregate(section, options)


def _reuse_saved(
    report: EvaluationReport, task: Task, folder: Path, keys: dict[str, str | None], log
) -> None:
    """Take over the units saved in `folder` that are still valid (see the module docstring); each unit
    reused, recomputed or dropped is logged with why. A folder written under other result versions
    (older `metrics.json` layouts included) holds no valid unit: everything is rescored."""
    found = read_saved(folder, log)
    if found is None:
        return
    saved, saved_section = found
    same_run = report.run.get("key") is not None and saved["run"].get("key") == report.run["key"]
    section = report.section
    for unit, prov in saved_section.provenance.items():
        why = _why_not_reused(unit, prov, saved, saved_section, keys, same_run, report)
        rows = prov.get("rows", [unit])
        scores = _read_row_scores(task, folder, rows) if why is None else None
        if why is None and scores is None:
            why = "its per-row scores are missing or unreadable; recomputing"
        if why is None and task.row_scores is not None:  # never carry an edited figure forward
            why = next(
                (
                    f"{row}: {problem}; recomputing"
                    for row in rows
                    if (problem := task.row_scores.disagrees(saved_section.results[row], scores[row]))
                ),
                None,
            )
        if why is not None:
            log(f"{unit}: {why}")
            continue
        section.results.update({row: saved_section.results[row] for row in rows})
        section.provenance[unit] = prov
        section.row_scores.update(scores)
        report.saved_configs.update(scores)
        reason = (
            "same model, dataset content and settings"
            if unit in keys
            else "kept from an earlier run, same model and settings"
        )
        log(f"{unit}: reusing the scores saved in {folder} ({reason})")
    if section.provenance:
        section.aggregates = dict(saved_section.aggregates)
        section.tie_rule, section.aggregation = saved_section.tie_rule, saved_section.aggregation


def _why_not_reused(
    unit: str, prov: dict, saved: dict, saved_section: Section, keys, same_run: bool, report: EvaluationReport
) -> str | None:
    """None when a saved unit is valid now; else the line saying why it is recomputed or dropped."""
    if not all(row in saved_section.results for row in prov.get("rows", [unit])):
        return (
            "saved without its results; recomputing" if unit in keys else "dropped: saved without its results"
        )
    if unit in keys:
        if keys[unit] is None or prov.get("key") != keys[unit]:
            return (
                f"saved scores in {report.output_dir} came from other inputs or settings "
                f"({_what_differs(prov, report.run, keys[unit])}); recomputing"
            )
        return None
    if not same_run:
        return f"dropped from {output_folder.METRICS_FILE}: computed with another model or other settings"
    if prov.get("source") != report.source:
        return (
            f"dropped from {output_folder.METRICS_FILE}: computed on {prov.get('source', saved.get('dataset'))}, "
            f"not on {report.source}"
        )
    return None


def _what_differs(saved_provenance: dict, run: dict, new_key: str | None) -> str:
    if new_key is None:
        return "a Hub revision is unknown offline, so equality cannot be proven"
    saved_parts = saved_provenance.get("key_parts", {})
    current_parts = {"model": run.get("model_identity"), "settings": run.get("settings_key")}
    differing = [name for name, value in current_parts.items() if saved_parts.get(name) != value]
    return ", ".join(f"{name} changed" for name in differing) or "the dataset's content changed"


def _read_row_scores(task: Task, folder: Path, rows: list[str]) -> dict[str, dict] | None:
    """The saved per-row scores of `rows` (`Task.row_scores`), {} for a task that keeps none; None when missing."""
    if task.row_scores is None:
        return {}
    found = {}
    for row in rows:
        path = folder / f"scores-{row}.parquet"
        try:
            found[row] = task.row_scores.from_table(pq.read_table(path).to_pydict())
        except (OSError, KeyError, pa.ArrowException):  # absent, not a parquet, or without the task's columns
            return None
    return found


def save(report: EvaluationReport, task: Task, folder: str | Path) -> Path:
    """Write each row's `scores-<row>.parquet` not yet on disk (`Task.row_scores`), then `metrics.json`.

    Every file is written under a temporary name and renamed (`output_folder`), `metrics.json` last, so
    an interrupted save never leaves a unit listed whose scores are missing. Callers hold the folder's lock.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for row, scores in report.section.row_scores.items():
        if row in report.saved_configs or task.row_scores is None:
            continue
        with output_folder.atomic_path(folder / f"scores-{row}.parquet") as partial:
            pq.write_table(pa.table(task.row_scores.to_table(scores)), partial)
        report.saved_configs.add(row)
    output_folder.write_json(folder / output_folder.METRICS_FILE, report.to_dict(), default=_json_default)
    return folder


def _json_default(value):
    import numpy as np

    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")
