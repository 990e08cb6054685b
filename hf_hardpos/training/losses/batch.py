"""One batch of embeddings as every loss term sees it: this process's rows plus the global batch.

The objective builds an :class:`EmbeddingBatch` once per step, so the features are validated and gathered
across processes once (one packed, differentiable all-gather) and every loss term reads the same views.

Normalisation convention shared by all terms (why :meth:`EmbeddingBatch.reduce` exists): a term is a mean
over "valid entries" (rows, or (row, slot) pairs, that have the needed hard negative/positive). Each process
sums its *local* entries and divides by the *global* count, times the number of processes. The mean of
the per-process values is then exactly the single-process mean over the concatenated batch, and so is
the gradient that DDP averages; with one process it is simply the mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from hf_hardpos.training.distributed import all_gather, all_gather_with_grad, gather_sizes, world_info

__all__ = ["EmbeddingBatch", "Slots"]


class Slots(NamedTuple):
    """One kind of extra caption per row (hard positives or hard negatives): `embeds` ``[b, S, D]`` and
    `mask` ``[b, S]`` (``False`` = the row has no such caption; None = every slot is present)."""

    embeds: torch.Tensor
    mask: torch.Tensor | None = None

    @classmethod
    def of(cls, kind: str, embeds: torch.Tensor | None, mask: torch.Tensor | None) -> Slots | None:
        """`Slots(embeds, mask)`, or None without `embeds`; a mask without embeds is an error."""
        if embeds is None:
            if mask is not None:
                raise ValueError(f"{kind}_mask was given without {kind}_embeds")
            return None
        return cls(embeds, mask)


@dataclass
class EmbeddingBatch:
    """L2-normalised embeddings of one step. ``global_*`` are the concatenation over processes (the local
    tensors themselves with one process or when gathering is off).

    Attributes:
        image, text: ``[b, D]`` this process's images and original captions.
        positives, positive_mask: ``[b, P, D]`` / ``[b, P]`` hard positives (``False`` = no such caption).
        negatives, negative_mask: ``[b, K, D]`` / ``[b, K]`` hard negatives, one slot per type.
        offset: global index of the first local row.
        world_scale: number of processes the global batch is split over (1 without gathering).
    """

    image: torch.Tensor
    text: torch.Tensor
    positives: torch.Tensor | None
    positive_mask: torch.Tensor | None
    negatives: torch.Tensor | None
    negative_mask: torch.Tensor | None
    global_image: torch.Tensor
    global_text: torch.Tensor
    global_positives: torch.Tensor | None
    global_positive_mask: torch.Tensor | None
    global_negatives: torch.Tensor | None
    global_negative_mask: torch.Tensor | None
    offset: int
    world_scale: int

    @classmethod
    def build(
        cls,
        image_embeds: torch.Tensor,
        text_embeds: torch.Tensor,
        positives: Slots | None = None,
        negatives: Slots | None = None,
        *,
        gather_across_processes: bool = True,
    ) -> EmbeddingBatch:
        """Validate shapes, default missing masks to all-valid, and gather the global batch.

        Raises ``ValueError`` naming the offending argument when shapes disagree.
        """
        if image_embeds.ndim != 2 or text_embeds.shape != image_embeds.shape:
            raise ValueError(
                f"image_embeds and text_embeds must both be [batch, dim]; got {tuple(image_embeds.shape)} "
                f"and {tuple(text_embeds.shape)}"
            )
        positive_embeds, positive_mask = _check_slots("positive", image_embeds, positives)
        negative_embeds, negative_mask = _check_slots("negative", image_embeds, negatives)

        rank, world_size = world_info()
        if not gather_across_processes or world_size == 1:
            return cls(
                image_embeds,
                text_embeds,
                positive_embeds,
                positive_mask,
                negative_embeds,
                negative_mask,
                image_embeds,
                text_embeds,
                positive_embeds,
                positive_mask,
                negative_embeds,
                negative_mask,
                offset=0,
                world_scale=1,
            )

        # One differentiable gather for all features and one plain gather for all masks (plus the sizes).
        batch, dim = image_embeds.shape
        parts = [image_embeds[:, None], text_embeds[:, None]]
        masks = []
        if positive_embeds is not None:
            parts.append(positive_embeds)
            masks.append(positive_mask)
        if negative_embeds is not None:
            parts.append(negative_embeds)
            masks.append(negative_mask)
        sizes = gather_sizes(batch, image_embeds.device)
        packed = all_gather_with_grad(torch.cat(parts, dim=1), sizes=sizes)
        packed_masks = all_gather(torch.cat(masks, dim=1), sizes=sizes) if masks else None

        num_pos = positive_embeds.shape[1] if positive_embeds is not None else 0
        g_pos = g_pos_mask = g_neg = g_neg_mask = None
        if positive_embeds is not None:
            g_pos = packed[:, 2 : 2 + num_pos]
            g_pos_mask = packed_masks[:, :num_pos]
        if negative_embeds is not None:
            g_neg = packed[:, 2 + num_pos :]
            g_neg_mask = packed_masks[:, num_pos:]
        return cls(
            image_embeds,
            text_embeds,
            positive_embeds,
            positive_mask,
            negative_embeds,
            negative_mask,
            packed[:, 0],
            packed[:, 1],
            g_pos,
            g_pos_mask,
            g_neg,
            g_neg_mask,
            offset=sum(sizes[:rank]),
            world_scale=world_size,
        )

    def require(self, term: str, kind: str) -> None:
        """Raise naming `term` when this batch has no `kind` ("positive" or "negative") embeddings."""
        if getattr(self, f"{kind}s") is None:
            raise ValueError(f"{term} needs {kind}_embeds")

    @property
    def local_rows(self) -> torch.Tensor:
        """Global indices of this process's rows (the contrastive targets)."""
        return torch.arange(self.offset, self.offset + self.image.shape[0], device=self.image.device)

    def reduce(self, local_sum: torch.Tensor, global_count: torch.Tensor | int) -> torch.Tensor:
        """``world_scale * local_sum / global_count``; an exact 0 (still attached to the graph through
        ``local_sum``) when nothing in the global batch is valid."""
        if not torch.is_tensor(global_count):
            global_count = torch.tensor(global_count, device=local_sum.device)
        count = global_count.to(local_sum.dtype).clamp_min(1)
        return local_sum * self.world_scale / count


def _check_slots(
    kind: str, image_embeds: torch.Tensor, slots: Slots | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """`slots`' embeddings and boolean mask (all-valid when it has none), shapes checked against the images."""
    if slots is None:
        return None, None
    embeds, mask = slots
    batch, dim = image_embeds.shape
    if embeds.ndim != 3 or embeds.shape[0] != batch or embeds.shape[2] != dim:
        raise ValueError(f"{kind}_embeds must be [{batch}, slots, {dim}]; got {tuple(embeds.shape)}")
    if mask is None:
        return embeds, torch.ones(embeds.shape[:2], dtype=torch.bool, device=embeds.device)
    if mask.shape != embeds.shape[:2]:
        raise ValueError(f"{kind}_mask must be {tuple(embeds.shape[:2])}; got {tuple(mask.shape)}")
    return embeds, mask.to(device=embeds.device, dtype=torch.bool)
