"""Zero-shot image-text retrieval (clip_benchmark's metric names and definitions).

Why: the paper's retention check includes COCO and Flickr30k retrieval recall@1 (Appendix E), and
published figures come from clip_benchmark, so its definitions are kept:

- `image_retrieval_recall@k`: each caption queries all images; a hit when its own image is among
  the top k; averaged over captions;
- `text_retrieval_recall@k`: each image queries all captions; a hit when at least one of its own
  captions is among the top k (CLIP-paper recall, not the fraction of its captions); averaged over
  images.

Every sample (row) is one gallery image, even when two rows hold identical pixels (then they tie,
and the strict rule counts the other row as ranked ahead). Ties follow `ranking.RANK_TIE_RULE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from datasets import Dataset

from ...errors import UserInputError
from ...scoring import ITMScorer
from .base import CARD_TASK_ID, one_row_task
from .ranking import RANK_TIE_RULE, chunked_strict_rank, hit_rate
from .webdataset import (
    CAPTIONS_COLUMN,
    KEY_COLUMN,
    ZEROSHOT_RETRIEVAL,
    ClipBenchmarkWebDataset,
    load_task_rows,
    retention_benchmark,
)

RECALL_KS = (1, 5, 10)
RETRIEVAL_AGGREGATION = (
    "image_retrieval_recall@k: mean over captions; text_retrieval_recall@k: mean over images (a hit when "
    "any of the image's captions is in the top k)"
)


def retrieval_metrics(
    image_embeddings: torch.Tensor,
    text_embeddings: torch.Tensor,
    text_image: torch.Tensor,
    ks: Sequence[int] = RECALL_KS,
) -> dict[str, float]:
    """Recall@k both ways from L2-normalised embeddings; `text_image[j]` is caption j's image row."""
    num_images = image_embeddings.shape[0]
    text_image = text_image.long()
    image_ranks = chunked_strict_rank(
        text_embeddings,
        image_embeddings,
        lambda rows: torch.nn.functional.one_hot(text_image[rows], num_images).bool(),
    )
    image_index = torch.arange(num_images)
    text_ranks = chunked_strict_rank(
        image_embeddings,
        text_embeddings,
        lambda rows: image_index[rows, None] == text_image[None, :],
    )
    result = {}
    for k in ks:
        result[f"image_retrieval_recall@{k}"] = hit_rate(image_ranks, k)
        result[f"text_retrieval_recall@{k}"] = hit_rate(text_ranks, k)
    return result


def _captions(loaded: ClipBenchmarkWebDataset, rows: Dataset) -> tuple[list[str], torch.Tensor]:
    """All captions in sample order and, for each, its sample's row (clip_benchmark's `str.splitlines`)."""
    texts: list[str] = []
    owners: list[int] = []
    for row, cell in enumerate(list(rows[CAPTIONS_COLUMN])):
        captions = cell.splitlines() if isinstance(cell, str) else []
        if not captions:
            key = rows[row][KEY_COLUMN]
            raise UserInputError(
                f"{loaded.source} ({loaded.split}), sample {key!r}: no caption in its .txt file; "
                "retrieval needs at least one caption per image"
            )
        texts.extend(captions)
        owners.extend([row] * len(captions))
    return texts, torch.tensor(owners, dtype=torch.long)


def evaluate_zeroshot_retrieval(
    scorer: ITMScorer,
    dataset: str | Path | ClipBenchmarkWebDataset,
    split: str = "test",
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    max_rows: int | None = None,
    ks: Sequence[int] = RECALL_KS,
) -> dict:
    """Image and text retrieval recall@k of `scorer`'s model on a clip_benchmark retrieval webdataset.

    `dataset` is a local folder, a Hub id (`clip-benchmark/wds_mscoco_captions`) or a loaded split;
    `max_rows` keeps the first N images (and their captions). Distinct images and distinct caption
    strings are each encoded once.
    """
    loaded, rows = load_task_rows(
        dataset, ZEROSHOT_RETRIEVAL, split, revision=revision, cache_dir=cache_dir, max_rows=max_rows
    )
    texts, text_image = _captions(loaded, rows)
    slot = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    text_embeddings = scorer.encode_texts(list(slot))[torch.tensor([slot[t] for t in texts])]
    image_embeddings, image_slot = scorer.embed_images(rows, loaded.image_column)
    return {
        "task": ZEROSHOT_RETRIEVAL,
        "dataset": loaded.source,
        "split": loaded.split,
        **retrieval_metrics(image_embeddings[torch.from_numpy(image_slot)], text_embeddings, text_image, ks),
        "num_images": len(rows),
        "num_texts": len(texts),
        "num_distinct_images": int(image_embeddings.shape[0]),
        "tie_rule": RANK_TIE_RULE,
        "aggregation": RETRIEVAL_AGGREGATION,
    }


# A suite group (e.g. VTAB) averages the first metric.
TASK = one_row_task(
    ZEROSHOT_RETRIEVAL,
    evaluate_zeroshot_retrieval,
    ("image_retrieval_recall@1", "text_retrieval_recall@1"),
    retention_benchmark,
    card_task=(CARD_TASK_ID, "Zero-shot image-text retrieval"),
    card_metrics=tuple(f"{d}_retrieval_recall@{k}" for d in ("image", "text") for k in RECALL_KS),
    retention=True,
)
