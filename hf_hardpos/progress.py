"""Progress bars for people and for logs: one switch turns every bar off, and off a terminal each
update is a line.

Why: `--no-progress` used to silence only this package's bars, while `datasets`, `transformers`
and `huggingface_hub` kept printing theirs; and in a log file (a batch job, CI) tqdm's
carriage-return redraws pile up into one enormous line. `hardpos` calls `configure` once per
command: with bars off, all four libraries are silenced; off a terminal, a bar prints a line at most
every `LOG_INTERVAL_SECONDS` (and its final state), never carriage returns.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import time
from collections.abc import Iterator

LOG_INTERVAL_SECONDS = 5
# Off a terminal tqdm redraws every second and `LinePerUpdate` prints one redraw per LOG_INTERVAL_SECONDS, so
# a running bar leaves a line at most about 6 s apart (tqdm redrawing only every 5 s could leave 10 s gaps).
_TQDM_REDRAW_SECONDS = 1
# Terminal control sequences (tqdm moves the cursor up over nested bars: ESC[A): meaningless in a file.
_CONTROL_SEQUENCE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class LinePerUpdate(io.TextIOBase):
    """A text stream that turns tqdm's carriage-return redraws into lines, at most one per `interval`
    seconds per stream, plus each bar's final state (written when the bar ends its line), and drops
    cursor movements."""

    def __init__(self, stream, interval: float = LOG_INTERVAL_SECONDS, clock=time.monotonic):
        self.stream = stream
        self.interval = interval
        self.clock = clock
        self.pending = ""  # the latest redraw not printed yet
        self.last_printed = -float("inf")
        self.after_redraw = False  # the last thing printed was a redraw's line

    def _redraw_line(self, text: str) -> str:
        self.pending, self.last_printed, self.after_redraw = "", self.clock(), True
        return text.rstrip() + "\n"

    def write(self, text: str) -> int:
        out = []
        for index, part in enumerate(_CONTROL_SEQUENCE.sub("", text).split("\r")):
            if index:  # a redraw
                head, newline, rest = part.partition("\n")
                if newline:  # it ends the bar's line: the bar's final state
                    out.append(self._redraw_line(head))
                    if rest:
                        out.append(rest)
                        self.after_redraw = False
                elif self.clock() - self.last_printed >= self.interval:
                    out.append(self._redraw_line(part))
                else:
                    self.pending = part
                continue
            if part.startswith("\n") and (self.pending or self.after_redraw):  # the bar ends its line
                if self.pending:
                    out.append(self._redraw_line(self.pending))
                part = part[1:]
            if part:
                out.append(part)
                self.after_redraw = False
        self.stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()


def _library_switches():
    """(disable, enable, is_disabled) of each library's bars, for the libraries already importable."""
    switches = []
    with contextlib.suppress(ImportError):
        import datasets

        switches.append(
            (datasets.disable_progress_bars, datasets.enable_progress_bars, datasets.is_progress_bar_enabled)
        )
    with contextlib.suppress(ImportError):
        from huggingface_hub.utils import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        switches.append(
            (disable_progress_bars, enable_progress_bars, lambda: not are_progress_bars_disabled())
        )
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as transformers_logging

        switches.append(
            (
                transformers_logging.disable_progress_bar,
                transformers_logging.enable_progress_bar,
                transformers_logging.is_progress_bar_enabled,
            )
        )
    return switches


@contextlib.contextmanager
def configure(enabled: bool) -> Iterator[None]:
    """For the duration of one command: every library's bars off (`enabled=False`), or, off a
    terminal, one line per redraw every few seconds. Restores the previous state afterwards."""
    saved_stderr, saved_interval = sys.stderr, os.environ.get("TQDM_MININTERVAL")
    restore = []
    try:
        if not enabled:
            for disable, enable, is_enabled in _library_switches():
                if is_enabled():
                    disable()
                    restore.append(enable)
        elif not sys.stderr.isatty() and not isinstance(sys.stderr, LinePerUpdate):  # once, when nested
            os.environ["TQDM_MININTERVAL"] = str(_TQDM_REDRAW_SECONDS)
            sys.stderr = LinePerUpdate(sys.stderr)
        yield
    finally:
        sys.stderr = saved_stderr
        if saved_interval is None:
            os.environ.pop("TQDM_MININTERVAL", None)
        else:
            os.environ["TQDM_MININTERVAL"] = saved_interval
        for enable in restore:
            enable()
