"""Several benchmarks in one run: recognise what each dataset is, run its task, one report.

Each dataset is run by the one runner (`runner.run_dataset`), as `hardpos eval --dataset D` runs one,
into its own folder under the suite's. A dataset is recognised by its
layout: clip_benchmark's webdataset files (zero-shot classification or retrieval), Winoground's
columns, our hard-positive schema (caption, hard_negative, hard_positive: Original/Augmented
Accuracy and Brittleness) or a caption with its negatives only (image-caption selection, as in
SugarCrepe and ARO). `--task` overrides the guess.

A suite shares one scorer, so every distinct image and caption is encoded once per model across all
its datasets (SugarCrepe and SugarCrepe++ share COCO images; REPLACE's subsets share 8,041 images),
and resumes per dataset (per config for hard positives): each result is saved as soon as it is done,
under a key made of the model's and the dataset's content, the task and every score-changing setting.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from .. import output_folder
from ..backends import describe_model
from ..benchmark_registry import BENCHMARKS
from ..errors import UserInputError
from ..model_source import ModelSource
from ..names import folder_name
from ..output_folder import check_output_writable
from ..provenance import environment
from ..published import model_row
from .activations import difference_rule, rows_by_activation
from .group_means import check_groups, group_mean_line, group_means
from .options import RunOptions, split_keywords
from .retention_table import VTAB_TASKS, retention_table
from .runner import ModelRun, run_dataset
from .section import HARD_POSITIVE, Section
from .suite_entry import SuiteEntry, entry_folders, suite_entry_from_yaml
from .tasks import TaskData, detect_task, get_task
from .tasks.caption_selection import CAPTION_SELECTION
from .tasks.zeroshot_classification import ZEROSHOT_CLASSIFICATION
from .tasks.zeroshot_retrieval import ZEROSHOT_RETRIEVAL


def _registered(suite: str) -> list[SuiteEntry]:
    """The registered benchmarks (`benchmark_registry`) that declare themselves part of `suite`."""
    return [SuiteEntry(b.name, b.hub_id, b.task) for b in BENCHMARKS.values() if suite in b.suites]


# The compositional benchmarks, as published by this package's dataset builders: the paper's, then the
# registered ones that join the suite.
PAPER_COMPOSITIONAL = [
    SuiteEntry("replace", "hardpos/replace", HARD_POSITIVE),
    SuiteEntry("swap", "hardpos/swap", HARD_POSITIVE),
    SuiteEntry("sugarcrepe_pp", "hardpos/sugarcrepe_pp", HARD_POSITIVE, text_only=True),
    SuiteEntry("sugarcrepe", "hardpos/sugarcrepe", CAPTION_SELECTION),
    SuiteEntry("aro", "hardpos/aro", CAPTION_SELECTION),
]
COMPOSITIONAL = [*PAPER_COMPOSITIONAL, *_registered("compositional")]

# CE-CLIP's four benchmarks (its Tables 1-3): SugarCrepe, ARO and the two registered in its suite.
CE_CLIP_SUITE = [entry for entry in PAPER_COMPOSITIONAL if entry.name in ("sugarcrepe", "aro")] + _registered(
    "ce_clip"
)

# Zero-shot retention (the paper's Appendix E / Table 10) on clip_benchmark's Hub webdatasets.
RETENTION = [
    SuiteEntry("imagenet1k", "clip-benchmark/wds_imagenet1k", ZEROSHOT_CLASSIFICATION),
    *(
        SuiteEntry(f"vtab/{t}", f"clip-benchmark/wds_vtab-{t}", ZEROSHOT_CLASSIFICATION, group="vtab")
        for t in VTAB_TASKS
    ),
    SuiteEntry("mscoco_captions", "clip-benchmark/wds_mscoco_captions", ZEROSHOT_RETRIEVAL),
    SuiteEntry("flickr30k", "clip-benchmark/wds_flickr30k", ZEROSHOT_RETRIEVAL),
]

SUITES = {
    "compositional": COMPOSITIONAL,
    "retention": RETENTION,
    "paper": PAPER_COMPOSITIONAL + _registered("paper") + RETENTION,
    "ce_clip": CE_CLIP_SUITE,
}


def load_suite(name_or_file: str) -> list[SuiteEntry]:
    """A named suite (`paper`, `compositional`, `retention`) or a YAML file listing datasets:

    ```yaml
    datasets:
      - {name: replace, dataset: out/replace}
      - {name: sc++, dataset: out/sugarcrepe_pp, text_only: true}
      - {name: cifar10, dataset: clip-benchmark/wds_vtab-cifar10, task: zeroshot_classification, group: vtab}
    ```
    """
    if name_or_file in SUITES:
        return list(SUITES[name_or_file])
    path = Path(name_or_file)
    if not path.is_file():
        raise UserInputError(
            f"--suite {name_or_file!r} is neither a suite ({', '.join(SUITES)}) nor a YAML file"
        )
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise UserInputError(f"{path}: not valid YAML ({err})") from err
    except UnicodeDecodeError as err:
        raise UserInputError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    items = spec.get("datasets") if isinstance(spec, dict) else None
    if not isinstance(items, list) or not items:
        raise UserInputError(
            f"{path}: expected a top-level `datasets:` list of {{name, dataset, ...}} entries"
        )
    entries = [suite_entry_from_yaml(path, index, item) for index, item in enumerate(items)]
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise UserInputError(f"{path}: dataset names must be unique, got {names}")
    entry_folders(entries, str(path))
    return entries


@dataclass
class SuiteReport:
    """Every dataset's section (results, aggregates, tie rule, aggregation) and the run's provenance."""

    model: str
    run: dict = field(default_factory=dict)
    sections: dict[str, Section] = field(default_factory=dict)
    group_means: dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict:
        datasets = {name: section.to_dict() for name, section in self.sections.items()}
        return {"model": self.model, "run": self.run, "datasets": datasets, "group_means": self.group_means}

    @property
    def failed(self) -> list[str]:
        """The datasets whose section holds an error instead of results."""
        return [name for name, section in self.sections.items() if section.failed]

    def save(self, output_dir: Path) -> None:
        """`metrics.json`, atomically; `run.complete` is False until every dataset has a section, and
        `run.failed` names the datasets that failed."""
        self.run["failed"] = self.failed
        self.run["complete"] = len(self.sections) == self.run.get("num_datasets") and not self.failed
        output_folder.write_json(
            output_dir / output_folder.METRICS_FILE, self.to_dict(), default=_json_default
        )

    def table(self) -> str:
        """One block per dataset, each with the rule its numbers follow, then the group means."""
        blocks = [section.block(name) for name, section in self.sections.items()]
        blocks.extend(group_mean_line(group, mean) for group, mean in self.group_means.items())
        retention = retention_table(
            self.sections,
            self.group_means,
            model_row(self.model, self.run.get("preset")),
            max_rows=self.run.get("settings", {}).get("max_rows"),
        )
        if retention:
            blocks.append(retention)
        blocks.append(f"{self.settings_line()}\nmodel: {self.model_line()}")
        if self.failed:
            blocks.append(
                f"INCOMPLETE: {len(self.failed)} of {len(self.sections)} datasets failed: "
                f"{', '.join(self.failed)} (their errors are in their sections and in metrics.json)"
            )
        return "\n\n".join(blocks)

    def settings_line(self) -> str:
        settings = self.run.get("settings", {})
        return (
            "scores: cosine similarity of L2-normalised embeddings, "
            f"{settings.get('precision')} on {settings.get('device')}"
        )

    def model_line(self) -> str:
        return describe_model(self.model, self.run.get("model_identity", {}))


def activation_comparison_suite_table(reports: Mapping[str, SuiteReport]) -> str:
    """`hardpos eval --suite S --activation both`: every dataset's rows per activation and their difference.

    `reports` maps activation -> the suite report of the checkpoint converted with it. Each dataset
    keeps its own table layout, tie rule and aggregation (`Section.table`), with rows labelled
    `name [activation]` and `name [other - first]` (see `rows_by_activation`).
    """
    activations = list(reports)
    names = list(dict.fromkeys(name for report in reports.values() for name in report.sections))
    blocks = []
    for name in names:
        sections = {a: r.sections[name] for a, r in reports.items() if name in r.sections}
        merged = dataclasses.replace(
            next(iter(sections.values())),
            results=rows_by_activation({a: section.results for a, section in sections.items()}),
            aggregates=rows_by_activation({a: section.aggregates for a, section in sections.items()}),
        )
        blocks.append(merged.block(name))
    for activation, report in reports.items():
        blocks.extend(f"[{activation}] " + group_mean_line(g, m) for g, m in report.group_means.items())
    first = next(iter(reports.values()))
    blocks.append(
        "\n".join(
            [
                difference_rule(activations, units="each column's unit; percentage points in % columns"),
                first.settings_line(),
                *(f"model [{activation}]: {r.model_line()}" for activation, r in reports.items()),
            ]
        )
    )
    return "\n\n".join(blocks)


def _json_default(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def run_suite(
    model: str | ModelSource,
    entries: Sequence[SuiteEntry],
    *,
    output_dir: str | Path,
    options: RunOptions | None = None,
    **keywords,
) -> SuiteReport:
    """Evaluate `model` on every entry; one `metrics.json` and one table in `output_dir`.

    Settings are `RunOptions`' fields, as keywords or one `options` object, and `ModelOptions'` (as
    `evaluate_model`). Each entry's result is saved in `output_dir/<name>/` when done and reused by a
    rerun only if its key (model and dataset content, task, split, settings) is unchanged. A checkpoint
    file is converted once, before the first entry, with the `ModelOptions` given; every entry then
    scores the converted folder (one `ModelSource` for all).

    Every dataset runs even when another fails: a failure is recorded in its section (`error`) and
    in `run.failed` (`run.complete` stays False), group means list what they miss, and `hardpos
    eval` exits non-zero at the end. Groups are checked (one task each, with a group metric)
    before anything is scored. `make_scorer` builds the scorer in place of `ITMScorer` (see
    `evaluate_model`). `preset` (a `hardpos zoo` name) or a Hub id with published rows adds, to each
    dataset whose benchmark the papers print, the printed row and ours minus it (`Section.published`,
    `beside_ours`), and the paper's row to the Table 10 layout. `bootstrap_samples` picks the
    hard-positive rates' intervals (`intervals`).
    """
    given, conversion = split_keywords(keywords)
    options = (options or given).resolved().replace(protocol="default")  # --protocol: one dataset on its own
    entry_folders(entries)
    output_dir = Path(output_dir)
    check_output_writable(output_dir)
    with output_folder.locked(output_dir, options.log):  # one suite run per folder at a time
        source = ModelSource.resolve(model, conversion, progress=options.progress)
        run = ModelRun.start(source, options)
        report = SuiteReport(
            model=source.name,
            run={
                "model_identity": source.identity,
                "settings": {**run.settings, "batch_size": options.batch_size},
                "environment": environment(),
                "num_datasets": len(entries),
                "preset": options.preset,  # the `hardpos zoo` preset the weights are, when given (published rows)
            },
        )
        kept = _kept_sections(output_dir, report, entries, options.log)
        report.run["num_datasets"] += len(kept)
        tasks = _entry_tasks(entries, report, options.log)
        for entry in entries:
            if entry.name not in tasks:
                continue  # its task could not be told: already recorded as failed
            try:
                report.sections[entry.name] = _run_entry(run, entry, tasks[entry.name], output_dir)
            except Exception as err:  # one dataset's failure must not lose the others' results
                report.sections[entry.name] = _failed_section(tasks[entry.name], entry, err, options.log)
            report.save(output_dir)
        report.sections = {e.name: report.sections[e.name] for e in entries if e.name in report.sections}
        report.group_means = group_means(report.sections, entries)
        report.sections.update(kept)
        report.save(output_dir)
        return report


def _kept_sections(
    output_dir: Path, report: SuiteReport, entries: Sequence[SuiteEntry], log
) -> dict[str, Section]:
    """The datasets an earlier suite run of the same model and settings saved in `output_dir/metrics.json`
    that this run does not name: kept, so a rerun of a subset never drops the others' results (each is
    read by `Section.from_dict`; their group means are those of this run's entries only)."""
    path = output_dir / output_folder.METRICS_FILE
    if not path.is_file():
        return {}
    names = {entry.name for entry in entries}
    ours = json.loads(json.dumps(report.run, default=_json_default))

    def scoring(settings: dict) -> dict:  # batch size changes no score
        return {key: value for key, value in settings.items() if key != "batch_size"}

    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        same = saved["run"].get("model_identity") == ours["model_identity"] and scoring(
            saved["run"]["settings"]
        ) == scoring(ours["settings"])
        sections = {
            name: Section.from_dict(data) for name, data in saved["datasets"].items() if name not in names
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
        log(f"{path}: not a suite's results ({type(err).__name__}); only this run's datasets are kept in it")
        return {}
    if sections and not same:
        log(f"{path}: {', '.join(sections)} dropped: saved by another model or other settings")
        return {}
    if sections:
        log(f"{path}: keeping {', '.join(sections)} from an earlier run (same model and settings)")
    return sections


def _entry_tasks(entries: Sequence[SuiteEntry], report: SuiteReport, log) -> dict[str, str]:
    """Every dataset's task first, so a group that mixes tasks is refused before anything is scored; a
    dataset whose task cannot be told is recorded as failed in `report` (the others still run)."""
    tasks: dict[str, str] = {}
    for entry in entries:
        try:
            tasks[entry.name] = entry.task or detect_task(entry.dataset, entry.split, entry.configs)
        except Exception as err:  # recorded in its section; the other datasets still run
            report.sections[entry.name] = _failed_section(None, entry, err, log)
    check_groups(entries, tasks)
    return tasks


def _failed_section(task: str | None, entry: SuiteEntry, err: Exception, log) -> Section:
    """A dataset's section when it failed: its error in one line (the traceback's last frames too, for bugs)."""
    import traceback

    message = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}".rstrip(
        ": "
    )
    log(f"[{entry.name}] FAILED ({message}); continuing with the other datasets")
    trace = None if isinstance(err, UserInputError) else traceback.format_exception(err)[-3:]
    return Section(task, entry.dataset, error=message, traceback=trace)


def _run_entry(run: ModelRun, entry: SuiteEntry, task: str, output_dir: Path) -> Section:
    """One dataset's section: its task run (or resumed) by the runner in `output_dir/<name>/`.

    The model was resolved once for the whole suite: this dataset's own metrics.json names what the user
    asked for (`source.name`), not the conversion cache it loads from."""
    get_task(task)  # an unknown task is refused before its folder is made
    folder = output_dir / folder_name(entry.name, "dataset name")  # checked by `entry_folders`
    folder.mkdir(parents=True, exist_ok=True)
    run.options.log(f"[{entry.name}] {task} on {entry.dataset}")
    data = TaskData(entry.dataset, entry.configs, entry.split)
    return run_dataset(run, task, data, folder, label=entry.dataset, text_only=entry.text_only).section
