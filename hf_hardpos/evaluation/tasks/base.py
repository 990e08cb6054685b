"""What a task is to the registry: how it recognises its data, and how it scores it into a `Section`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

from ...scoring import ITMScorer
from ..section import Section


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
    """

    name: str
    score: Callable[[ITMScorer, TaskData, int | None], Section]
    matches_columns: Callable[[frozenset[str]], bool] | None = None
    group_metrics: tuple[str, ...] = ()
    published_benchmark: Callable[[str, str, Mapping[str, Any]], str | None] | None = None


def one_row_section(task: str, source: str, result: Mapping) -> Section:
    """A result measured over a whole dataset (zero-shot classification or retrieval) as a section
    with one row, `all`, holding its numbers; its tie rule and aggregation carried over."""
    metrics = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return Section(task, source, {"all": metrics}, {}, result["tie_rule"], result["aggregation"])


def one_row_task(name: str, evaluate: Callable[..., Mapping], group_metrics: tuple[str, ...],
                 published_benchmark: Callable[[str, str, Mapping[str, Any]], str | None] | None = None) -> Task:
    """A task whose `evaluate(scorer, source, split, max_rows=...)` measures a whole dataset at once (the
    zero-shot tasks, recognised by their files): its result becomes a one-row section."""

    def score(scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
        return one_row_section(name, data.describe(), evaluate(scorer, data.source, data.split, max_rows=max_rows))

    return Task(name, score, group_metrics=group_metrics, published_benchmark=published_benchmark)
