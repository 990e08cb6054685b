"""Independent runs (the demo's fine-tunes) in forked worker processes, their log lines printed by the parent;
and work done in a forked process while the parent goes on (`background`: the demo's data, during pretraining).

Why: each fine-tune of the tiny CLIP is bound to one core (its matrices are so small that a second torch
thread costs more than it gives), and the runs do not depend on one another. On 2 CPU cores, two at a
time finish the demo's six fine-tunes in little more than half the time of one after another, with the
same numbers: each run seeds everything it draws (`HardPosTrainer` seeds torch, numpy and Python from its
`seed`) and runs one torch thread wherever it runs.

How: `concurrent.futures.ProcessPoolExecutor` with the "fork" start method. Forked workers inherit the
parent's imports and its in-memory data (nothing is re-imported or pickled on the way in), and they are
not daemons, so each may still start its trainer's dataloader worker. A worker's log lines travel back
through a pipe and the parent prints them as they arrive, so a log read off a terminal shows every run's
progress, in the parent's order of arrival.

Where fork is not safe the runs go one after another in this process (`worker_count` says 1): off Linux
(macOS system libraries do not survive a fork), with more than one torch thread per run (an OpenMP team
does not survive a fork either), and wherever an accelerator is present (a CUDA context cannot be forked;
there a fine-tune takes seconds anyway).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

Task = TypeVar("Task")
Log = Callable[[str], None]
# A run: `function(task, log)`, `log` printing a line in the parent.
Run = Callable[[Any, Log], Any]

# How often the parent looks for log lines while runs are going (seconds).
_POLL_SECONDS = 0.2

# Set in each worker by `_start_worker` (fork: inherited, never pickled).
_worker_run: Run | None = None
_worker_lines: Any = None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and `taskset` narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def accelerator_present() -> bool:
    """Whether torch sees a GPU or another accelerator, on which the trainer would place the model."""
    import torch

    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None:
        return bool(accelerator.is_available())
    return torch.cuda.is_available() or torch.backends.mps.is_available()


def worker_count(requested: int | None, runs: int, torch_threads: int) -> int:
    """How many runs go at a time: `requested` (None: one per usable core), at most `runs`, and 1 wherever
    forking is unsafe (see the module docstring)."""
    if requested is not None and requested < 1:
        raise ValueError(f"the number of worker processes must be at least 1, got {requested}")
    wanted = usable_cores() if requested is None else requested
    if (
        wanted <= 1
        or runs <= 1
        or torch_threads != 1
        or not sys.platform.startswith("linux")
        or "fork" not in multiprocessing.get_all_start_methods()
        or accelerator_present()
    ):
        return 1
    return min(wanted, runs)


def run_all(run: Run, tasks: Sequence[Task], workers: int, log: Log) -> Iterator[tuple[Task, Any]]:
    """`run(task, log)` for every task; yields (task, result) as each run ends.

    `workers` == 1: here, in order, `log` passed through. Otherwise in that many forked processes, tasks
    started in the given order (put the longest first); each worker's `log` lines are printed by `log`
    here. A run's exception is raised here, after the runs already going have ended (a worker is never
    killed in the middle of writing a model).
    """
    if workers <= 1:
        for task in tasks:
            yield task, run(task, log)
        return
    context = multiprocessing.get_context("fork")
    lines = context.SimpleQueue()  # a put is written before the run returns, so no line is lost at the end
    initargs = (run, lines, os.getpid())
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=initargs
    ) as pool:
        pending: dict[Future, Task] = {pool.submit(_run_task, task): task for task in tasks}
        try:
            while pending:
                done, _ = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                _print_lines(lines, log)
                for future in done:
                    task = pending.pop(future)
                    yield task, _result(future)
        finally:
            for future in pending:
                future.cancel()  # runs not yet started; the ones going end before the pool shuts down
            _print_lines(lines, log)


@contextlib.contextmanager
def background(forked: bool) -> Iterator[Callable[..., Future]]:
    """`submit(function, *args, **kwargs)` -> a `Future` of its result.

    `forked`: computed in one forked process, in submission order, while this one goes on (the result comes
    back pickled); otherwise computed here and now (a finished future). Leaving the block waits for the
    submitted work. Why: on 2 cores the demo's pretraining leaves part of the second core idle (its data
    worker needs less than half of it), and the sets the fine-tunes need can be built there.
    """
    if not forked:
        yield _here
        return
    with ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("fork"),
        initializer=end_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        yield lambda function, *args, **kwargs: _Checked(pool.submit(function, *args, **kwargs))


class _Checked:
    """A background `Future` whose `result()` turns a killed worker into one line (`_result`)."""

    def __init__(self, future: Future) -> None:
        self.future = future

    def result(self, timeout: float | None = None) -> Any:
        return _result(self.future, timeout)


def _result(future: Future, timeout: float | None = None) -> Any:
    """`future.result()`; a worker that died (killed, out of memory) is one line, not BrokenProcessPool's traceback."""
    from concurrent.futures.process import BrokenProcessPool

    from ..errors import UserInputError

    try:
        return future.result(timeout)
    except BrokenProcessPool:
        raise UserInputError(
            "a forked worker process ended abruptly (killed, or out of memory); nothing it was "
            "running was kept: run again (with --processes 1 to run in this process)"
        ) from None


def end_with_parent(parent: int) -> None:
    """Make this forked worker die with `parent`: a parent killed with -9 can tell no one, and its workers
    would wait on their pipes for ever (each holding a model). Linux: the kernel sends SIGKILL when the
    parent dies (`prctl(PR_SET_PDEATHSIG)`); a parent already gone before that ends the worker at once."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _here(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    future: Future = Future()
    future.set_result(function(*args, **kwargs))
    return future


def _print_lines(lines: Any, log: Log) -> None:
    while not lines.empty():
        log(lines.get())


def _start_worker(run: Run, lines: Any, parent: int) -> None:
    global _worker_run, _worker_lines
    end_with_parent(parent)
    _worker_run, _worker_lines = run, lines


def _run_task(task: Any) -> Any:
    assert _worker_run is not None, "_run_task runs only in a worker started by run_all"
    return _worker_run(task, _worker_lines.put)


__all__ = ["accelerator_present", "background", "run_all", "usable_cores", "worker_count"]
