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
from ..benchmark_registry import BENCHMARKS
from ..errors import UserInputError
from ..model_source import ModelSource
from ..names import folder_name
from ..output_folder import check_output_writable
from ..provenance import describe_model, environment
from ..published import lookup, model_row, slip_note
from ..tables import render_table
from .activations import difference_rule, rows_by_activation
from .options import RunOptions, split_keywords
from .paper_data import CLIP_BENCHMARK_HUB, data_differs, zero_shot_differs
from .runner import ModelRun, run_dataset
from .section import HARD_POSITIVE, Section
from .suite_entry import SuiteEntry, entry_folders, suite_entry_from_yaml
from .tasks import TASKS, TaskData, detect_task, get_task
from .tasks.caption_selection import CAPTION_SELECTION
from .tasks.webdataset import retention_benchmark
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

# clip_benchmark's VTAB webdatasets (its benchmark/webdatasets.txt), the paper's Table 10 VTAB mean.
VTAB_TASKS = (
    "caltech101", "cifar10", "cifar100", "clevr_count_all", "clevr_closest_object_distance",
    "diabetic_retinopathy", "dmlab", "dsprites_label_orientation", "dsprites_label_x_position",
    "dsprites_label_y_position", "dtd", "eurosat", "kitti_closest_vehicle_distance", "flowers", "pets",
    "pcam", "resisc45", "smallnorb_label_azimuth", "smallnorb_label_elevation", "svhn",
)  # fmt: skip

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


def group_mean_line(group: str, mean: dict) -> str:
    """A group's mean (e.g. VTAB), naming the metric, how many datasets it averages and which are missing."""
    value = "none (no member scored)" if mean["value"] is None else f"{100 * mean['value']:.1f}%"
    fewer = {k: n for k, n in mean.get("values_over", {}).items() if n < mean["num_datasets"]}
    return (
        f"== {group}: unweighted mean of {mean['metric']} over {mean['num_datasets']} datasets "
        f"= {value} =="
        + (f" (missing: {', '.join(mean['missing'])})" if mean["missing"] else "")
        + "".join(
            f" ({k} = {100 * mean['values'][k]:.1f}% over the {n} datasets that have it: with fewer classes "
            "than k there is none, as clip_benchmark's NaN that the paper's mean skipped)"
            for k, n in fewer.items()
        )
    )


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
    file is converted once, before the first entry, with `open_clip_config` / `activation` / `tokenizer`;
    every entry then scores the converted folder.

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
        source = ModelSource.resolve(
            model,
            conversion.open_clip_config,
            conversion.activation,
            conversion.tokenizer,
            progress=options.progress,
        )
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


def check_groups(entries: Sequence[SuiteEntry], tasks: Mapping[str, str]) -> None:
    """Refuse, before scoring, a group whose members are of different tasks or of a task without a
    group metric (its mean would be a KeyError after every dataset was scored, or silently absent)."""
    groups: dict[str, list[SuiteEntry]] = {}
    for entry in entries:
        if entry.group:
            groups.setdefault(entry.group, []).append(entry)
    for group, members in groups.items():
        by_task: dict[str, list[str]] = {}
        for member in members:
            if member.name in tasks:
                by_task.setdefault(tasks[member.name], []).append(member.name)
        if len(by_task) > 1:
            listed = "; ".join(f"{task}: {', '.join(names)}" for task, names in by_task.items())
            raise UserInputError(f"suite group {group!r} mixes tasks ({listed}); a group mean needs one task")
        for task in by_task:
            if not get_task(task).group_metrics:
                averaged = ", ".join(
                    f"{t.name}: {t.group_metrics[0]}" for t in TASKS.values() if t.group_metrics
                )
                raise UserInputError(
                    f"suite group {group!r} is of task {task}, which has no group metric (groups average {averaged})"
                )


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


