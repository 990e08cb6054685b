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

Each evaluated dataset of a run becomes a `benchmark.Benchmark` (its figures, per-row scores and
identities); this module finds them and checks what the folder holds beside them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..columns import REPLACE_SUBSETS
from ..errors import UserInputError
from ..evaluation.section import EVAL_SECTIONS_NAME, RUN_KEYS, InvalidSection, Section
from ..output_folder import METRICS_FILE
from .benchmark import Benchmark

TRAINER_STATE = "trainer_state.json"
# `HardPosTrainer.evaluate` scores its eval sets with `ITMScorer`'s default precision
# (training/trainer_evaluation.py); a section that records its own (`provenance["precision"]`) wins.
TRAINER_EVAL_PRECISION = "fp32"


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
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserInputError(f"{path}: cannot read as JSON ({err})") from err
    except RecursionError:
        raise UserInputError(f"{path}: cannot read as JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: expected a JSON object")
    return data


def read_section(path: Path, data: Any, field: str = "") -> Section:
    """A saved section through the one reader (`Section.from_dict`), its problem one line naming the file and
    the field (`field`: where the section sits in the file, "" at its top)."""
    try:
        return Section.from_dict(data)
    except InvalidSection as err:
        where = f"{field}.{err.field}" if field else err.field
        raise UserInputError(f"{path}: field {where} {err.problem}") from None
    except TypeError as err:  # a key of the right name holding what a dataclass field cannot take
        raise UserInputError(
            f"{path}: field {field or '(top level)'} is not a result section ({err})"
        ) from None


def _eval_section(path: Path, data: dict) -> Section:
    """A single dataset's `metrics.json`: its section, beside the run's fields (`RUN_KEYS`) of their types."""
    for key in ("model", "dataset"):
        if key in data and not isinstance(data[key], str):
            _fail(path, key, "text", data[key])
    run = _require_dict(path, "run", data.get("run"))
    _require_dict(path, "run.settings", run.get("settings"))
    return read_section(path, {k: v for k, v in data.items() if k not in RUN_KEYS})


def _checkpoint_step(path: Path) -> int:
    match = re.fullmatch(r"checkpoint-(\d+)", path.name)
    return int(match.group(1)) if match else -1


def find_trainer_state(folder: Path) -> Path | None:
    """`trainer_state.json` at the top of a fine-tuning folder (`save_state`), else in its newest checkpoint."""
    top = folder / TRAINER_STATE
    if top.is_file():
        return top
    checkpoints = sorted(
        (p for p in folder.glob("checkpoint-*") if (p / TRAINER_STATE).is_file()), key=_checkpoint_step
    )
    return checkpoints[-1] / TRAINER_STATE if checkpoints else None


def _benchmark_name(data: dict) -> str:
    """A single eval's benchmark name: REPLACE when it holds both subsets, else the dataset's last path part."""
    if all(s in data.get("results", {}) for s in REPLACE_SUBSETS):
        return "replace"
    return Path(str(data.get("dataset", "dataset")).rstrip("/")).name or "dataset"


def _suite_folders(folder: Path) -> dict[tuple, tuple[Path, dict, Section]]:
    """Sub-folders holding a dataset's metrics.json, keyed by (source, configs), with what it holds."""
    found = {}
    for sub in sorted(p for p in folder.iterdir() if (p / METRICS_FILE).is_file()):
        data = _read_json(sub / METRICS_FILE)
        section = _eval_section(sub / METRICS_FILE, data)
        found[(str(data.get("dataset")), tuple(sorted(section.results)))] = (sub, data, section)
    return found


