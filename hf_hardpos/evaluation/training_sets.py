"""Trainer eval sets of every benchmark `hardpos eval` knows, so a run logs compositionality and retention together.

Why: hard-negative fine-tuning buys compositionality at some cost in zero-shot accuracy (Kamath et al.
2024, Appendix E / Table 10; CE-CLIP reports the same trade-off). A run that evaluates only the
hard-positive sets cannot show that cost while it trains, and a checkpoint chosen on REPLACE alone
may have lost ImageNet accuracy. So `HardPosTrainer(eval_datasets=...)` takes, per name, either

- a plain `Dataset` in the hard-positive schema (image, caption, hard_negative, hard_positive); or
- a `BenchmarkEvalSet`: a local folder, Hub id or in-memory table of any benchmark the task registry
  recognises (hard positives, caption selection such as SugarCrepe and ARO, Winoground,
  clip_benchmark's zero-shot classification and retrieval webdatasets).

Either is run by the runner `hardpos eval` runs (`runner.score_dataset`), so the numbers logged in
training equal the CLI's. Each evaluation gives a `Section`; `Section.flat_metrics` names what the
Trainer logs:

- `eval_<set>_<metric>` for the result row of a set that has only one (an in-memory set, a one-config
  set, a zero-shot set): `eval_cifar10_acc1`, `eval_toy_augmented_accuracy`;
- `eval_<set>_<row>_<metric>` for every row of a set with several, and for every aggregate:
  `eval_sugarcrepe_replace_att_accuracy`, `eval_replace_pooled_attributes_relations_augmented_accuracy`
  (REPLACE's pooled column, the paper's; `..._mean_attributes_relations_...` is the macro mean of subsets).

Set and row names are slugged (runs of characters other than letters, digits, `_ . @ -` become one
`_`), so `pooled(attributes,relations)` is logged as `pooled_attributes_relations`; only numbers are
logged, counts as ints and everything else as Python floats. Two rows that would log under one
name are an error, never a silent overwrite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from datasets import Dataset

from .. import columns
from ..errors import UserInputError
from ..provenance import looks_like_hub_id
from ..scoring import ITMScorer
from .options import RunOptions
from .runner import dataset_units, score_dataset
from .section import HARD_POSITIVE, Section
from .tasks import TASKS, TaskData, detect_task, get_task, task_of_columns

SINGLE_ROW = "all"  # the row of an in-memory hard-positive set, evaluated as one table


@dataclass
class BenchmarkEvalSet:
    """One eval set of any benchmark, for `HardPosTrainer(eval_datasets={name: BenchmarkEvalSet(...)})`.

    Args:
        source: a local folder or Hub id (`clip-benchmark/wds_vtab-cifar10`, `hardpos/sugarcrepe`,
            a SugarCrepe/ARO-style parquet folder, `facebook/winoground`), or an in-memory `Dataset`
            (hard positives, caption selection or Winoground, recognised from its columns).
        task: one of `evaluation.tasks.TASKS`; None recognises it (`tasks.detect_task` for a
            source, `tasks.task_of_columns` for a `Dataset`).
        configs: the configs of `source` to evaluate (None: all it declares).
        split: the split of `source` (ignored for a `Dataset`).
        max_rows: evaluate only the first N rows (images, for zero-shot sets) of each config: a
            quick run whose numbers describe those rows only, which the model card says.
    """

    source: str | Dataset
    task: str | None = None
    configs: list[str] | None = None
    split: str = "test"
    max_rows: int | None = None
    # Rows per config of a task scored config by config (`Task.per_config`), loaded once by `resolve`.
    subsets: dict[str, Dataset] = field(default_factory=dict, init=False, repr=False)

    @property
    def in_memory(self) -> bool:
        return isinstance(self.source, Dataset)

    def describe(self) -> str:
        """The source, configs and split in words (the model card counts an in-memory table's rows itself)."""
        if self.in_memory:
            return "an in-memory table"
        configs = f" config(s) {', '.join(self.configs)}" if self.configs else ""
        return f"`{self.source}`{configs}, split `{self.split}`"

    def resolve(self, name: str) -> BenchmarkEvalSet:
        """A copy with the task known and checked, hard-positive rows loaded: fails before training starts."""
        if self.max_rows is not None and self.max_rows < 1:
            raise UserInputError(f"eval set {name!r}: max_rows must be >= 1, got {self.max_rows}")
        task = self.task
        if task is None and self.in_memory:
            task = task_of_columns(self.source.column_names)
            if task is None:
                raise UserInputError(
                    f"eval set {name!r}: cannot tell which benchmark its columns {self.source.column_names} are "
                    f"(expected {list(columns.EVAL_CAPTION_COLUMNS)} + image, image + caption + hard_negative, "
                    "or Winoground's); pass BenchmarkEvalSet(task=...)"
                )
        elif task is None:
            if not Path(self.source).expanduser().exists() and not looks_like_hub_id(str(self.source)):
                raise UserInputError(
                    f"eval set {name!r}: dataset not found: {self.source} is no local folder and no Hub id"
                )
            task = detect_task(str(self.source), self.split, self.configs)
        if task not in TASKS:
            raise UserInputError(f"eval set {name!r}: unknown task {task!r}; known: {list(TASKS)}")
        if self.in_memory and get_task(task).reads_files:
            raise UserInputError(
                f"eval set {name!r}: {task} reads a clip_benchmark webdataset (folder or Hub id), "
                "not an in-memory table"
            )
        resolved = dataclasses.replace(self, task=task)
        if get_task(task).per_config:  # its configs' rows loaded once, checked before training starts
            if self.in_memory:
                get_task(task).check_columns(self.source, f"eval set {name!r}")
            source = {SINGLE_ROW: self.source} if self.in_memory else self.source
            units = dataset_units(
                get_task(task), TaskData(source, self.configs, self.split), f"eval set {name!r}"
            )
            resolved.subsets = {config: unit.source[config] for config, (unit, _) in units.items()}
        return resolved

    def evaluate(self, name: str, scorer: Callable[[], ITMScorer]) -> Section:
        """This set's section for the model as it is now (call `resolve` first), by the runner `hardpos eval`
        uses (`runner.score_dataset`); `scorer()` is built fresh by the caller for each evaluation, since its
        embedding cache is only valid for one state of the model."""
        if self.task is None:
            raise ValueError(f"eval set {name!r} was not resolved: call .resolve(name) first")
        data = TaskData(self.subsets) if self.subsets else TaskData(self.source, self.configs, self.split)
        return score_dataset(
            self.task, scorer(), data, RunOptions(max_rows=self.max_rows, progress=False, intervals=False)
        )


def as_benchmark_eval_set(name: str, value: Dataset | BenchmarkEvalSet) -> BenchmarkEvalSet:
    """A trainer eval-set value, resolved: a plain `Dataset` is a hard-positive set (the schema is checked)."""
    if isinstance(value, Dataset):
        value = BenchmarkEvalSet(value, task=HARD_POSITIVE)
    if not isinstance(value, BenchmarkEvalSet):
        raise TypeError(
            f"eval set {name!r} is a {type(value).__name__}; pass a datasets.Dataset (hard-positive schema) "
            "or a hf_hardpos.training.BenchmarkEvalSet"
        )
    return value.resolve(name)
