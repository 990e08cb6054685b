"""Cost of the full HP+HN+IMC+CMR objective over plain CLIP contrastive, on a ViT-B/32-shaped CLIP.

Both arms run the same model (``CLIPConfig()`` defaults: ViT-B/32 vision tower, 12-layer text tower,
random weights) on the same batch of B images and 3B texts (caption, hard positive, hard negative), so
the encoders do identical work and the measured difference is the loss math only:

* ``plain``: CLIP's symmetric contrastive loss, the 2B extra texts as extra image->text columns;
* ``full``:  ``HardPosObjective(hard_negative_weight=1, hard_positive_weight=1, imc_weight=0.2, cmr_weight=0.4)``.

A step is forward + backward + optimiser step + logit-scale clamp. Steps of the two arms are interleaved
(order alternating) after one warm-up each, and the median is reported, which keeps drift in machine load
out of the ratio. On CPU the ratio uses process CPU time by default (with ``--threads 1`` that is the
step's own work, immune to other processes sharing the cores); wall time is printed too. The loss math
alone (forward + backward on fixed embeddings, same clock) is also timed: the direct view of the overhead.

Peak memory: each configuration runs in a fresh subprocess and reports its ``ru_maxrss`` (CPU) or
``torch.cuda.max_memory_allocated`` (GPU), with and without ``model.gradient_checkpointing_enable()``.

    python benchmarks/train_step.py [--batch-size 8] [--repeats 5] [--threads 1] [--device cpu]

The headline is the loss's own cost: ``loss_ms_per_step`` and ``loss_share_of_step`` (its share of a
full step); the step ratio (full / plain, with each arm's spread) is printed as a secondary figure. All
figures go to ``benchmarks/results.json`` (``benchmarks/results.py``).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from results import on_device, record  # benchmarks/results.py: one results file for every benchmark

from hf_hardpos.training.logit_scale import clamp_logit_scale
from hf_hardpos.training.losses import ContrastiveLoss, EmbeddingBatch, HardPosObjective, Slots


def build_model(device: str, gradient_checkpointing: bool):
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(0)
    model = CLIPModel(CLIPConfig()).to(device).train()
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model


def build_batch(model, batch_size: int, text_length: int, device: str) -> dict[str, torch.Tensor]:
    """Random pixels and token ids; every text ends with EOS so CLIP pools at the last position."""
    g = torch.Generator().manual_seed(1)
    vision, text = model.config.vision_config, model.config.text_config
    pixels = torch.randn(batch_size, 3, vision.image_size, vision.image_size, generator=g)
    ids = torch.randint(1, text.eos_token_id - 1, (3 * batch_size, text_length), generator=g)
    ids[:, 0] = text.bos_token_id
    ids[:, -1] = text.eos_token_id
    return {"pixel_values": pixels.to(device), "input_ids": ids.to(device)}


def make_losses():
    plain = ContrastiveLoss(use_hard_negatives=True)
    full = HardPosObjective(
        hard_negative_weight=1.0, hard_positive_weight=1.0, imc_weight=0.2, cmr_weight=0.4
    )

    def plain_loss(image, text, positive, negative, scale):
        extra = torch.stack([positive, negative], dim=1)  # the same 3B texts, as plain contrastive columns
        return plain(EmbeddingBatch.build(image, text, negatives=Slots(extra)), scale)

    def full_loss(image, text, positive, negative, scale):
        return full(image, text, scale, positive[:, None], None, negative[:, None], None)["loss"]

    return {"plain": plain_loss, "full": full_loss}


def train_step(model, optimiser, batch, loss_fn) -> None:
    optimiser.zero_grad(set_to_none=True)
    image = F.normalize(model.get_image_features(pixel_values=batch["pixel_values"]).pooler_output, dim=-1)
    texts = F.normalize(model.get_text_features(input_ids=batch["input_ids"]).pooler_output, dim=-1)
    text, positive, negative = texts.chunk(3)
    loss = loss_fn(image, text, positive, negative, model.logit_scale.exp())
    loss.backward()
    optimiser.step()
    clamp_logit_scale(model)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(args) -> dict[str, dict[str, list[float]]]:
    """Per arm, the wall-clock and process-CPU seconds of each timed step."""
    model = build_model(args.device, gradient_checkpointing=False)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-6)
    batch = build_batch(model, args.batch_size, args.text_length, args.device)
    losses = make_losses()
    for loss_fn in losses.values():  # warm-up (allocator, AdamW state)
        train_step(model, optimiser, batch, loss_fn)
    times = {name: {"wall": [], "cpu": []} for name in losses}
    for repeat in range(args.repeats):
        order = list(losses) if repeat % 2 == 0 else list(losses)[::-1]
        for name in order:
            _sync(args.device)
            wall, cpu = time.perf_counter(), time.process_time()
            train_step(model, optimiser, batch, losses[name])
            _sync(args.device)
            times[name]["wall"].append(time.perf_counter() - wall)
            times[name]["cpu"].append(time.process_time() - cpu)
    return times


def time_loss_math(args, clock, iterations: int = 50) -> dict[str, float]:
    """Median seconds of loss forward + backward on fixed [B, 512] embeddings (no encoder), interleaved."""
    g = torch.Generator().manual_seed(2)
    feats = [
        F.normalize(torch.randn(args.batch_size, 512, generator=g), dim=-1).to(args.device) for _ in range(4)
    ]
    scale = torch.tensor(100.0, device=args.device)
    losses = make_losses()
    samples: dict[str, list[float]] = {name: [] for name in losses}
    for iteration in range(iterations + 5):
        for name, loss_fn in losses.items():
            leaves = [f.clone().requires_grad_() for f in feats]
            _sync(args.device)
            start = clock()
            loss_fn(*leaves, scale).backward()
            _sync(args.device)
            if iteration >= 5:  # the first few are warm-up
                samples[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def memory_probe(args) -> None:
    """Run in a fresh process: two full-objective steps; print peak memory as JSON."""
    model = build_model(args.device, gradient_checkpointing=args.gradient_checkpointing)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-6)
    batch = build_batch(model, args.batch_size, args.text_length, args.device)
    full = make_losses()["full"]
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _current_rss_bytes()
    for _ in range(2):
        train_step(model, optimiser, batch, full)
    if args.device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    print(json.dumps({"peak_bytes": peak, "before_steps_bytes": base}))


def _current_rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def run_memory_probe(args, gradient_checkpointing: bool) -> dict[str, int]:
    command = [
        sys.executable, __file__, "--memory-probe", "--device", args.device,
        "--batch-size", str(args.batch_size), "--text-length", str(args.text_length),
    ]  # fmt: skip
    if args.threads:
        command += ["--threads", str(args.threads)]
    if gradient_checkpointing:
        command.append("--gradient-checkpointing")
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--text-length", type=int, default=16, help="tokens per text, BOS and EOS included")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per arm (after one warm-up each)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default=None,
        help="clock for loss_overhead: default process CPU time on CPU (wall time on a shared machine mostly "
        "measures the neighbours; use --threads 1 so CPU time is the step's own work), wall time on GPU",
    )  # fmt: skip
    parser.add_argument("--skip-memory", action="store_true", help="skip the two peak-memory subprocesses")
    parser.add_argument("--memory-probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gradient-checkpointing", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_probe:
        memory_probe(args)
        return

    mib = 1024**2
    print(f"device={args.device} torch_threads={torch.get_num_threads()} batch_size={args.batch_size} "
          f"texts_per_step={3 * args.batch_size} text_length={args.text_length} repeats={args.repeats}")  # fmt: skip
    peaks: dict[bool, int] = {}
    if not args.skip_memory:
        kind = "cuda_max_allocated" if args.device.startswith("cuda") else "max_rss"
        for checkpointing in (False, True):
            probe = run_memory_probe(args, checkpointing)
            peaks[checkpointing] = probe["peak_bytes"]
            print(f"peak_memory_{kind}_mib gradient_checkpointing={checkpointing}: {probe['peak_bytes'] / mib:.0f} "
                  f"(before first step {probe['before_steps_bytes'] / mib:.0f}, "
                  f"step peak above that {(probe['peak_bytes'] - probe['before_steps_bytes']) / mib:.0f})")  # fmt: skip
    clock = args.clock or ("wall" if args.device.startswith("cuda") else "cpu")
    loss_math = time_loss_math(args, time.process_time if clock == "cpu" else time.perf_counter)
    print(f"loss_math_{clock}_ms plain={loss_math['plain'] * 1e3:.3f} full={loss_math['full'] * 1e3:.3f}")
    times = time_steps(args)
    for kind in ("wall", "cpu"):
        for name in ("plain", "full"):
            print(f"step_{kind}_s {name}=" + ",".join(f"{t:.3f}" for t in times[name][kind]))
    median = {
        (name, kind): statistics.median(times[name][kind]) for name in times for kind in ("wall", "cpu")
    }
    for kind in ("wall", "cpu"):
        print(f"median_step_{kind}_s plain_contrastive={median['plain', kind]:.3f} "
              f"full_objective={median['full', kind]:.3f}")  # fmt: skip
    share = loss_math["full"] / median["full", clock]
    spread = {name: (min(times[name][clock]), max(times[name][clock])) for name in times}
    print(
        f"step_ratio_{clock} full/plain={median['full', clock] / median['plain', clock]:.3f} "
        f"(plain {spread['plain'][0]:.2f}-{spread['plain'][1]:.2f} s, full {spread['full'][0]:.2f}-{spread['full'][1]:.2f} s)"
    )
    # The headline: what the loss itself costs per step, and its share of a step. The step ratio above is
    # secondary: at this size the loss is far below the steps' run-to-run spread, so the ratio is noise.
    print(
        f"loss_ms_per_step full={loss_math['full'] * 1e3:.2f} plain={loss_math['plain'] * 1e3:.2f} ({clock} time)"
    )
    print(f"loss_share_of_step={share:.5f}")
    figures = {
        "loss_ms_full": f"{loss_math['full'] * 1e3:.2f}", "loss_ms_plain": f"{loss_math['plain'] * 1e3:.2f}",
        "loss_share_percent": f"{100 * share:.3f}", "clock": clock, "batch_size": str(args.batch_size),
        "median_step_plain_s": f"{median['plain', clock]:.2f}", "median_step_full_s": f"{median['full', clock]:.2f}",
        "step_spread_plain_s": f"{spread['plain'][0]:.2f}-{spread['plain'][1]:.2f}",
        "step_spread_full_s": f"{spread['full'][0]:.2f}-{spread['full'][1]:.2f}",
    }  # fmt: skip
    if peaks:
        figures.update(
            {f"peak_mib_{'checkpointing' if c else 'plain'}": f"{peaks[c] / mib:,.0f}" for c in peaks}
        )
    record(on_device("train_step", torch.device(args.device).type), figures)


if __name__ == "__main__":
    main()
