"""Recognise a finished run's output folder and load what it holds, without re-scoring anything.

Three layouts exist:

- `hardpos eval --dataset D --output OUT`: `OUT/metrics.json` (results, aggregates, provenance; since
  result layout 2 a `Section` with `task`, `tie_rule`, `aggregation`, and `model`, `dataset`, `run` beside
  it; before, hard positives only, without `task`) and one `OUT/scores-<config>.parquet` per config of a
  hard-positive set (s_c, s_n, s_p and the per-row outcomes);
- `hardpos eval --suite S --output OUT`: `OUT/metrics.json` with one section per dataset, and a
  sub-folder per dataset laid out like the above (before layout 2: a hard-positive dataset's only; the
  others held a `result.json`, which nothing reads any more);
- a fine-tuning output folder: `trainer_state.json` (its `log_history`: loss terms and eval metrics
  over steps), at the top or in its newest `checkpoint-*`, with the trainer's latest eval sections.

A *benchmark* is one evaluated dataset of a run; a *figure* is one row of it that the cross-run table
shows (REPLACE's pooled paper column, SWAP's only config, ...), with the rows it covers, so the paired
test can draw exactly those rows from both runs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..columns import REPLACE_SUBSETS
from ..errors import UserInputError
from ..evaluation.aggregation import describe, replace_aggregates
from ..evaluation.section import EVAL_SECTIONS_NAME
from ..metrics import METRIC_NAMES
from ..output_folder import METRICS_FILE

TRAINER_STATE = "trainer_state.json"
OUTCOME_COLUMNS = {"original_accuracy": "original_correct", "augmented_accuracy": "augmented_correct",
                   "brittleness": "brittle"}
KNOWN_NAMES = {"replace": "REPLACE", "swap": "SWAP"}  # the paper's column names
# `HardPosTrainer.evaluate` scores its eval sets with `ITMScorer`'s default precision (training/trainer.py); a
# section that records its own (`provenance["precision"]`) wins.
TRAINER_EVAL_PRECISION = "fp32"
SCORE_COLUMNS = ("original_score", "negative_score", "positive_score")


@dataclass
class Figure:
    """One row of a benchmark as the cross-run table shows it: its metrics and how they were obtained."""

    label: str  # the column group: "REPLACE", "SWAP", "sugarcrepe_pp [swap_att]"
    row: str  # the metrics.json row it is, e.g. "pooled(attributes,relations)" or "default"
    metrics: dict[str, Any]
    configs: list[str]  # the configs whose rows it counts (what a paired test draws)
    aggregation: str  # the caption line: how the figure aggregates rows (the same for every run of it)
    interval: str | None = None  # how this run's saved interval was obtained, if it has one
    recomputed: bool = False  # True: computed here from saved per-config rates (an older metrics.json)


@dataclass
class Benchmark:
    """One evaluated dataset of a run: its saved results and, for hard positives, its per-row scores."""

    name: str
    data: dict[str, Any]  # a `hardpos eval` metrics.json, or a suite / trainer section
    folder: Path | None = None  # where scores-<config>.parquet live (None: no per-row scores)
    task: str = "hard_positive"

    @property
    def results(self) -> dict[str, dict]:
        return self.data.get("results", {})

    @property
    def aggregates(self) -> dict[str, dict]:
        return self.data.get("aggregates", {})

    @property
    def provenance(self) -> dict[str, dict]:
        return self.data.get("provenance", {})

    @property
    def carries_rates(self) -> bool:
        """Whether its rows are the hard-positive rates (Original/Augmented Accuracy, Brittleness), whose
        per-row outcomes `scores-<config>.parquet` keeps; told from the rows, so every layout reads alike."""
        return _has_rates(self.data)

    def display_name(self) -> str:
        return KNOWN_NAMES.get(self.name.lower(), self.name)

    def figures(self, all_rows: bool = False) -> list[Figure]:
        """The rows the cross-run table shows: the paper's column where the data has one, else each config;
        with `all_rows`, every config (and every other task's every row) as well.

        REPLACE's paper column is the aggregate row marked `paper_column` (the pooled fraction over
        both subsets); a metrics.json written before that row existed gets it recomputed here from the
        saved per-subset rates and row counts (exact: each rate is a count over rows), flagged as such.
        """
        if not _has_rates(self.data):
            return self._other_task_figures(all_rows)
        paper = [(name, row) for name, row in self.aggregates.items()
                 if isinstance(row.get("aggregation"), dict) and row["aggregation"].get("paper_column")]
        recomputed = False
        if not paper and all(s in self.results for s in REPLACE_SUBSETS):
            paper = [(n, r) for n, r in replace_aggregates(self.results).items() if r["aggregation"]["paper_column"]]
            recomputed = True
        if paper:
            name, row = paper[0]
            how = {k: v for k, v in row["aggregation"].items() if k != "interval"}
            column = Figure(self.display_name(), name, row, list(row["aggregation"]["configs"]), describe(name, how),
                            row["aggregation"].get("interval"), recomputed)
            return [column, *(self._config_figures() if all_rows else [])]
        return self._config_figures()

    def _config_figures(self) -> list[Figure]:
        """One figure per config of a hard-positive set, each the fraction of its own rows."""
        tie_rule = self.data.get("metric_definitions", {}).get("tie_rule") or self.data.get("tie_rule", "")
        figures = []
        for config, row in self.results.items():
            label = self.display_name() if len(self.results) == 1 else f"{self.display_name()} [{config}]"
            how = f"{label} = fraction of the {row.get('num_examples', '?')} rows of config {config!r}"
            figures.append(Figure(label, config, row, [config], how + (f" ({tie_rule})" if tie_rule else ""),
                                  self.provenance.get(config, {}).get("interval")
                                  or self.provenance.get(config, {}).get("bootstrap")))
        return figures

    def _other_task_figures(self, all_rows: bool = False) -> list[Figure]:
        """Caption selection, Winoground, zero-shot: the aggregates (e.g. a category mean), else each row; with
        `all_rows`, every row (SugarCrepe's subsets, VALSE's pieces) and then the aggregates."""
        rows = {**self.results, **self.aggregates} if all_rows else (self.aggregates or self.results)
        how = self.data.get("aggregation", "")
        how = how if isinstance(how, str) else json.dumps(how)
        return [Figure(self.display_name() if len(rows) == 1 else f"{self.display_name()} [{name}]", name, row, [name],
                       f"{self.display_name()}: {how}" if how else self.display_name())
                for name, row in rows.items()]

    def data_identity(self, config: str) -> tuple | None:
        """What proves two runs scored the same rows of `config`: content digest (or Hub commit), split and
        row count; None when unknown (a Hub revision unknown offline, or no provenance saved)."""
        prov = self.provenance.get(config, {})
        dataset = prov.get("dataset", {})
        ident = dataset.get("sha256") or dataset.get("revision") or dataset.get("fingerprint")
        if not ident:
            return None
        return (str(ident), prov.get("split"), self.results.get(config, {}).get("num_examples"))

    def scores_file(self, config: str) -> Path | None:
        if self.folder is None:
            return None
        if any(char in config for char in "/\\\0"):  # it names a file in this folder, never a path out of it
            raise UserInputError(f"{self.folder / METRICS_FILE}: config name {config!r} holds a path separator")
        path = self.folder / f"scores-{config}.parquet"
        return path if path.is_file() else None

    def read_scores(self, config: str) -> dict[str, np.ndarray]:
        """The saved per-row table of one config as arrays (scores, outcomes, image ids when present); a file
        that is no parquet, or lacks a column or has one of the wrong type, is one line naming it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.scores_file(config)
        if path is None:
            raise UserInputError(f"{self.folder}: no scores-{config}.parquet (per-row scores of config {config!r})")
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as err:
            raise UserInputError(f"{path}: cannot read as parquet ({str(err).splitlines()[0]})") from err
        columns = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
        for column in (*SCORE_COLUMNS, *OUTCOME_COLUMNS.values()):
            values = columns.get(column)
            if values is None or values.dtype.kind not in "biuf":
                found = "missing" if values is None else f"of type {values.dtype}"
                raise UserInputError(f"{path}: column {column!r} is {found}, expected numbers")
        return columns

    def outcomes(self, configs: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray | None] | None:
        """The per-row 0/1 outcome of each rate over `configs`' rows (in order), and the rows' image ids.

        None when a config's per-row scores were not saved. Image ids are None unless every config has
        them; an id shared by two configs is one image (REPLACE's subsets share Visual Genome images).
        """
        if any(self.scores_file(c) is None for c in configs):
            return None
        tables = [self.read_scores(c) for c in configs]
        outcomes = {name: np.concatenate([t[column].astype(np.float64) for t in tables])
                    for name, column in OUTCOME_COLUMNS.items()}
        groups = None
        if all("image_id" in t for t in tables):
            groups = np.concatenate([t["image_id"].astype(str) for t in tables])
        return outcomes, groups


