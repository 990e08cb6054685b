"""Trainer eval sets of every benchmark `hardpos eval` knows, so a run logs compositionality and retention together.

Why: hard-negative fine-tuning buys compositionality at some cost in zero-shot accuracy (Kamath et al.
2024, Appendix E / Table 10; CE-CLIP reports the same trade-off). A run that evaluates only the
hard-positive sets cannot show that cost while it trains, and a checkpoint chosen on REPLACE alone
may have lost ImageNet accuracy. So `HardPosTrainer(eval_datasets=...)` takes, per name, either

- a plain `Dataset` in the hard-positive schema (image, caption, hard_negative, hard_positive), as
  before: scored with `hf_hardpos.evaluation.evaluate_dataset`; or
- a `BenchmarkEvalSet`: a local folder, Hub id or in-memory table of any benchmark `hf_hardpos.suite`
  recognises (hard positives, caption selection such as SugarCrepe and ARO, Winoground,
  clip_benchmark's zero-shot classification and retrieval webdatasets), run by the same code as
  `hardpos eval` (`suite.task_section`), so the numbers logged in training equal the CLI's.

Each evaluation of a set gives a *section*: `{"task", "results": {row: {metric: value}},
"aggregates", "tie_rule", "aggregation"}`, rows being configs/subsets (or `all`). `flat_metrics`
turns it into the names the Trainer logs:

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
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path

from datasets import Dataset

from .. import columns
from ..errors import UserInputError
from ..provenance import looks_like_hub_id
from ..scoring import ITMScorer
from .aggregation import describe_all, replace_aggregates
from .eval_data import load_eval_sets
from .hard_positive import evaluate_dataset
from .suite import (
    HARD_POSITIVE,
    TASKS,
    ZEROSHOT_CLASSIFICATION,
    ZEROSHOT_RETRIEVAL,
    SuiteEntry,
    detect_task,
    task_of_columns,
    task_section,
)
from .tables import TIE_RULE

HARD_POSITIVE_AGGREGATION = "rates = fraction of each config's rows; s_c, s_n, s_p = mean cosine scores"
SINGLE_ROW = "all"  # the row of a set evaluated as one table


@dataclass
class BenchmarkEvalSet:
    """One eval set of any benchmark, for `HardPosTrainer(eval_datasets={name: BenchmarkEvalSet(...)})`.

    Args:
        source: a local folder or Hub id (`clip-benchmark/wds_vtab-cifar10`, `hardpos/sugarcrepe`,
            a SugarCrepe/ARO-style parquet folder, `facebook/winoground`), or an in-memory `Dataset`
            (hard positives, caption selection or Winoground, recognised from its columns).
        task: one of `hf_hardpos.suite.TASKS`; None recognises it (`suite.detect_task` for a
            source, `suite.task_of_columns` for a `Dataset`).
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
    # Hard-positive rows per config, loaded once by `resolve` (other tasks load through the suite).
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
        if self.in_memory and task in (ZEROSHOT_CLASSIFICATION, ZEROSHOT_RETRIEVAL):
            raise UserInputError(
                f"eval set {name!r}: {task} reads a clip_benchmark webdataset (folder or Hub id), "
                "not an in-memory table"
            )
        resolved = dataclasses.replace(self, task=task)
        if task == HARD_POSITIVE:
            if self.in_memory:
                resolved.subsets = {SINGLE_ROW: self.source}
            else:
                loaded = load_eval_sets(str(self.source), self.configs, self.split)
                resolved.subsets = {config: eval_set.dataset for config, eval_set in loaded.items()}
            for config, rows in resolved.subsets.items():
                where = f"eval set {name!r}" + ("" if config == SINGLE_ROW else f" config {config!r}")
                columns.require_columns(rows, [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], where)
        return resolved

    def evaluate(
        self,
        name: str,
        model,
        processor,
        scorer: Callable[[], ITMScorer],
        *,
        batch_size: int,
        device: str,
        progress: bool,
    ) -> dict:
        """This set's section for `model` as it is now (call `resolve` first).

        Hard-positive configs go through `evaluate_dataset` (the trainer's evaluator since the
        start); every other task through `suite.task_section` with `scorer()`, a scorer the caller
        builds fresh for each evaluation, since its embedding cache is only valid for one model state.
        """
        if self.task is None:
            raise ValueError(f"eval set {name!r} was not resolved: call .resolve(name) first")
        if self.task != HARD_POSITIVE:
            entry = SuiteEntry(name, self.source, self.task, self.configs, self.split)
            section = task_section(self.task, scorer(), entry, self.max_rows)
            return {"task": self.task, **section}
        results = {}
        for config, rows in self.subsets.items():
            if self.max_rows is not None:
                rows = rows.select(range(min(self.max_rows, len(rows))))
            results[config] = evaluate_dataset(
                model, processor, rows, batch_size=batch_size, device=device, progress=progress
            )
        aggregates = replace_aggregates(results)
        aggregation = "; ".join([HARD_POSITIVE_AGGREGATION, *describe_all(aggregates)])
        return {"task": HARD_POSITIVE, "results": results, "aggregates": aggregates, "tie_rule": TIE_RULE,
                "aggregation": aggregation}  # fmt: skip


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


def slug(name: str) -> str:
    """A set or row name as it appears in a logged metric name (see the module docstring)."""
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", str(name)).strip("_")


def section_rows(section: Mapping) -> dict[str, dict]:
    """Results then aggregates, one mapping (the rows a section's table and its logged names show)."""
    return {**section.get("results", {}), **section.get("aggregates", {})}


def unnamed_row(section: Mapping) -> str | None:
    """The row logged without its name: the only result row of a section, if it has one only.

    Its aggregates (e.g. SugarCrepe's category mean over that one subset) keep their names.
    """
    results = section.get("results", {})
    return next(iter(results)) if len(results) == 1 else None


def flat_metrics(set_name: str, section: Mapping, prefix: str = "eval") -> dict[str, float | int]:
    """`{prefix}_<set>[_<row>]_<metric>` -> number, for every numeric metric of every row of `section`."""
    unnamed = unnamed_row(section)
    flat: dict[str, float | int] = {}
    origin: dict[str, str] = {}
    for row, metrics in section_rows(section).items():
        stem = f"{prefix}_{slug(set_name)}" + ("" if row == unnamed else f"_{slug(row)}")
        for metric, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, Real):
                continue  # descriptions (e.g. ARO's macro protocol) and ranges are for the card, not the log
            key = f"{stem}_{metric}"
            if key in flat:
                raise ValueError(f"eval set {set_name!r}: rows {origin[key]!r} and {row!r} would both log {key!r}")
            flat[key] = int(value) if isinstance(value, Integral) else float(value)
            origin[key] = row
    return flat
