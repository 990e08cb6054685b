"""What a task is to the registry: how it recognises its data, and how it scores it into a `Section`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

from ...scoring import ITMScorer
from ..options import RunOptions
from ..section import Section

# The Hub task id every `model-index` result is filed under (CLIP's pipeline tag).
CARD_TASK_ID = "zero-shot-image-classification"


@dataclass(frozen=True)
class TaskData:
    """What a task scores: a Hub id or local folder (with its configs and split), an in-memory table,
    or subsets already loaded (name -> rows, e.g. the trainer's, loaded once before training)."""

    source: str | Dataset | Mapping[str, Dataset]
    configs: list[str] | None = None
    split: str = "test"

    def describe(self) -> str:
        """The source as a section names it: the Hub id or folder, else "in-memory"."""
        return self.source if isinstance(self.source, str) else "in-memory"

    def subsets(self) -> dict[str, Dataset]:
        """Each config's rows (`eval_data.load_eval_sets`: a local folder by content, a Hub id by commit)."""
        from ..eval_data import load_eval_sets

        if isinstance(self.source, Mapping):
            return dict(self.source)
        return {name: s.dataset for name, s in load_eval_sets(self.source, self.configs, self.split).items()}


@dataclass(frozen=True)
class Task:
    """One benchmark task of the registry (`evaluation.tasks.TASKS`).

    Attributes:
        name: the task's name in `--task`, suite files and `metrics.json`.
        score: scores `TaskData` with a scorer into a `Section` (results, aggregates, tie rule,
            aggregation); `max_rows` keeps the first N rows (images, for zero-shot sets) of each config.
        matches_columns: whether a table with these column names is this task's data; None for a task
            recognised by its files instead (clip_benchmark's webdatasets: `tasks.webdataset`).
        group_metrics: what a suite group of this task's datasets (e.g. VTAB) averages, headline first;
            empty for tasks that are not averaged across datasets.
        published_benchmark: `(dataset, row, metrics) ->` the benchmark of the papers' printed figures
            (`hf_hardpos.published`) that a row of this task's results measures, or None; None for a
            task no paper prints.
        per_config: True when each config is scored, saved and resumed on its own (`evaluation.runner`),
            its rows loaded once and checked for `required_columns` before the model loads; False when
            the dataset is scored as a whole (aggregates that need every subset's outcomes, webdatasets).
        required_columns: the columns every config of a `per_config` task must have.
        aggregate: `(section, options)`: the rows computed over several configs (and their intervals,
            `RunOptions.intervals`, `bootstrap_samples`) from the configs' results and per-row scores, in
            place, after every run or resume.
        row_scores: how the per-row scores a task keeps (`Section.row_scores`) are saved as a table and
            read back (`scores-<row>.parquet`); None for tasks that keep none.
        text_only: `(section, scorer, data, max_rows)`: adds a text-only figure to each config (SugarCrepe++'s
            TOT), for a suite entry with `text_only: true`; None for tasks without one.
        recognition_order: tables are matched against the tasks' `matches_columns` in ascending order, the
            most specific layout first (Winoground's columns; a hard-positive table also has a
            caption-selection table's caption and hard negative).
        card_task: the model card's `model-index` task `(type, name)`. The Hub knows no image-text
            matching or retrieval task id (its ids are the `pipeline_tag` values of huggingface.co/tasks);
            CLIP models are filed under `CARD_TASK_ID`, so every result is, and the name says which
            comparison it is.
        card_metrics: the rates of a result row that `model-index` carries (counts and mean scores stay in
            the card's body).
        retention: whether the task measures zero-shot retention (the paper's Appendix E), which the model
            card says it reports.
    """

    name: str
    score: Callable[[ITMScorer, TaskData, int | None], Section]
    matches_columns: Callable[[frozenset[str]], bool] | None = None
    group_metrics: tuple[str, ...] = ()
    published_benchmark: Callable[[str, str, Mapping[str, Any]], str | None] | None = None
    per_config: bool = False
    required_columns: tuple[str, ...] = ()
    aggregate: Callable[[Section, RunOptions], None] | None = None
    row_scores: RowScores | None = None
    text_only: Callable[[Section, ITMScorer, TaskData, int | None], None] | None = None
    recognition_order: int = 0
    card_task: tuple[str, str] = (CARD_TASK_ID, "")
    card_metrics: tuple[str, ...] = ()
    retention: bool = False

    @property
    def reads_files(self) -> bool:
        """Whether the task reads its data from files (clip_benchmark's webdatasets), not from a table."""
        return self.matches_columns is None

    def check_columns(self, rows: Dataset, where: str) -> None:
        """Refuse, in one line naming `where`, rows that lack one of `required_columns`."""
        if self.required_columns:
            from ... import columns

            columns.require_columns(rows, list(self.required_columns), where)


@dataclass(frozen=True)
class RowScores:
    """How a task's per-row scores are saved (`to_table`: column -> values) and read back (`from_table`), and
    `disagrees(row, scores)`: why a saved result row is not what its scores give (None when it is), so a
    resumed run never carries an edited figure forward."""

    to_table: Callable[[Mapping[str, Any]], dict[str, Any]]
    from_table: Callable[[Mapping[str, list]], dict[str, Any]]
    disagrees: Callable[[Mapping[str, Any], Mapping[str, Any]], str | None]


def one_row_section(task: str, source: str, result: Mapping) -> Section:
    """A result measured over a whole dataset (zero-shot classification or retrieval) as a section
    with one row, `all`, holding its numbers; its tie rule and aggregation carried over."""
    metrics = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return Section(task, source, {"all": metrics}, {}, result["tie_rule"], result["aggregation"])


def one_row_task(
    name: str,
    evaluate: Callable[..., Mapping],
    group_metrics: tuple[str, ...],
    published_benchmark: Callable[[str, str, Mapping[str, Any]], str | None] | None = None,
    **facts: Any,
) -> Task:
    """A task whose `evaluate(scorer, source, split, max_rows=...)` measures a whole dataset at once (the
    zero-shot tasks, recognised by their files): its result becomes a one-row section. `facts`: its other
    `Task` fields (the model card's task and metrics, retention)."""

    def score(scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
        return one_row_section(
            name, data.describe(), evaluate(scorer, data.source, data.split, max_rows=max_rows)
        )

    return Task(name, score, group_metrics=group_metrics, published_benchmark=published_benchmark, **facts)
