"""Zero-shot classification (CLIP's protocol, clip_benchmark's metric names and definitions).

Why: hard-negative fine-tuning is known to erode zero-shot accuracy (a frequent complaint in the issue trackers of ARO, SugarCrepe, TSVLC and CE-CLIP), so the paper checks
ImageNet-1k and VTAB after fine-tuning (Appendix E, Table 10). The numbers must be comparable with
the ones everybody publishes, hence clip_benchmark's recipe:

- classifier: for each class, every template `t.format(c=classname)` is embedded and L2-normalised,
  the embeddings are averaged over templates and the mean is renormalised (template ensembling);
- logits: cosine of the L2-normalised image embedding with each class vector;
- `acc1`, `acc5`: fraction of images whose class is in the top 1 / top 5 (`acc5` only with at least
  5 classes, as upstream); `mean_per_class_recall`: top-1 recall averaged over the classes present
  in the split, unweighted (sklearn's `balanced_accuracy_score`, which clip_benchmark calls).

Ties follow the package's strict rule (`ranking.RANK_TIE_RULE`), not topk's position order.
"""

from __future__ import annotations

from pathlib import Path

import torch
from datasets import Dataset

from ...errors import UserInputError
from ...scoring import ITMScorer
from .base import CARD_TASK_ID, one_row_task
from .ranking import RANK_TIE_RULE, chunked_strict_rank, hit_rate
from .webdataset import (
    KEY_COLUMN,
    LABEL_COLUMN,
    TEMPLATES_FILE,
    ZEROSHOT_CLASSIFICATION,
    ClipBenchmarkWebDataset,
    load_task_rows,
    retention_benchmark,
)

CLASSIFICATION_AGGREGATION = (
    "acc1/acc5: fraction of all images (pooled); mean_per_class_recall: unweighted mean over the classes "
    "present in the split of each class's top-1 recall (balanced accuracy)"
)


def zeroshot_classifier(scorer: ITMScorer, classnames: list[str], templates: list[str]) -> torch.Tensor:
    """[num_classes, dim] class vectors: renormalised mean of the L2-normalised template embeddings.

    Each distinct prompt is encoded once (several classes can share a name, e.g. ImageNet's two
    "crane"s in some lists).
    """
    prompts = []
    for template in templates:
        try:
            template.format(c="x")
        except (KeyError, IndexError, ValueError) as err:
            raise UserInputError(
                f"{TEMPLATES_FILE}: template {template!r} must use only the placeholder {{c}} ({err!r})"
            ) from None
    for name in classnames:
        prompts.extend(template.format(c=name) for template in templates)
    slot = {prompt: i for i, prompt in enumerate(dict.fromkeys(prompts))}
    embeddings = scorer.encode_texts(list(slot))  # already L2-normalised, fp32
    per_prompt = embeddings[torch.tensor([slot[p] for p in prompts])]
    per_class = per_prompt.view(len(classnames), len(templates), -1).mean(dim=1)
    return torch.nn.functional.normalize(per_class, dim=-1)


def classification_metrics(
    image_embeddings: torch.Tensor, targets: torch.Tensor, classifier: torch.Tensor
) -> dict:
    """`acc1`, `acc5` (with >= 5 classes) and `mean_per_class_recall` of cosine logits, strict ties.

    `image_embeddings` [n, dim] and `classifier` [num_classes, dim] are L2-normalised; `targets` [n].
    """
    num_classes = classifier.shape[0]
    targets = targets.long()
    ranks = chunked_strict_rank(
        image_embeddings,
        classifier,
        lambda rows: torch.nn.functional.one_hot(targets[rows], num_classes).bool(),
    )
    result = {"acc1": hit_rate(ranks, 1)}
    if num_classes >= 5:
        result["acc5"] = hit_rate(ranks, 5)
    correct = (ranks == 0).double()
    present = torch.unique(targets)
    recalls = [correct[targets == c].mean() for c in present]
    result["mean_per_class_recall"] = float(torch.stack(recalls).mean())
    return result


def _targets(loaded: ClipBenchmarkWebDataset, rows: Dataset) -> torch.Tensor:
    labels = list(rows[LABEL_COLUMN])
    num_classes = len(loaded.classnames or [])
    for row, label in enumerate(labels):
        if label is None or not isinstance(label, int) or not 0 <= label < num_classes:
            key = rows[row][KEY_COLUMN]
            raise UserInputError(
                f"{loaded.source} ({loaded.split}), sample {key!r}: class index {label!r} is not in "
                f"[0, {num_classes}) (classnames.txt has {num_classes} lines)"
            )
    return torch.tensor(labels, dtype=torch.long)


def evaluate_zeroshot_classification(
    scorer: ITMScorer,
    dataset: str | Path | ClipBenchmarkWebDataset,
    split: str = "test",
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    max_rows: int | None = None,
) -> dict:
    """Zero-shot classification metrics of `scorer`'s model on a clip_benchmark webdataset.

    `dataset` is a local folder, a Hub id (`clip-benchmark/wds_imagenet1k`) or an already loaded
    split; `max_rows` keeps the first N images (quick checks). Distinct images are encoded once.
    Returns `acc1`, `acc5`, `mean_per_class_recall`, counts, `tie_rule` and `aggregation`.
    """
    loaded, rows = load_task_rows(
        dataset, ZEROSHOT_CLASSIFICATION, split, revision=revision, cache_dir=cache_dir, max_rows=max_rows
    )
    targets = _targets(loaded, rows)
    classifier = zeroshot_classifier(scorer, loaded.classnames, loaded.templates)
    image_embeddings, image_slot = scorer.embed_images(rows, loaded.image_column)
    per_row = image_embeddings[torch.from_numpy(image_slot)]
    return {
        "task": ZEROSHOT_CLASSIFICATION,
        "dataset": loaded.source,
        "split": loaded.split,
        **classification_metrics(per_row, targets, classifier),
        "num_examples": len(targets),
        "num_classes": len(loaded.classnames),
        "num_templates": len(loaded.templates),
        "num_distinct_images": int(image_embeddings.shape[0]),
        "tie_rule": RANK_TIE_RULE,
        "aggregation": CLASSIFICATION_AGGREGATION,
    }


# A suite group (e.g. VTAB) averages the first metric.
TASK = one_row_task(
    ZEROSHOT_CLASSIFICATION,
    evaluate_zeroshot_classification,
    ("acc1", "acc5"),
    retention_benchmark,
    card_task=(CARD_TASK_ID, "Zero-shot image classification"),
    card_metrics=("acc1", "acc5", "mean_per_class_recall"),
    retention=True,
)
