"""Process settings the demo's stages share: a fixed torch thread count and quiet libraries.

Why a module of their own: the experiment (`demo`) and the report pages it writes (`run_report`) both
run under them, and neither may import the other.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run with `count` intra-op torch threads, restoring the caller's setting afterwards."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence library chatter (PIL image-processor fallback, weight-loading bars) for a readable log."""
    import transformers

    previous = transformers.logging.get_verbosity()
    datasets_logger = logging.getLogger("datasets")
    previous_datasets = datasets_logger.level
    bars_were_on = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # "Loading weights", "Writing model shards"
    datasets_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        transformers.logging.set_verbosity(previous)
        if bars_were_on:
            transformers.utils.logging.enable_progress_bar()
        datasets_logger.setLevel(previous_datasets)
