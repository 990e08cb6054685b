"""Two CPU processes (gloo, DDP) must reproduce the single-process full-batch computation exactly:
loss terms (averaged over ranks), DDP-averaged parameter gradients, input gradients, CMR thresholds
(identical on both ranks) and the parameters after two optimiser steps.

The shards are deliberately uneven (4 rows and 3 rows) and the masks leave different numbers of valid
hard positives/negatives on each rank: the cases where naive per-rank means give the wrong gradient.
"""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from hf_hardpos.training.logit_scale import MAX_LOGIT_SCALE, clamp_logit_scale
from hf_hardpos.training.losses import HardPosObjective

SHARD_SIZES = (4, 3)
IMAGE_IN, TEXT_IN, DIM, P, K = 6, 5, 8, 2, 2
STEPS = 2
TERMS = ("loss", "loss_clip", "loss_hn", "loss_hp", "loss_imc", "loss_cmr")


class _Encoders(torch.nn.Module):
    """A two-tower stand-in for CLIP: one linear map per modality plus a learned logit scale."""

    def __init__(self):
        super().__init__()
        self.image = torch.nn.Linear(IMAGE_IN, DIM)
        self.text = torch.nn.Linear(TEXT_IN, DIM)
        # starts near CLIP's cap so the clamp after the step has something to do
        self.logit_scale = torch.nn.Parameter(torch.tensor(math.log(95.0), dtype=torch.float64))

    def forward(self, images, texts, positives, negatives):
        encode = lambda x: F.normalize(self.text(x), dim=-1)  # noqa: E731
        return F.normalize(self.image(images), dim=-1), encode(texts), encode(positives), encode(negatives)


def _model() -> _Encoders:
    torch.manual_seed(0)
    return _Encoders().double()


# The recipes' objectives (what HardPosTrainer.build_objective makes of examples/recipes/*.yaml), with the
# slot layout their collator feeds: svlc one drawn hard positive and negative per row, ce-clip four types.
LAYOUTS = {
    "mixed": (dict(hard_negative_weight=0.5, hard_positive_weight=1.0, imc_weight=0.2, cmr_weight=0.4,
                   negative_types=("replace", "swap")), P, K),
    "svlc": (dict(hard_negative_weight=1.0, hard_positive_weight=1.0, contrastive_hard_negatives=True,
                  negative_types=("hard_negative_replace", "hard_negative_swap")), 1, 1),
    "ce-clip": (dict(hard_negative_weight=0.0, hard_positive_weight=0.0, imc_weight=0.2, cmr_weight=0.4,
                     contrastive_hard_negatives=True, negative_types=("relation", "attribute", "action", "object")),
                0, 4),
    "ce-clip-released-imc": (dict(hard_negative_weight=0.0, hard_positive_weight=0.0, imc_weight=0.2, cmr_weight=0.4,
                                  contrastive_hard_negatives=True, imc_form="released_code",
                                  negative_types=("relation", "attribute", "action", "object")), 0, 4),
}  # fmt: skip


def _objective(layout: str = "mixed") -> HardPosObjective:
    return HardPosObjective(**LAYOUTS[layout][0]).double()


def _layout_data(layout: str, step: int) -> dict[str, torch.Tensor]:
    """`_data` cut to the layout's slots (a layout without hard positives gets one dummy slot, all masked)."""
    data = _data(step)
    _, num_pos, num_neg = LAYOUTS[layout]
    if layout == "mixed":
        return data
    mask_pos = (
        data["positive_mask"][:, :1] if num_pos else torch.zeros(len(data["images"]), 1, dtype=torch.bool)
    )
    g = torch.Generator().manual_seed(900 + step)
    negatives = torch.randn(len(data["images"]), num_neg, TEXT_IN, generator=g, dtype=torch.float64)
    negative_mask = torch.ones(len(data["images"]), num_neg, dtype=torch.bool)
    negative_mask[5] = False  # rank 1 has a row without any negative
    negative_mask[1, num_neg - 1] = negative_mask[4, 0] = False
    return dict(data, positives=data["positives"][:, :1], positive_mask=mask_pos, negatives=negatives,
                negative_mask=negative_mask)  # fmt: skip