def _group_values(
    sections: dict[str, Section], done: Sequence[SuiteEntry], metrics: Sequence[str]
) -> tuple[dict[str, float], dict[str, int]]:
    """The unweighted mean over `done` of each metric, over the members that report it, and how many do.

    A member without a metric is one the metric does not apply to: acc@5 of a task with fewer than 5
    classes (VTAB's pcam, 2, and kitti_closest_vehicle_distance, 4). clip_benchmark 1.6.2, which the paper
    ran, gives such a task acc5 = NaN (`metrics/zeroshot_classification.py`, `evaluate`), and a mean of its
    results with pandas (`DataFrame.mean`, `skipna=True`) leaves it out, so Table 10's VTAB acc@5 is the
    mean over the tasks that have one; the count says over how many.
    """
    rows = [sections[m.name].results["all"] for m in done]
    values, counts = {}, {}
    for k in metrics:
        present = [row[k] for row in rows if k in row]
        if present:
            values[k], counts[k] = float(np.mean(present)), len(present)
    return values, counts


def group_means(sections: dict[str, Section], entries: Sequence[SuiteEntry]) -> dict[str, dict]:
    """Unweighted means over the entries of each `group` (e.g. the VTAB mean of the paper's Table 10), on
    the metrics its task's registry entry names (`Task.group_metrics`, the first one the headline)."""
    means = {}
    groups: dict[str, list[SuiteEntry]] = {}
    for entry in entries:
        if entry.group:
            groups.setdefault(entry.group, []).append(entry)
    for group, members in groups.items():
        done = [m for m in members if m.name in sections and not sections[m.name].failed]
        task = next(
            (sections[m.name].task for m in members if m.name in sections and sections[m.name].task), None
        )
        task = task or members[0].task
        metrics = TASKS[task].group_metrics if task in TASKS else ()
        metric = metrics[0] if metrics else "unknown (no member's task is known)"
        values = [sections[m.name].results["all"][metric] for m in done]
        means[group] = {
            "metric": metric,
            "value": float(np.mean(values)) if values else None,
            "num_datasets": len(values),
            "missing": [m.name for m in members if m not in done],  # failed or not run: not in the mean
        }
        means[group]["values"], means[group]["values_over"] = _group_values(
            sections, done, metrics or (metric,)
        )
    return means


# The paper's Table 10 (Kamath et al., ECCV 2024): zero-shot retention, one column per (dataset or
# group, metric), named as clip_benchmark names them (`RETENTION`), in the printed table's column order.
RETENTION_COLUMNS = (
    ("ImageNet acc@1", "imagenet1k", "acc1"),
    ("ImageNet acc@5", "imagenet1k", "acc5"),
    ("COCO image R@1", "mscoco_captions", "image_retrieval_recall@1"),
    ("COCO text R@1", "mscoco_captions", "text_retrieval_recall@1"),
    ("Flickr image R@1", "flickr30k", "image_retrieval_recall@1"),
    ("Flickr text R@1", "flickr30k", "text_retrieval_recall@1"),
    ("VTAB acc@1", "vtab", "acc1"),
    ("VTAB acc@5", "vtab", "acc5"),
)


def retention_sections(sections: Mapping[str, Section]) -> dict[str, Section]:
    """Table 10's dataset -> the section that measured it, matched by the data the section read (its source,
    as `hardpos compare` matches it: `tasks.webdataset.retention_benchmark`), never by the suite entry's name."""
    found: dict[str, Section] = {}
    for section in sections.values():
        benchmark = retention_benchmark(section.source, "all") if section.source else None
        if benchmark is not None:
            found.setdefault(benchmark, section)
    return found


def retention_values(
    sections: Mapping[str, Section], group_means: Mapping[str, Mapping]
) -> dict[tuple[str, str], float]:
    """(dataset or group, metric) -> our fraction, for every `RETENTION_COLUMNS` cell that was measured."""
    values: dict[tuple[str, str], float] = {}
    measured = retention_sections(sections)
    for _, source, metric in RETENTION_COLUMNS:
        if source in group_means:
            value = group_means[source].get("values", {}).get(metric)
        else:
            section = measured.get(source)
            value = section.results.get("all", {}).get(metric) if section is not None else None
        if isinstance(value, float):
            values[(source, metric)] = value
    return values


