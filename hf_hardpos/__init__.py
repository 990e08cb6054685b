"""hf_hardpos: hard-positive evaluation and training of CLIP-style models.

Light at import time: heavy modules (torch, transformers, datasets) load when first used.
"""

from __future__ import annotations

from hf_hardpos.lazy import lazy_exports

__version__ = "0.1.0"

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
