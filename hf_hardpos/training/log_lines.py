"""Training progress that reads well in a log file: one line per interval, metrics as JSON numbers.

Why: the Trainer's `ProgressCallback` redraws one tqdm bar with carriage returns and prints every log
dict with its floats formatted as strings (`{'loss': '1.234'}`), and `PrinterCallback` (with
`--disable_tqdm`) prints the same strings. Redirected to a file (a batch job, `accelerate launch ... >
log`) that is one enormous line of redraws and numbers no tool can read back. `LogLinesCallback` keeps
the bar on a terminal and, off one (or with `disable_tqdm`), prints a progress line at most every
`hf_hardpos.progress.LOG_INTERVAL_SECONDS` (and at the last step) instead; in both cases each training
log entry is one line of JSON whose values are numbers, and each evaluation a short table (`metrics_table`). `use_log_lines(trainer)` swaps it in.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from transformers import PrinterCallback, ProgressCallback

from ..progress import LOG_INTERVAL_SECONDS

__all__ = ["LogLinesCallback", "format_metrics", "metrics_table", "use_log_lines"]


def _number(value: Any) -> Any:
    """Floats to 6 significant digits (still numbers), other values as they are."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.6g}")
    return value


def format_metrics(metrics: Mapping[str, Any]) -> str:
    """One line of JSON, numbers kept numbers (`total_flos`, a Trainer-internal count, left out)."""
    return json.dumps({key: _number(value) for key, value in metrics.items() if key != "total_flos"})


# The Trainer's timing entries of an evaluation: one "(N s)" at the end of its table rather than three cells.
_EVAL_TIMING = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")


def metrics_table(logs: Mapping[str, Any], width: int = 100) -> list[str]:
    """An evaluation's metrics as `name=value` cells (the "eval_" prefix dropped, 4 significant digits), as
    many aligned cells per line as fit in `width` characters: a few short lines a person reads, where one
    JSON line ran to ~1,500 characters (its values are in trainer_state.json either way)."""
    cells = [f"{key[len('eval_'):] if key.startswith('eval_') else key}={_number4(value)}"
             for key, value in logs.items() if key not in _EVAL_TIMING and key not in ("epoch", "step")]  # fmt: skip
    cell_width = max(map(len, cells), default=0) + 2
    per_line = max(1, (width - 2) // cell_width)
    lines = ["  " + "".join(cell.ljust(cell_width) for cell in cells[i : i + per_line]).rstrip()
             for i in range(0, len(cells), per_line)]  # fmt: skip
    if "eval_runtime" in logs:
        lines.append(f"  ({logs['eval_runtime']:.1f} s)")
    return lines


def _number4(value: Any) -> Any:
    return f"{value:.4g}" if isinstance(value, float) else value


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


class LogLinesCallback(ProgressCallback):
    """The Trainer's progress bar on a terminal; off a terminal (or with `disable_tqdm`), a line per
    interval. Log entries are JSON lines either way. Only the main process prints."""

    def __init__(self, interval: float = LOG_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.bars = False
        self.started = self.last_line = 0.0
        self.first_step = 0

    def _print(self, text: str) -> None:
        line = f"[train {_duration(self.clock() - self.started)}] {text}"
        if self.training_bar is not None:
            self.training_bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def on_train_begin(self, args, state, control, **kwargs):
        self.bars = not args.disable_tqdm and sys.stderr.isatty()
        self.started = self.last_line = self.clock()
        self.first_step = state.global_step  # > 0 after a resume: the ETA counts only the steps done since
        if self.bars:
            return super().on_train_begin(args, state, control, **kwargs)
        self.current_step = 0
        if state.is_world_process_zero:
            epochs = (
                getattr(state, "num_train_epochs", 0) or args.num_train_epochs
            )  # as the Trainer computed it
            self._print(
                f"{state.max_steps} steps ({epochs:g} epochs at most), a line every {self.interval:g} s"
            )

    def on_step_end(self, args, state, control, **kwargs):
        if self.bars:
            return super().on_step_end(args, state, control, **kwargs)
        now = self.clock()
        if state.is_world_process_zero and (
            now - self.last_line >= self.interval or state.global_step == state.max_steps
        ):
            self.last_line = now
            done = state.global_step / max(state.max_steps, 1)
            since = state.global_step - self.first_step  # steps this process ran, at the pace it ran them
            left = (
                (now - self.started) * (state.max_steps - state.global_step) / since
                if since
                else float("nan")
            )
            self._print(f"step {state.global_step}/{state.max_steps} ({100 * done:.0f} %), epoch {state.epoch or 0:.2f}, "
                        f"about {_duration(left)} left")  # fmt: skip

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if self.bars:
            return super().on_prediction_step(args, state, control, eval_dataloader=eval_dataloader, **kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self.last_line = self.clock()
            if any(key.startswith("eval_") for key in logs):
                self._print(f"evaluation at step {state.global_step}:")
                for line in metrics_table(logs):
                    print(line, file=sys.stderr, flush=True)
            else:
                self._print(format_metrics(logs))

    def on_train_end(self, args, state, control, **kwargs):
        if self.bars:
            return super().on_train_end(args, state, control, **kwargs)


def use_log_lines(trainer) -> None:
    """Replace the Trainer's console callback (`ProgressCallback`, or `PrinterCallback` with `disable_tqdm`)
    by `LogLinesCallback`; a notebook's own progress widget is left alone."""
    replaced = False
    for console in (
        ProgressCallback,
        PrinterCallback,
    ):  # a LogLinesCallback is a ProgressCallback: replaced too
        while any(isinstance(callback, console) for callback in trainer.callback_handler.callbacks):
            trainer.remove_callback(console)
            replaced = True
    if replaced:
        trainer.add_callback(LogLinesCallback())
