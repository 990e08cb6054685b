"""A log that keeps talking: every stage of the demo prints a line at least every few seconds.

Why: off a terminal (a batch job, CI, `| tee log`) the demo has no progress bars, and a stage that
prints nothing for a minute (pretraining, building the image sets, scoring) cannot be told from a
hang. `StageLog` wraps the demo's `log` callable: inside `stage(name)` a daemon thread prints
`[name] ... still running, <elapsed> s` whenever nothing was logged for `interval` seconds, and
`TrainingLines` (a Trainer callback) prints the step and the latest loss on the same clock, so the
training stages say something more useful than "still running".
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

from transformers import TrainerCallback

# Seconds of silence after which a stage says it is alive (the promise to users is "at least every 10 s").
HEARTBEAT_SECONDS = 5.0


class StageLog:
    """`log(message)` that remembers when it last spoke, and `stage(name)` that fills silences.

    With `enabled=False` (progress bars on a terminal) it only forwards messages.
    """

    def __init__(
        self,
        log: Callable[[str], None],
        *,
        enabled: bool = True,
        interval: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self.enabled = enabled
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self.last = clock()

    def __call__(self, message: str) -> None:
        with self._lock:
            self._log(message)
            sys.stdout.flush()  # a pipe is block-buffered: without this the lines arrive together at the end
            self.last = self.clock()

    def quiet_for(self) -> float:
        """Seconds since the last line."""
        return self.clock() - self.last

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Run a stage; while it runs, print `[name] ... still running` after each `interval` of silence."""
        if not self.enabled:
            yield
            return
        began, stop = self.clock(), threading.Event()
        self.last = max(self.last, began)  # a stage's first heartbeat comes `interval` after it starts

        def beat() -> None:
            while not stop.wait(min(1.0, self.interval / 4)):
                if self.quiet_for() >= self.interval:
                    self(f"[{name}] ... still running, {self.clock() - began:.0f} s")

        thread = threading.Thread(target=beat, name=f"demo-heartbeat-{name}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


class TrainingLines(TrainerCallback):
    """One line per `interval` seconds of training: step, total steps and the loss logged since the last line.

    A loss is shown once, with the step it was logged at: the demo logs every quarter epoch, and repeating
    the same loss on every line until the next entry made a running stage look stuck."""

    def __init__(self, stage_log: StageLog, label: str) -> None:
        self.stage_log = stage_log
        self.label = label
        self.shown_step = -1  # the step of the last loss printed

    def on_step_end(self, args, state, control, **kwargs):
        # Half the heartbeat's interval, so that a training stage says its step rather than "still running".
        if self.stage_log.enabled and self.stage_log.quiet_for() >= self.stage_log.interval / 2:
            logged = [entry for entry in state.log_history if "loss" in entry]
            loss = ""
            if logged and logged[-1]["step"] > self.shown_step:
                self.shown_step = logged[-1]["step"]
                loss = f", loss {logged[-1]['loss']:.3f} (step {self.shown_step})"
            self.stage_log(f"[{self.label}] step {state.global_step}/{state.max_steps}{loss}")
        return control
