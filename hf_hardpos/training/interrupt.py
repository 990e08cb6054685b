"""Ctrl-C during training: finish the current optimiser step, save a checkpoint, stop.

Why: a bare `KeyboardInterrupt` lands anywhere (inside a save, between a backward and its optimiser
step) and loses every step since the last checkpoint. Here the first SIGINT only sets a flag; at the end
of the current step every process agrees to stop (one small all-reduce per step under data parallelism,
so no process is left waiting in a collective), the Trainer writes a checkpoint of that step (atomically,
see `checkpointing`), and `HardPosTrainer.train` raises `TrainingInterrupted`, which the example script
turns into one line and exit status 130 (128 + SIGINT, the shell's convention). A second Ctrl-C aborts
at once, as usual.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import TrainerCallback

from .distributed import all_reduce_sum, world_info

logger = logging.getLogger(__name__)

__all__ = ["InterruptCallback", "TrainingInterrupted", "stop_on_interrupt"]

EXIT_CODE = 130  # 128 + SIGINT


class TrainingInterrupted(RuntimeError):
    """Training stopped on Ctrl-C after saving `checkpoint` (None if nothing could be saved) at `step`."""

    exit_code = EXIT_CODE

    def __init__(self, step: int, checkpoint: str | None):
        self.step = step
        self.checkpoint = checkpoint
        where = (
            f"saved step {step} in {checkpoint}; the same command again resumes from it"
            if checkpoint
            else f"stopped at step {step}, nothing saved"
        )
        super().__init__(f"interrupted (Ctrl-C): {where}")

    def __reduce__(self):
        """Pickled as its two arguments: raised in a forked demo worker, it travels back to the parent that way
        (the default pickles the message as the one argument, which `__init__` does not take)."""
        return type(self), (self.step, self.checkpoint)


class InterruptCallback(TrainerCallback):
    """Turns a requested stop into "save this step, then stop", on every process at the same step."""

    def __init__(self) -> None:
        self.requested = False  # set by the SIGINT handler of this process
        self.stopped = False  # every process agreed to stop at the end of a step

    def on_step_end(self, args, state, control, **kwargs):
        requested = self.requested
        _, world_size = world_info()
        if world_size > 1:  # a Ctrl-C reaches the processes at different moments: stop them together
            requested = bool(all_reduce_sum(torch.tensor([float(requested)], device=args.device)).item())
        if requested:
            self.stopped = True
            control.should_save = True
            control.should_training_stop = True
        return control


@contextmanager
def stop_on_interrupt(callback: InterruptCallback) -> Iterator[None]:
    """While inside, the first SIGINT asks `callback` to stop after the current step; the second aborts."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def handler(signum, frame):
        if callback.requested:
            raise KeyboardInterrupt
        callback.requested = True
        logger.warning(
            "Ctrl-C: saving a checkpoint after the current step, then stopping (Ctrl-C again aborts)."
        )

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
