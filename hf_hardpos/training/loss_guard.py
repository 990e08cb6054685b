"""Stop training on a NaN or infinite loss, on every process at once, naming the term that broke.

Why: the stock Trainer silently replaces a non-finite logged loss by the running mean
(`logging_nan_inf_filter`) and keeps stepping on corrupted gradients. Under data parallelism a rank
that raised alone would leave the others blocked in the next collective until a timeout, so the
finiteness flags of every rank are all-reduced each step (one small collective) and all ranks raise
together with the same message.
"""

from __future__ import annotations

from typing import Any

import torch

from .distributed import all_reduce_sum, world_info

__all__ = ["NonFiniteLossError", "check_finite_loss"]


class NonFiniteLossError(FloatingPointError):
    """A loss term became NaN or infinite on some process; the message names the term and the step."""


def check_finite_loss(terms: dict[str, Any], *, step: int, logit_scale: torch.Tensor) -> None:
    """Raise `NonFiniteLossError` on every process if any process's loss terms are not finite.

    Args:
        terms: the objective's output; every tensor under a `loss*` key is checked.
        step: the optimiser step this loss belongs to, as the Trainer logs it (its `global_step` + 1).
        logit_scale: the exp'd scale, quoted in the message (a runaway temperature is a usual cause).
    """
    names = [k for k, v in terms.items() if k.startswith("loss") and torch.is_tensor(v)]
    values = torch.stack([terms[k].detach().float() for k in names])
    rank, world_size = world_info()
    flags = torch.zeros(world_size, len(names), device=values.device)
    flags[rank] = (~torch.isfinite(values)).float()
    flags = all_reduce_sum(flags)  # [process, term]: 1 where that process saw a non-finite value
    if not bool(flags.any()):  # one device sync per step; names are worked out only on failure
        return
    bad_terms = [k for k, flagged in zip(names, flags.any(dim=0).tolist()) if flagged]
    named = [k for k in bad_terms if k != "loss"] or ["loss"]
    here = ", ".join(f"{k}={float(v)}" for k, v in zip(names, values.tolist()) if k in named)
    where = ""
    if world_size > 1:
        ranks = [r for r, row in enumerate(flags.any(dim=1).tolist()) if row]
        where = f"; non-finite on process(es) {ranks} of {world_size}, this is process {rank}"
    raise NonFiniteLossError(
        f"non-finite loss term {', '.join(named)} at step {step} ({here}; logit scale "
        f"{float(logit_scale.detach()):.4g}{where}). Training stopped on every process rather than continue "
        "on a corrupted loss: lower the learning rate or the weight of that term, or check this batch's data."
    )
