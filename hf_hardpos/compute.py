"""Where and how a scorer computes: the device, the image-decoding workers a process may use, and the numeric
precision (autocast dtype, float16 weights, TF32 on CUDA).

Why its own module: these are the machine's settings, chosen once per run and recorded with every result;
the scorer (`scoring.ITMScorer`), the runner's settings, `hardpos eval`'s device check and the trainer's
default DataLoader workers all read them, and none of them needs the scorer.
"""

from __future__ import annotations

import contextlib
import os

import torch

# At most this many image workers by default: past it, decoding outruns any one model's forward passes.
MAX_DEFAULT_WORKERS = 16


def default_num_workers() -> int:
    """Image-decoding DataLoader workers when none are asked for: the CPU cores this process may use
    (its affinity mask, as a container or `taskset` sets it), shared with the other processes a launcher
    started on this machine (`LOCAL_WORLD_SIZE`, set by torchrun and accelerate), at most
    `MAX_DEFAULT_WORKERS`.

    Why not 0: decoding and preprocessing a 500x375 JPEG costs about 4.7 ms, a ViT-B/32 forward pass
    on an H100 about 0.5 ms per image, so decoding in the main process leaves the device idle most of
    the time; with workers it overlaps the forward passes. Scores do not depend on the number.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return max(1, min(cores // processes, MAX_DEFAULT_WORKERS))


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The requested device, else CUDA, else Apple MPS, else CPU; a requested device that is not there
    is refused with one line (torch would fail later, mid-run, with an assertion)."""
    if device is not None:
        from .errors import UserInputError

        try:
            chosen = torch.device(device)
        except RuntimeError as err:
            raise UserInputError(
                f"--device {device!r} is not a device torch knows (cpu, cuda, cuda:1, mps)"
            ) from err
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise UserInputError(
                f"--device {device}: CUDA is not available here (torch {torch.__version__}); use --device cpu"
            )
        if chosen.type == "cuda" and chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise UserInputError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
        if chosen.type == "mps" and not (
            getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
        ):
            raise UserInputError(f"--device {device}: Apple MPS is not available here; use --device cpu")
        return chosen
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# Precision name -> autocast dtype. "fp16-weights" casts the weights themselves to float16 (no autocast),
# as OpenAI's `clip.load` keeps them on CUDA: what `--protocol paper` uses for OpenAI checkpoints.
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp16-weights": None}


@contextlib.contextmanager
def cuda_tf32(allow: bool):
    """CUDA matmuls and cuDNN convolutions in TF32 or full fp32, as asked, for the block; restored after.

    Uses torch's `fp32_precision` settings where they exist (torch >= 2.9): reading the legacy
    `allow_tf32` flags after anything set the new ones raises. Only called on CUDA: TF32 means
    nothing elsewhere, and CPU runs leave the process's settings untouched.
    """
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision") and hasattr(getattr(conv, "conv", None), "fp32_precision"):
        saved = (matmul.fp32_precision, conv.conv.fp32_precision)
        matmul.fp32_precision = conv.conv.fp32_precision = "tf32" if allow else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision, conv.conv.fp32_precision = saved
        return
    saved = (matmul.allow_tf32, conv.allow_tf32)
    matmul.allow_tf32 = conv.allow_tf32 = allow
    try:
        yield
    finally:
        matmul.allow_tf32, conv.allow_tf32 = saved