def _data(step: int) -> dict[str, torch.Tensor]:
    """The full batch of one step (same on every process)."""
    # Seed picked so that step 0 leaves both CMR thresholds above 0 (they clamp to [0, u] as CE-CLIP's
    # do), so step 1 really uses step 0's state; the assertion after the run checks that it does.
    g = torch.Generator().manual_seed(400 + step)
    n = sum(SHARD_SIZES)
    data = {
        "images": torch.randn(n, IMAGE_IN, generator=g, dtype=torch.float64),
        "texts": torch.randn(n, TEXT_IN, generator=g, dtype=torch.float64),
        "positives": torch.randn(n, P, TEXT_IN, generator=g, dtype=torch.float64),
        "negatives": torch.randn(n, K, TEXT_IN, generator=g, dtype=torch.float64),
        # rank 0 (rows 0-3) misses little, rank 1 (rows 4-6) misses a lot
        "positive_mask": torch.tensor(
            [[1, 1], [1, 1], [1, 0], [1, 1], [0, 0], [1, 0], [0, 1]], dtype=torch.bool
        ),
        "negative_mask": torch.tensor(
            [[1, 1], [1, 1], [1, 1], [0, 1], [1, 0], [0, 0], [1, 0]], dtype=torch.bool
        ),
    }
    if step == 1:  # a second pattern, so the thresholds' "previous step" is a different batch
        data["negative_mask"] = data["negative_mask"].roll(1, dims=0)
    return data


def _run(model, objective, shard_of, layout: str = "mixed") -> dict:
    """STEPS SGD steps; records every term, the input and parameter gradients, and the CMR thresholds."""
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    record = {"terms": [], "input_grads": [], "param_grads": [], "thresholds": [], "logit_scale": []}
    terms = [t for t in TERMS if t in ("loss", "loss_clip") or t[len("loss_") :] in objective.terms]
    for step in range(STEPS):
        data = shard_of(_layout_data(layout, step))
        inputs = {k: data[k].clone().requires_grad_() for k in ("images", "texts", "positives", "negatives")}
        image, text, positive, negative = model(**inputs)
        out = objective(image, text, _unwrap(model).logit_scale.exp(), positive, data["positive_mask"], negative,
                        data["negative_mask"])  # fmt: skip
        optimiser.zero_grad()
        out["loss"].backward()
        record["terms"].append(torch.stack([out[t].detach() for t in terms]))
        record["input_grads"].append(
            {k: torch.zeros_like(v) if v.grad is None else v.grad.clone() for k, v in inputs.items()}
        )
        record["param_grads"].append({k: p.grad.clone() for k, p in _unwrap(model).named_parameters()})
        if "cmr" in objective.terms:
            record["thresholds"].append(objective.terms["cmr"].thresholds.clone())
        optimiser.step()
        before = _unwrap(model).logit_scale.item()
        clamp_logit_scale(model)
        record["logit_scale"].append((before, _unwrap(model).logit_scale.item()))
    record["params"] = {k: p.detach().clone() for k, p in _unwrap(model).named_parameters()}
    return record


