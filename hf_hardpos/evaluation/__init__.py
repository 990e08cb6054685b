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

# What type checkers and IDEs resolve (`X as X`: an explicit re-export); at run time the names load lazily.
if TYPE_CHECKING:
    from .options import RunOptions as RunOptions
    from .report import EvaluationReport as EvaluationReport
    from .run import evaluate_model as evaluate_model
    from .section import Section as Section
    from .suite import SuiteEntry as SuiteEntry
    from .suite import SuiteReport as SuiteReport
    from .suite import load_suite as load_suite
    from .suite import run_suite as run_suite
    from .tasks import run_task as run_task
    from .tasks.hard_positive import evaluate_dataset as evaluate_dataset

__getattr__, __all__ = lazy_exports(
    __name__,
    {
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
    },
)
