"""Evaluation tasks beyond the hard-positive metrics: zero-shot retention and compositional benchmarks.

One public function per task, each taking an `ITMScorer` (so every distinct image and caption is
encoded once) and returning a dict whose metric names follow the benchmark's own code, plus
`tie_rule` and `aggregation` strings that say how each number was obtained:

- `evaluate_zeroshot_classification`: clip_benchmark webdatasets (`acc1`, `acc5`, `mean_per_class_recall`)
- `evaluate_zeroshot_retrieval`: clip_benchmark webdatasets (`image_retrieval_recall@k`, `text_retrieval_recall@k`)
- `evaluate_caption_selection`: SugarCrepe, ARO (`accuracy` per subset, named aggregates; ARO's
  macro accuracy with `macro=ARO_MACRO`)
- `evaluate_winoground`: `text_score`, `image_score`, `group_score`
- `evaluate_text_only`: SugarCrepe++'s text-only task (`text_only_accuracy`)
- `evaluate_valse`, `evaluate_vl_checklist`: CE-CLIP's other benchmarks, with their seeds' aggregations
"""

from .aro import ARO_MACRO
from .caption_selection import (
    SUGARCREPE_CATEGORIES,
    evaluate_caption_selection,
    evaluate_winoground,
)
from .text_only import evaluate_text_only
from .valse import evaluate_valse, is_valse
from .vl_checklist import evaluate_vl_checklist, is_vl_checklist
from .webdataset import (
    detect_webdataset_task,
    is_clip_benchmark_webdataset,
    load_clip_benchmark_webdataset,
)
from .zeroshot_classification import evaluate_zeroshot_classification
from .zeroshot_retrieval import evaluate_zeroshot_retrieval

__all__ = [
    "ARO_MACRO",
    "SUGARCREPE_CATEGORIES",
    "detect_webdataset_task",
    "evaluate_caption_selection",
    "evaluate_text_only",
    "evaluate_valse",
    "evaluate_vl_checklist",
    "evaluate_winoground",
    "evaluate_zeroshot_classification",
    "evaluate_zeroshot_retrieval",
    "is_valse",
    "is_vl_checklist",
    "is_clip_benchmark_webdataset",
    "load_clip_benchmark_webdataset",
]
