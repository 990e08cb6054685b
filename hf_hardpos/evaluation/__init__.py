"""Evaluation: every benchmark task, one typed result, aggregation and output folders in one package.

- `runner`: the one runner: any registered task (`tasks`) on one dataset, resumable per config, keyed
  by content; `hardpos eval --dataset`, every suite dataset and the trainer's evaluations go through it;
- `run.evaluate_model`: a model on one dataset (`hardpos eval --dataset`), options in `options.RunOptions`;
- `suite.run_suite`: a model on several benchmarks, each recognised by the task registry (`tasks`);
- `section.Section`: one benchmark's result, which tables, `metrics.json`, model cards and reports render
  (`report.EvaluationReport`: a dataset's section with the run it came from, as `hardpos eval` saves it);
- `aggregation`, `output_folder`, `tables`: how figures combine, where they are saved, how they print.

Names load lazily so that `hardpos --help` does not import torch.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker and an IDE resolve; at run time the names load lazily
    from .report import EvaluationReport
    from .options import RunOptions
    from .section import Section
    from .suite import SuiteEntry, SuiteReport, load_suite, run_suite
    from .tasks.hard_positive import evaluate_dataset
    from .run import evaluate_model
    from .tasks import run_task

__getattr__, __all__ = lazy_exports(__name__, {
    "EvaluationReport": ".report",
    "RunOptions": ".options",
    "Section": ".section",
    "SuiteEntry": ".suite",
    "SuiteReport": ".suite",
    "evaluate_dataset": ".tasks.hard_positive",
    "evaluate_model": ".run",
    "load_suite": ".suite",
    "run_suite": ".suite",
    "run_task": ".tasks",
})
