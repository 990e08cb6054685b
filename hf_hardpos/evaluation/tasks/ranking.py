"""Strict ranks for the zero-shot tasks: one tie rule for top-k accuracy and recall@k.

Why not `torch.topk` as clip_benchmark does: topk orders equal scores by position, so an exact tie
with the correct candidate counts as a hit or a miss depending on where the candidate happens to
sit (e.g. ImageNet's duplicated class names give identical classifier rows). The package's rule is
strict everywhere (docs/reference.md, Other benchmarks): a wrong candidate that ties with the best correct one is ranked ahead
of it. On scores without exact ties the two rules give identical numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

RANK_TIE_RULE = (
    "strict: a wrong candidate scoring equal to the best correct one is ranked ahead of it, so a tie "
    "is never a hit (clip_benchmark's torch.topk orders ties by position; identical without exact ties)"
)


def strict_rank(scores: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Per query (row), how many wrong candidates score >= its best correct candidate.

    `scores` is [queries, candidates]; `positive` the same shape, True where a candidate is correct.
    A hit at k is `rank < k`. Every row needs at least one correct candidate.
    """
    if scores.shape != positive.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and positive {tuple(positive.shape)} differ in shape")
    if not bool(positive.any(dim=1).all()):
        raise ValueError("every query needs at least one correct candidate")
    best = scores.masked_fill(~positive, float("-inf")).amax(dim=1, keepdim=True)
    return ((scores >= best) & ~positive).sum(dim=1)


def chunked_strict_rank(
    queries: torch.Tensor,
    candidates: torch.Tensor,
    positive_mask: Callable[[slice], torch.Tensor],
    chunk_size: int = 1024,
) -> torch.Tensor:
    """`strict_rank(queries @ candidates.T, mask)` computed a block of queries at a time.

    COCO retrieval has 25,000 captions x 5,000 images: the full score matrix would hold 125M floats;
    blocks keep memory flat. `positive_mask(rows)` gives the mask of the query rows `rows`.
    """
    ranks = []
    for start in range(0, len(queries), chunk_size):
        rows = slice(start, start + chunk_size)
        ranks.append(strict_rank(queries[rows] @ candidates.T, positive_mask(rows)))
    return torch.cat(ranks) if ranks else torch.empty(0, dtype=torch.long)


def hit_rate(ranks: torch.Tensor, k: int) -> float:
    """Fraction of queries whose best correct candidate ranks within the top k (strict)."""
    return float((ranks < k).double().mean())
