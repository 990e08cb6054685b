"""The task registry: every benchmark task, how its data is recognised, and one way to run it.

Each task is one module declaring a `TASK` (`base.Task`): its name, how it scores `TaskData` into a
`Section`, how its data is recognised (from a table's columns, or from clip_benchmark's webdataset
files), and what a suite group of its datasets averages.

- `hard_positive`: Original/Augmented Accuracy and Brittleness (REPLACE, SWAP, SugarCrepe++);
- `caption_selection`: SugarCrepe, ARO and the registered benchmarks (accuracy per subset, their aggregates);
- `winoground`: text, image and group scores;
- `zeroshot_classification`, `zeroshot_retrieval`: clip_benchmark webdatasets (zero-shot retention).

`hardpos eval --dataset`, the suites and the trainer's evaluations all go through `detect_task` and
the one runner (`evaluation.runner`), which scores each task as its `Task` declares (per config or whole,
its aggregates, per-row scores, published benchmarks), so a number logged in training equals the CLI's.
`run_task` scores a dataset with a task directly, nothing saved. SugarCrepe++'s text-only task
(`text_only`) is an addition to a hard-positive section (`Task.text_only`), not a task of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ... import columns
from ...errors import UserInputError
from ...scoring import ITMScorer
from ..section import Section
from . import (
    caption_selection,
    hard_positive,
    webdataset,
    winoground,
    zeroshot_classification,
    zeroshot_retrieval,
)
from .base import Task, TaskData
from .caption_selection import CAPTION_SELECTION
from .hard_positive import HARD_POSITIVE
from .winoground import WINOGROUND
from .zeroshot_classification import ZEROSHOT_CLASSIFICATION
from .zeroshot_retrieval import ZEROSHOT_RETRIEVAL

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        hard_positive.TASK,
        caption_selection.TASK,
        winoground.TASK,
        zeroshot_classification.TASK,
        zeroshot_retrieval.TASK,
    )
}


def get_task(name: str) -> Task:
    """The registered task `name`; an unknown name is refused with the known ones."""
    if name not in TASKS:
        raise UserInputError(f"unknown task {name!r}; known: {list(TASKS)}")
    return TASKS[name]


def task_of_columns(column_names: Sequence[str]) -> str | None:
    """The task a table's columns call for, or None."""
    names = frozenset(column_names)
    in_order = sorted(
        (t for t in TASKS.values() if t.matches_columns is not None), key=lambda t: t.recognition_order
    )
    matching = (t.name for t in in_order if t.matches_columns(names))
    return next(matching, None)


def detect_task(source: str, split: str = "test", configs: Sequence[str] | None = None) -> str:
    """Recognise what `source` (a local folder or a Hub id) is: clip_benchmark's webdataset files
    (zero-shot classification or retrieval), else the columns of its first config."""
    from ..eval_data import load_eval_sets, require_dataset_exists

    require_dataset_exists(source)
    if webdataset.is_clip_benchmark_webdataset(source):
        task = webdataset.detect_webdataset_task(source, split)
        if task is None:
            raise UserInputError(f"{source}: clip_benchmark layout, but no {split}/nshards.txt (try --split)")
        return task
    if not Path(source).expanduser().exists():
        try:
            task = webdataset.detect_webdataset_task(source, split)
        except UserInputError:
            task = None
        if task is not None:
            return task
    first = load_eval_sets(source, list(configs)[:1] if configs else None, split)
    eval_set = next(iter(first.values())).dataset
    task = task_of_columns(eval_set.column_names)
    if task is None:
        raise UserInputError(
            f"cannot tell which benchmark {source} is from its columns {eval_set.column_names}: expected "
            f"{list(columns.EVAL_CAPTION_COLUMNS)} + image (hard positives), image + caption + hard_negative "
            "(caption selection), Winoground's columns, or clip_benchmark's webdataset files; pass --task"
        )
    return task


def run_task(name: str, scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
    """Score `data` with the registered task `name`: the one entry point of the suite and the trainer."""
    return get_task(name).score(scorer, data, max_rows)


__all__ = [
    "CAPTION_SELECTION",
    "HARD_POSITIVE",
    "WINOGROUND",
    "ZEROSHOT_CLASSIFICATION",
    "ZEROSHOT_RETRIEVAL",
    "TASKS",
    "Task",
    "TaskData",
    "detect_task",
    "get_task",
    "run_task",
    "task_of_columns",
]