def _unwrap(model) -> _Encoders:
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def _worker(rank: int, world_size: int, init_file: str, out_dir: str, layout: str = "mixed") -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        start = sum(SHARD_SIZES[:rank])
        rows = slice(start, start + SHARD_SIZES[rank])
        model = torch.nn.parallel.DistributedDataParallel(_model())
        record = _run(model, _objective(layout), lambda data: {k: v[rows] for k, v in data.items()}, layout)
        # the mean over ranks of each term is the global value
        for terms in record["terms"]:
            dist.all_reduce(terms)
            terms /= world_size
        torch.save(record, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_process_gather_equals_single_process_full_batch(tmp_path):
    world_size = len(SHARD_SIZES)
    mp.spawn(_worker, args=(world_size, str(tmp_path / "init"), str(tmp_path)), nprocs=world_size, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world_size)]
    single = _run(_model(), _objective(), lambda data: data)

    for step in range(STEPS):
        for rank, record in enumerate(ranks):
            torch.testing.assert_close(record["terms"][step], single["terms"][step], msg=f"terms step {step}")
            # DDP has averaged the gradients: they must be the full-batch gradients
            for name, grad in single["param_grads"][step].items():
                torch.testing.assert_close(record["param_grads"][step][name], grad, msg=f"{name} step {step}")
            # each rank's input gradient is world_size x its rows' share of the full-batch gradient
            start = sum(SHARD_SIZES[:rank])
            for name, grad in single["input_grads"][step].items():
                local = record["input_grads"][step][name] / world_size
                torch.testing.assert_close(
                    local, grad[start : start + SHARD_SIZES[rank]], msg=f"{name} step {step}"
                )
            torch.testing.assert_close(record["thresholds"][step], single["thresholds"][step])
    # the thresholds moved away from their initial 0 and are identical on both ranks
    assert torch.all(single["thresholds"][0] != 0)
    assert torch.equal(ranks[0]["thresholds"][-1], ranks[1]["thresholds"][-1])
    for rank, record in enumerate(ranks):
        for name, value in single["params"].items():
            torch.testing.assert_close(
                record["params"][name], value, msg=f"rank {rank} {name} after training"
            )
    # clamp_logit_scale reached through DDP: the first step took the scale out of [0, ln 100] (this
    # random model lowers it) and the clamp put it back, on every rank as in the single process
    before, after = single["logit_scale"][0]
    assert not 0.0 <= before <= MAX_LOGIT_SCALE
    assert after == min(max(before, 0.0), MAX_LOGIT_SCALE)
    for record in ranks:
        torch.testing.assert_close(torch.tensor(record["logit_scale"]), torch.tensor(single["logit_scale"]))


def _nan_worker(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    from hf_hardpos.training.loss_guard import NonFiniteLossError, check_finite_loss

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        bad = float("nan") if rank == 1 else 0.5  # only rank 1 sees a broken hard-negative term
        terms = {
            "loss": torch.tensor(1.0 + bad),
            "loss_clip": torch.tensor(1.0),
            "loss_hn": torch.tensor(bad),
        }
        check_finite_loss(
            {k: torch.tensor(1.0) for k in terms}, step=6, logit_scale=torch.tensor(50.0)
        )  # all fine
        try:
            check_finite_loss(terms, step=7, logit_scale=torch.tensor(50.0))
            message = "no error"
        except NonFiniteLossError as error:
            message = str(error)
        # Both ranks reach this collective: neither is left waiting for the other.
        dist.barrier()
        with open(os.path.join(out_dir, f"nan{rank}.txt"), "w") as handle:
            handle.write(message)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_non_finite_loss_on_one_rank_stops_every_rank(tmp_path):
    mp.spawn(_nan_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        message = (tmp_path / f"nan{rank}.txt").read_text()
        assert message.startswith("non-finite loss term loss_hn at step 7 ("), message
        assert f"non-finite on process(es) [1] of 2, this is process {rank}" in message
    assert "loss_hn=nan" in (tmp_path / "nan1.txt").read_text()
    assert "loss_hn=0.5" in (tmp_path / "nan0.txt").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["svlc", "ce-clip", "ce-clip-released-imc"])
def test_recipe_objectives_on_two_processes_equal_the_full_batch(tmp_path, layout):
    """The svlc and ce-clip recipes' objectives (gathered global batch) on two uneven shards: every term, the
    DDP-averaged gradients and the CMR thresholds (several steps) equal one process on the full batch."""
    world_size = len(SHARD_SIZES)
    mp.spawn(
        _worker,
        args=(world_size, str(tmp_path / "init"), str(tmp_path), layout),
        nprocs=world_size,
        join=True,
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world_size)]
    single = _run(_model(), _objective(layout), lambda data: data, layout)
    for step in range(STEPS):
        for _rank, record in enumerate(ranks):
            torch.testing.assert_close(record["terms"][step], single["terms"][step], msg=f"terms step {step}")
            for name, grad in single["param_grads"][step].items():
                torch.testing.assert_close(record["param_grads"][step][name], grad, msg=f"{name} step {step}")
            if single["thresholds"]:
                torch.testing.assert_close(record["thresholds"][step], single["thresholds"][step])
    if single["thresholds"]:
        assert torch.any(single["thresholds"][0] > 0)  # step 1 really used step 0's thresholds
    for record in ranks:
        for name, value in single["params"].items():
            torch.testing.assert_close(record["params"][name], value, msg=f"{name} after training")
