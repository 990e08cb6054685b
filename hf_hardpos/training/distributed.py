"""Collectives the losses need under data parallelism, and nothing else.

Contrastive losses only see the negatives that sit in the batch they are given. With several processes,
each process holds a shard, so without gathering the "batch" of negatives silently shrinks to the shard
(the gap transformers#22252 and accelerate#1154 complain about). The helpers here gather features from
every process *with gradient*, so each process can score its local rows against the global batch.

Gradient bookkeeping (a trap that is easy to fall into): a process's loss depends on every process's features,
but autograd on that process only reaches its own encoders. :func:`all_gather_with_grad` therefore sums
the incoming gradient over processes (one ``all_reduce``) before keeping the slice that belongs to the
local rows. Combined with losses that normalise their local rows by the *global* number of terms times
the world size, the gradient that DDP averages over ranks equals the single-process, full-batch gradient
(see ``tests/training/test_distributed_losses.py``).

Every helper returns its input untouched when no process group is initialised (or the world is one
process), so single-process training pays nothing.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["all_gather", "all_gather_with_grad", "all_reduce_sum", "gather_sizes", "world_info"]


def world_info() -> tuple[int, int]:
    """``(rank, world_size)`` of the default process group, ``(0, 1)`` when none is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_sizes(num_rows: int, device: torch.device | str = "cpu") -> list[int]:
    """The first-dimension size of every process's shard, in rank order.

    Shards may differ in size (an uneven last batch); gathering the sizes first lets
    :func:`all_gather` pad and un-pad, and lets losses find the global index of their local rows.
    """
    _, world_size = world_info()
    if world_size == 1:
        return [num_rows]
    local = torch.tensor([num_rows], dtype=torch.long, device=device)
    slots = [torch.zeros_like(local) for _ in range(world_size)]
    dist.all_gather(slots, local)
    return [int(slot.item()) for slot in slots]


def _gather_padded(tensor: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Concatenate every process's ``tensor`` along dim 0 (no autograd), padding uneven shards."""
    largest = max(sizes)
    padded = tensor
    if tensor.shape[0] < largest:
        padding = tensor.new_zeros((largest - tensor.shape[0], *tensor.shape[1:]))
        padded = torch.cat([tensor, padding], dim=0)
    # gloo has no bool all_gather; uint8 round-trips masks exactly.
    is_bool = padded.dtype == torch.bool
    if is_bool:
        padded = padded.to(torch.uint8)
    slots = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(slots, padded.contiguous())
    gathered = torch.cat([slot[:size] for slot, size in zip(slots, sizes)], dim=0)
    return gathered.bool() if is_bool else gathered


class _AllGatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 whose backward returns, to each process, the gradient of the *sum* of every
    process's loss with respect to that process's rows."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor, sizes: list[int], rank: int) -> torch.Tensor:  # type: ignore[override]
        ctx.start = sum(sizes[:rank])
        ctx.stop = ctx.start + sizes[rank]
        return _gather_padded(tensor, sizes)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):  # type: ignore[override]
        grad = grad_output.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.start : ctx.stop], None, None


def all_gather(
    tensor: torch.Tensor, *, with_grad: bool = False, sizes: list[int] | None = None
) -> torch.Tensor:
    """Concatenate ``tensor`` from all processes along dim 0, in rank order.

    Args:
        tensor: this process's shard; shapes may differ only in dim 0.
        with_grad: keep the autograd graph (see the module docstring for the gradient it produces).
            Without it the result is a constant, like plain ``dist.all_gather``.
        sizes: every shard's dim-0 size if the caller already knows them (saves one collective).

    Returns ``tensor`` itself (same object) when no process group is initialised.
    """
    rank, world_size = world_info()
    if world_size == 1:
        return tensor
    if sizes is None:
        sizes = gather_sizes(tensor.shape[0], tensor.device)
    if len(sizes) != world_size or sizes[rank] != tensor.shape[0]:
        raise ValueError(
            f"all_gather: sizes {sizes} do not match world size {world_size} and local rows {tensor.shape[0]}"
        )
    if with_grad and tensor.requires_grad:
        return _AllGatherWithGrad.apply(tensor, sizes, rank)
    return _gather_padded(tensor.detach(), sizes)


def all_gather_with_grad(tensor: torch.Tensor, sizes: list[int] | None = None) -> torch.Tensor:
    """:func:`all_gather` with ``with_grad=True``: the global batch, differentiable w.r.t. the local shard."""
    return all_gather(tensor, with_grad=True, sizes=sizes)


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of ``tensor`` over processes (a new tensor, no autograd); ``tensor`` itself without a process group.

    Used for statistics that must be identical on every rank (e.g. the CMR thresholds)."""
    _, world_size = world_info()
    if world_size == 1:
        return tensor
    reduced = tensor.detach().clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    return reduced
