"""hf_hardpos: hard-positive evaluation and training of CLIP-style models.

Light at import time: heavy modules (torch, transformers, datasets) load when first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "compute_metrics": "hf_hardpos.metrics",
    "ITMScorer": "hf_hardpos.scoring",
    "evaluate_dataset": "hf_hardpos.evaluation",
    "evaluate_model": "hf_hardpos.evaluation",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hf_hardpos' has no attribute {name!r}")


__all__ = sorted(_LAZY)