@dataclass
class Run:
    """One output folder: its kind, model, settings, benchmarks and (for fine-tuning) training log."""

    folder: Path
    kind: str  # "eval", "suite" or "finetune"
    model: str
    run: dict[str, Any] = field(default_factory=dict)  # model identity, settings, environment
    benchmarks: dict[str, Benchmark] = field(default_factory=dict)
    log_history: list[dict] = field(default_factory=list)
    trainer_state_file: Path | None = None
    group_means: dict[str, dict] = field(default_factory=dict)

    @property
    def settings(self) -> dict[str, Any]:
        return self.run.get("settings", {})

    def short_model(self) -> str:
        """The model as a table row names it: a Hub id as is, a local folder by its last part, or its last two
        when the last is a generic run folder (`checkpoint-500`, `seed-1`: `hp+hn/seed-1`)."""
        model = self.model
        if not (model.startswith(("/", ".", "~")) or model.count("/") > 1):
            return model
        path = Path(model)
        if re.fullmatch(r"(checkpoint|seed|step|epoch|run)[-_]?\d+", path.name) and path.parent.name:
            return f"{path.parent.name}/{path.name}"
        return path.name or model

    def protocol(self) -> dict[str, Any]:
        """Settings that make two runs' figures incomparable when they differ (model-specific ones excluded):
        dtype, row limit, split, and the `--protocol` with its image backend."""
        found = {k: self.settings.get(k) for k in ("precision", "max_rows", "split") if k in self.settings}
        protocol = self.settings.get("protocol")
        if isinstance(protocol, dict):
            found["protocol"] = protocol.get("name")
            found["image backend"] = protocol.get("image_backend")
        return found


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UserInputError(f"{path}: cannot read as JSON ({err})") from err
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: expected a JSON object")
    return data


