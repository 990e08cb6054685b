"""Merging the unmerged LoRA of TSVLC / DAC checkpoints (SVLC, DAC rows; docs/checkpoints.md, TSVLC / DAC LoRA).

TSVLC's forked open_clip vendors Microsoft's loralib and saves the model with LoRA *unmerged*
(the merge flag is not saved), with r = 4 and lora_alpha = 1: the weight the model computed with
is W + (alpha / r) · B @ A. The scaling is a Python attribute, not stored, so rank and alpha are
inputs; the rank is also checked against the tensors' shapes. After merging, every `lora_*` key
is dropped and the state dict is a plain open_clip one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UserInputError

TSVLC_RANK = 4
TSVLC_ALPHA = 1.0


@dataclass(frozen=True)
class LoraMerge:
    """What was merged, for the model card."""

    rank: int
    alpha: float
    merged_weights: int  # how many weight matrices received a B @ A update

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


def has_lora(state: dict[str, torch.Tensor]) -> bool:
    return any("lora_" in key for key in state)


def _base_weight_key(key_a: str) -> str:
    """`...attn.in_proj_weight_lora_A` -> `...attn.in_proj_weight`; `....c_fc.lora_A` -> `....c_fc.weight`."""
    if key_a.endswith("_lora_A"):
        return key_a[: -len("_lora_A")]
    return key_a[: -len("lora_A")] + "weight"


def merge_tsvlc_lora(
    state: dict[str, torch.Tensor],
    rank: int = TSVLC_RANK,
    alpha: float = TSVLC_ALPHA,
    where: str = "checkpoint",
) -> tuple[dict[str, torch.Tensor], LoraMerge]:
    """Return the state dict with every LoRA pair merged into its weight, and a summary.

    Raises `UserInputError` naming the key for a B without A (or the reverse), a LoRA pair whose
    base weight is missing, a rank other than `rank`, or shapes that do not multiply to the weight.
    """
    if rank <= 0:
        raise UserInputError(f"--lora-rank must be positive, got {rank}")
    lora_keys = [k for k in state if "lora_" in k]
    a_keys = [k for k in lora_keys if k.endswith("lora_A")]
    stray = [k for k in lora_keys if not k.endswith(("lora_A", "lora_B"))]
    if stray:
        raise UserInputError(
            f"{where}: unknown LoRA entries {stray[:5]} (expected only *lora_A / *lora_B pairs)"
        )
    orphans = [k for k in lora_keys if k.endswith("lora_B") and k[:-1] + "A" not in state]
    orphans += [k for k in a_keys if k[:-1] + "B" not in state]
    if orphans:
        raise UserInputError(f"{where}: LoRA keys without their A/B partner: {orphans[:5]}")
    merged = {k: v for k, v in state.items() if "lora_" not in k}
    scaling = alpha / rank
    for key_a in a_keys:
        key_b = key_a[:-1] + "B"
        weight_key = _base_weight_key(key_a)
        if weight_key not in merged:
            raise UserInputError(f"{where}: LoRA pair {key_a} has no base weight {weight_key}")
        lora_a, lora_b, weight = state[key_a].float(), state[key_b].float(), merged[weight_key]
        # loralib's Conv2d stacks the rank k times (A: (r*k, Cin*k), B: (Cout*k, r*k)); Linear: k = 1.
        k = weight.shape[-1] if weight.dim() == 4 else 1
        if lora_a.dim() != 2 or lora_b.dim() != 2 or lora_a.shape[0] != rank * k:
            raise UserInputError(
                f"{where}: {key_a} has shape {list(lora_a.shape)}; with --lora-rank {rank} expected {rank * k} rows"
                + (f" (the file looks like rank {lora_a.shape[0] // k})" if lora_a.dim() == 2 else "")
            )
        out_rows, in_cols = (
            weight.shape[0] * k,
            (weight.shape[1] * k if weight.dim() == 4 else weight.shape[1]),
        )
        if tuple(lora_b.shape) != (out_rows, lora_a.shape[0]) or lora_a.shape[1] != in_cols:
            raise UserInputError(
                f"{where}: LoRA shapes {key_b} {list(lora_b.shape)} @ {key_a} {list(lora_a.shape)} do not give "
                f"{weight_key} {list(weight.shape)}"
            )
        merged[weight_key] = weight + (lora_b @ lora_a).view(weight.shape) * scaling
    return merged, LoraMerge(rank=rank, alpha=float(alpha), merged_weights=len(a_keys))