def load_run(folder: str | Path) -> Run:
    """Recognise and load an eval, suite or fine-tuning output folder (see the module docstring)."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserInputError(f"run not found: {folder} (no such folder)")
    metrics_file = folder / METRICS_FILE
    if metrics_file.is_file():
        data = _read_json(metrics_file)
        if "datasets" in data:
            return _load_suite(folder, metrics_file, data)
        if "results" in data:  # one dataset's result; written before results named their task: hard positives
            bench = Benchmark(_benchmark_name(data), data, _eval_section(metrics_file, data), folder)
            bench.cross_check(metrics_file)
            return Run(
                folder, "eval", str(data.get("model", folder.name)), data.get("run", {}), {bench.name: bench}
            )
        raise UserInputError(
            f"{metrics_file}: neither a `hardpos eval` result (no `results`) nor a suite's (no `datasets`)"
        )
    state_file = find_trainer_state(folder)
    if state_file is not None:
        return _load_finetune(folder, state_file)
    # One or two levels down: a `--model A --model B` folder holds OUT/<name>/, the demo's output eval/<variant>/.
    nested = sorted(
        p.parent.relative_to(folder).as_posix()
        for pattern in ("*/" + METRICS_FILE, "*/*/" + METRICS_FILE)
        for p in folder.glob(pattern)
    )
    hint = (
        f"; it holds runs in {', '.join(str(folder / n) for n in nested)}: pass one of those"
        if nested
        else ""
    )
    raise UserInputError(
        f"{folder}: no {METRICS_FILE} (eval or suite output) and no {TRAINER_STATE} "
        f"(fine-tuning output){hint}"
    )


def _load_suite(folder: Path, path: Path, data: dict) -> Run:
    """A suite's folder: its sections (each read by `read_section`), the sub-folder of each beside them."""
    if not isinstance(data.get("model", ""), str):
        _fail(path, "model", "text", data["model"])
    run_info = _require_dict(path, "run", data.get("run"))
    _require_dict(path, "run.settings", run_info.get("settings"))
    group_means = _check_group_means(path, data.get("group_means"))
    sections = {
        name: read_section(path, section, f"datasets.{name}")
        for name, section in _require_dict(path, "datasets", data["datasets"], optional=False).items()
    }
    subfolders = _suite_folders(folder)
    run = Run(folder, "suite", str(data.get("model", folder.name)), run_info, group_means=group_means)
    for name, section in sections.items():
        # A dataset's sub-folder (every task's since result layout 2, hard positives' before) has its
        # metrics.json, with the per-config provenance, beside the per-row scores.
        found = subfolders.get((section.source, tuple(sorted(section.results))))
        if found is None:
            run.benchmarks[name] = Benchmark(name, data["datasets"][name], section, None)
            run.benchmarks[name].cross_check(path)
            continue
        sub, saved, sub_section = found
        if sub_section.results != section.results:
            raise UserInputError(
                f"{sub / METRICS_FILE}: its results differ from datasets.{name} in {path}; the "
                "folder was edited or mixes two runs (rerun hardpos eval)"
            )
        run.benchmarks[name] = Benchmark(name, {**data["datasets"][name], **saved}, sub_section, sub)
        run.benchmarks[name].cross_check(sub / METRICS_FILE)
    return run


def _check_group_means(path: Path, group_means: Any) -> dict:
    """A suite's means over groups of datasets: each a rate (`value`, None when no member scored) over a whole
    number of datasets."""
    for group, mean in _require_dict(path, "group_means", group_means).items():
        mean = _require_dict(path, f"group_means.{group}", mean, optional=False)
        value, count = mean.get("value"), mean.get("num_datasets")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            _fail(path, f"group_means.{group}.num_datasets", "a whole number >= 0", count)
        if (value is not None or count) and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1
        ):  # None: no member scored
            _fail(path, f"group_means.{group}.value", "a rate in [0, 1]", value)
    return group_means or {}


def _load_finetune(folder: Path, state_file: Path) -> Run:
    state = _read_json(state_file)
    check_log_history(state_file, state.get("log_history", []))
    run = Run(
        folder,
        "finetune",
        folder.name,
        {},
        log_history=list(state.get("log_history", [])),
        trainer_state_file=state_file,
    )
    # The trainer saves its latest eval sections with each checkpoint; the newest is the latest evaluation.
    checkpoints = sorted(
        (p for p in folder.glob("checkpoint-*") if (p / EVAL_SECTIONS_NAME).is_file()), key=_checkpoint_step
    )
    candidates = [*reversed(checkpoints), folder]
    sections_file = next(
        (p / EVAL_SECTIONS_NAME for p in candidates if (p / EVAL_SECTIONS_NAME).is_file()), None
    )
    if sections_file is not None:
        for name, section in _read_json(sections_file).items():
            run.benchmarks[name] = Benchmark(name, section, read_section(sections_file, section, name), None)
            run.benchmarks[name].cross_check(sections_file)
        recorded = {b.provenance.get("precision") for b in run.benchmarks.values()} - {None}
        precision = recorded.pop() if len(recorded) == 1 else TRAINER_EVAL_PRECISION
        run.run = {"settings": {"precision": precision}}
    return run


# The checks of what a run folder holds beside its sections (which `read_section` checks): a hand-edited
# or damaged folder is one line naming the file and the field, never a traceback.


def _fail(path: Path, field: str, expected: str, value: Any) -> None:
    shown = (
        f"a JSON {'object' if isinstance(value, dict) else 'list'}"
        if isinstance(value, (dict, list))
        else repr(value)
    )
    raise UserInputError(f"{path}: field {field} must be {expected}, got {shown[:60]}")


def _require_dict(path: Path, field: str, value: Any, optional: bool = True) -> dict:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        _fail(path, field, "a JSON object", value)
    return value


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