def _checkpoint_step(path: Path) -> int:
    match = re.fullmatch(r"checkpoint-(\d+)", path.name)
    return int(match.group(1)) if match else -1


def find_trainer_state(folder: Path) -> Path | None:
    """`trainer_state.json` at the top of a fine-tuning folder (`save_state`), else in its newest checkpoint."""
    top = folder / TRAINER_STATE
    if top.is_file():
        return top
    checkpoints = sorted((p for p in folder.glob("checkpoint-*") if (p / TRAINER_STATE).is_file()), key=_checkpoint_step)
    return checkpoints[-1] / TRAINER_STATE if checkpoints else None


def _benchmark_name(data: dict) -> str:
    """A single eval's benchmark name: REPLACE when it holds both subsets, else the dataset's last path part."""
    if all(s in data.get("results", {}) for s in REPLACE_SUBSETS):
        return "replace"
    return Path(str(data.get("dataset", "dataset")).rstrip("/")).name or "dataset"


def _has_rates(section: dict) -> bool:
    rows = {**section.get("results", {}), **section.get("aggregates", {})}
    return any(isinstance(r, dict) and "brittleness" in r for r in rows.values())


def _suite_folders(folder: Path) -> dict[tuple, Path]:
    """Sub-folders holding a dataset's metrics.json, keyed by (source, configs)."""
    found = {}
    for sub in sorted(p for p in folder.iterdir() if (p / METRICS_FILE).is_file()):
        data = _read_json(sub / METRICS_FILE)
        check_metrics(sub / METRICS_FILE, data)
        found[(str(data.get("dataset")), tuple(sorted(data.get("results", {}))))] = sub
    return found