def retention_differs(
    source: str,
    sections: Mapping[str, Section],
    group_means: Mapping[str, Mapping],
    max_rows: int | None = None,
) -> str | None:
    """Why our `source` column (a Table 10 dataset, or `vtab`) is not measured on the paper's data (None: it is):
    clip_benchmark's own Hub webdataset, every row, and for VTAB every one of its tasks (`paper_data`)."""
    if source != "vtab":
        section = retention_sections(sections).get(source)
        if section is None:
            return "not run"
        return data_differs(source, ["all"], section.results, section.provenance, max_rows)
    mean = group_means.get("vtab", {})
    if mean.get("missing") or mean.get("num_datasets") != len(VTAB_TASKS):
        return f"{mean.get('num_datasets', 0)} of the {len(VTAB_TASKS)} VTAB tasks"
    identities = {
        unit.get("dataset", {}).get("hub_id"): unit.get("dataset")
        for section in sections.values()
        for unit in section.provenance.values()
        if isinstance(unit, dict) and "dataset" in unit
    }
    for task in VTAB_TASKS:
        wanted = CLIP_BENCHMARK_HUB.format(f"vtab-{task}")
        if (why := zero_shot_differs(wanted, identities.get(wanted), max_rows)) is not None:
            return why
    return None


def retention_table(
    sections: Mapping[str, Section],
    group_means: Mapping[str, Mapping],
    paper_row: str | None,
    *,
    markdown: bool = False,
    max_rows: int | None = None,
) -> str:
    """Table 10's layout: our row, and the paper's row and ours minus it when `paper_row` has figures.

    Empty when no retention dataset was run. Cells are percent; VTAB is the unweighted mean over the
    VTAB tasks run (the line above the table names how many). A difference is shown only for a column
    measured on the paper's data (`retention_differs`); the note says why any other has none, and flags
    a printed figure the paper's own cells contradict (`published.slip_note`).
    """
    ours = retention_values(sections, group_means)
    if not ours:
        return ""
    header = ["zero-shot retention", *(name for name, _, _ in RETENTION_COLUMNS)]
    cells = {key: f"{100 * value:.2f}" for key, value in ours.items()}
    rows = [["ours", *(cells.get((s, m), "") for _, s, m in RETENTION_COLUMNS)]]
    sources, notes = set(), []
    if paper_row is not None:
        figures = {(s, m): lookup(paper_row, s, m) for _, s, m in RETENTION_COLUMNS}
        figures = {key: f for key, f in figures.items() if f is not None}
        if figures:
            differs = {
                s: retention_differs(s, sections, group_means, max_rows)
                for s in dict.fromkeys(s for _, s, _ in RETENTION_COLUMNS)
            }
            rows.append([f"paper: {paper_row}", *(f"{figures[(s, m)].value:.2f}" if (s, m) in figures else ""
                                                   for _, s, m in RETENTION_COLUMNS)])  # fmt: skip
            rows.append(["ours - paper (pp)", *(f"{100 * ours[(s, m)] - figures[(s, m)].value:+.2f}"
                                                if (s, m) in figures and (s, m) in ours and differs[s] is None else ""
                                                for _, s, m in RETENTION_COLUMNS)])  # fmt: skip
            sources = {f.source for f in figures.values()}
            notes = [
                f"no difference for {s}: {why}"
                for s, why in differs.items()
                if why is not None and any(key[0] == s for key in ours)
            ]
            notes.extend(f"slip: {n}" for f in figures.values() if (n := slip_note(f)) is not None)
    table = render_table(header, rows, markdown=markdown)
    note = "layout of Kamath et al. 2024 Table 10; percent; empty cells: not run" + (
        f"; paper row: {'; '.join(sorted(sources))}" if sources else ""
    )
    return "\n".join([table, note, *notes])
