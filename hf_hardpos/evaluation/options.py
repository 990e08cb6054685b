"""`RunOptions`: how one evaluation run scores and saves, one object instead of a bag of positional values.

Why: the same dozen settings (batch size, workers, device, precision, TF32, image backend, row limit,
bootstrap, cache, resume, progress, log) travel from the command line through the suite to every
dataset's runner and its scorer. Passed one by one they were threaded through dozens of signatures in
an order each had to repeat; one frozen object is built once (`hardpos eval`, `run_suite`,
`evaluate_model`) and checked once, before anything is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends import ModelOptions
from ..errors import UserInputError
from ..image_processing import DEFAULT_IMAGE_BACKEND


@dataclass(frozen=True)
class RunOptions:
    """The settings of one evaluation run (every one a keyword of `evaluate_model` and `run_suite`).

    Score-changing ones (`precision`, `allow_tf32`, `device`, `max_rows`, `image_backend`, `protocol`) are
    part of every resume key; `batch_size`, `num_workers`, `bootstrap_samples` (intervals are recomputed
    from saved per-row scores), `resume`, `progress` and `log` are not. `make_scorer` builds the scorer
    in place of `ITMScorer`, called with the resolved model first and then as `ITMScorer` is
    (`multi_model.scorer_factory`: shared pixels, or work sharded across processes, which load that
    resolved model as is); `preset` names the `hardpos zoo` preset the weights are (published rows beside ours).
    """

    batch_size: int = 64
    num_workers: int | None = None  # None: the machine's default (`compute.default_num_workers`)
    device: str | None = None
    precision: str = "fp32"
    allow_tf32: bool = False
    image_backend: str = DEFAULT_IMAGE_BACKEND
    protocol: str = "default"
    max_rows: int | None = None
    bootstrap_samples: int = 0
    intervals: bool = (
        True  # every rate's interval (Wilson, or `bootstrap_samples`); the trainer logs rates only
    )
    cache_dir: str | Path | None = None
    resume: bool = True
    progress: bool = True
    preset: str | None = None
    make_scorer: Callable[..., Any] | None = None
    log: Callable[[str], None] = print

    def check(self) -> None:
        """Refuse invalid numbers before anything is loaded (never silently replaced by a default)."""
        if self.batch_size < 1:
            raise UserInputError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.num_workers is not None and self.num_workers < 0:
            raise UserInputError(f"--num-workers must be >= 0, got {self.num_workers}")
        if self.max_rows is not None and self.max_rows < 1:
            raise UserInputError(f"--max-rows must be >= 1, got {self.max_rows}")
        if self.bootstrap_samples < 0:
            raise UserInputError(f"--bootstrap must be >= 0, got {self.bootstrap_samples}")

    def resolved(self) -> RunOptions:
        """These options checked, with `num_workers` resolved to the machine's default when None."""
        self.check()
        if self.num_workers is not None:
            return self
        from ..compute import default_num_workers

        return dataclasses.replace(self, num_workers=default_num_workers())

    def replace(self, **changes) -> RunOptions:
        return dataclasses.replace(self, **changes)

    def scorer_keywords(self) -> dict[str, Any]:
        """What `ITMScorer` (or `make_scorer`) takes from these options, besides the model and its cache."""
        return {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "device": self.device,
            "precision": self.precision,
            "allow_tf32": self.allow_tf32,
            "progress": self.progress,
        }


def split_keywords(keywords: dict[str, Any]) -> tuple[RunOptions, ModelOptions]:
    """`evaluate_model(**keywords)` / `run_suite(**keywords)` as the two option objects; an unknown keyword is
    a TypeError naming it, as Python's own for a function."""
    run_fields = {f.name for f in dataclasses.fields(RunOptions)}
    model_fields = {f.name for f in dataclasses.fields(ModelOptions)}
    unknown = sorted(set(keywords) - run_fields - model_fields)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    return (
        RunOptions(**{k: v for k, v in keywords.items() if k in run_fields}),
        ModelOptions(**{k: v for k, v in keywords.items() if k in model_fields}),
    )