def load_run(folder: str | Path) -> Run:
    """Recognise and load an eval, suite or fine-tuning output folder (see the module docstring)."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserInputError(f"run not found: {folder} (no such folder)")
    metrics_file = folder / METRICS_FILE
    if metrics_file.is_file():
        data = _read_json(metrics_file)
        check_metrics(metrics_file, data)
        if "datasets" in data:
            return _load_suite(folder, data)
        if "results" in data:  # one dataset's result; written before results named their task: hard positives
            bench = Benchmark(_benchmark_name(data), data, folder, task=data.get("task") or "hard_positive")
            return Run(folder, "eval", str(data.get("model", folder.name)), data.get("run", {}), {bench.name: bench})
        raise UserInputError(f"{metrics_file}: neither a `hardpos eval` result (no `results`) nor a suite's (no `datasets`)")
    state_file = find_trainer_state(folder)
    if state_file is not None:
        return _load_finetune(folder, state_file)
    # One or two levels down: a `--model A --model B` folder holds OUT/<name>/, the demo's output eval/<variant>/.
    nested = sorted(p.parent.relative_to(folder).as_posix() for pattern in ("*/" + METRICS_FILE, "*/*/" + METRICS_FILE)
                    for p in folder.glob(pattern))
    hint = f"; it holds runs in {', '.join(str(folder / n) for n in nested)}: pass one of those" if nested else ""
    raise UserInputError(f"{folder}: no {METRICS_FILE} (eval or suite output) and no {TRAINER_STATE} "
                         f"(fine-tuning output){hint}")


def _load_suite(folder: Path, data: dict) -> Run:
    subfolders = _suite_folders(folder)
    run = Run(folder, "suite", str(data.get("model", folder.name)), data.get("run", {}),
              group_means=data.get("group_means", {}))
    for name, section in data["datasets"].items():
        # A dataset's sub-folder (every task's since result layout 2, hard positives' before) has its
        # metrics.json, with the per-config provenance, beside the per-row scores.
        sub = subfolders.get((str(section.get("source")), tuple(sorted(section.get("results", {})))))
        saved = _read_json(sub / METRICS_FILE) if sub is not None else section
        run.benchmarks[name] = Benchmark(name, {**section, **saved}, sub, task=section.get("task") or "other")
    return run


def _load_finetune(folder: Path, state_file: Path) -> Run:
    state = _read_json(state_file)
    check_log_history(state_file, state.get("log_history", []))
    run = Run(folder, "finetune", folder.name, {}, log_history=list(state.get("log_history", [])),
              trainer_state_file=state_file)
    # The trainer saves its latest eval sections with each checkpoint; the newest is the latest evaluation.
    checkpoints = sorted((p for p in folder.glob("checkpoint-*") if (p / EVAL_SECTIONS_NAME).is_file()), key=_checkpoint_step)
    candidates = [*reversed(checkpoints), folder]
    sections_file = next((p / EVAL_SECTIONS_NAME for p in candidates if (p / EVAL_SECTIONS_NAME).is_file()), None)
    if sections_file is not None:
        sections = _read_json(sections_file)
        check_sections(sections_file, sections, "")
        for name, section in sections.items():
            run.benchmarks[name] = Benchmark(name, section, None, task=section.get("task") or "other")
        recorded = {b.provenance.get("precision") for b in run.benchmarks.values()} - {None}
        precision = recorded.pop() if len(recorded) == 1 else TRAINER_EVAL_PRECISION
        run.run = {"settings": {"precision": precision}}
    return run


# A light schema check of what a run folder's readers use: a hand-edited or damaged folder is one line
# naming the file and the field, never a traceback, and never a NaN that passes every comparison.

def _fail(path: Path, field: str, expected: str, value: Any) -> None:
    raise UserInputError(f"{path}: field {field} must be {expected}, got {json.dumps(value, default=str)[:60]}")


def _require_dict(path: Path, field: str, value: Any, optional: bool = True) -> dict:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        _fail(path, field, "a JSON object", value)
    return value


def _require_finite(path: Path, field: str, value: Any) -> None:
    """Every number under `value` finite (NaN and Infinity are valid to Python's json, never a rate)."""
    if isinstance(value, float) and not math.isfinite(value):
        _fail(path, field, "a finite number", value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _require_finite(path, f"{field}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _require_finite(path, f"{field}[{index}]", item)


def _check_rows(path: Path, field: str, rows: Any) -> None:
    """`results` / `aggregates`: objects whose rates and counts are numbers (not text, not booleans)."""
    for name, row in _require_dict(path, field, rows).items():
        row = _require_dict(path, f"{field}.{name}", row, optional=False)
        for key in (*METRIC_NAMES, "num_examples"):
            if key in row and (isinstance(row[key], bool) or not isinstance(row[key], (int, float))):
                _fail(path, f"{field}.{name}.{key}", "a number", row[key])
        aggregation = row.get("aggregation")
        if isinstance(aggregation, dict) and "configs" in aggregation and not (
                isinstance(aggregation["configs"], list) and all(isinstance(c, str) for c in aggregation["configs"])):
            _fail(path, f"{field}.{name}.aggregation.configs", "a list of config names", aggregation["configs"])
    _require_finite(path, field, rows)


def check_sections(path: Path, sections: Any, field: str) -> None:
    """A suite's `datasets` (or a fine-tuning run's eval sections): each an object with checked rows."""
    for name, section in _require_dict(path, field or "(top level)", sections).items():
        where = f"{field}.{name}" if field else name
        section = _require_dict(path, where, section, optional=False)
        for part in ("results", "aggregates"):
            _check_rows(path, f"{where}.{part}", section.get(part))
        _require_dict(path, f"{where}.provenance", section.get("provenance"))


def check_metrics(path: Path, data: dict) -> None:
    """A `metrics.json` (eval or suite): the fields `load_run` and the report read, of their types."""
    for key in ("model", "dataset"):
        if key in data and not isinstance(data[key], str):
            _fail(path, key, "text", data[key])
    run = _require_dict(path, "run", data.get("run"))
    _require_dict(path, "run.settings", run.get("settings"))
    for part in ("results", "aggregates"):
        _check_rows(path, part, data.get(part))
    for config, prov in _require_dict(path, "provenance", data.get("provenance")).items():
        _require_dict(path, f"provenance.{config}", prov, optional=False)
        _require_dict(path, f"provenance.{config}.dataset", prov.get("dataset"))
    if "datasets" in data:
        check_sections(path, data["datasets"], "datasets")
    for group, mean in _require_dict(path, "group_means", data.get("group_means")).items():
        mean = _require_dict(path, f"group_means.{group}", mean, optional=False)
        for key in ("value", "num_datasets"):
            if isinstance(mean.get(key), bool) or not isinstance(mean.get(key), (int, float)):
                _fail(path, f"group_means.{group}.{key}", "a number", mean.get(key))
        _require_finite(path, f"group_means.{group}", mean)


def check_log_history(path: Path, log_history: Any) -> None:
    """`trainer_state.json`'s `log_history`: a list of objects, each with its whole-number `step` (the Trainer
    writes one in every entry; the curves plot over it). (A logged NaN
    loss stays: it is what the training did, and the curves show it.)"""
    if not isinstance(log_history, list):
        _fail(path, "log_history", "a list", log_history)
    for index, entry in enumerate(log_history):
        entry = _require_dict(path, f"log_history[{index}]", entry, optional=False)
        step = entry.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            _fail(path, f"log_history[{index}].step", "a whole number", step)
