"""hf_hardpos: hard-positive evaluation and training of CLIP-style models.

Light at import time: heavy modules (torch, transformers, datasets) load when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hf_hardpos import benchmarks as _benchmarks  # noqa: F401  (registers the benchmark folders; light)
from hf_hardpos.lazy import lazy_exports

__version__ = "0.1.0"

# What type checkers and IDEs resolve (`X as X`: an explicit re-export); at run time the names load lazily.
if TYPE_CHECKING:
    from hf_hardpos.evaluate_modules import metric_path as metric_path
    from hf_hardpos.evaluation.run import evaluate_model as evaluate_model
    from hf_hardpos.evaluation.tasks.hard_positive import evaluate_dataset as evaluate_dataset
    from hf_hardpos.metrics import compute_metrics as compute_metrics
    from hf_hardpos.scoring import ITMScorer as ITMScorer

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "compute_metrics": "hf_hardpos.metrics",
        "ITMScorer": "hf_hardpos.scoring",
        "evaluate_dataset": "hf_hardpos.evaluation.tasks.hard_positive",
        "evaluate_model": "hf_hardpos.evaluation.run",
        "metric_path": "hf_hardpos.evaluate_modules",
    },
)
