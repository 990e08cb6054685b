"""One switch for every library's progress bars; off a terminal, one line per redraw."""

import io
import sys

import datasets
from tqdm.auto import tqdm

from hf_hardpos import progress


def test_carriage_return_redraws_become_lines_every_few_seconds():
    now = [0.0]
    sink = io.StringIO()
    stream = progress.LinePerUpdate(sink, interval=5, clock=lambda: now[0])
    for second, text in enumerate(
        ["\r  0%| 0/4", "\r 25%| 1/4", "\r 50%| 2/4", "\r 75%| 3/4", "\r100%| 4/4"]
    ):
        now[0] = 3.0 * second  # redraws every 3 s: a line at 0 s, 6 s, 12 s, then the final state
        stream.write(text)
    stream.write("\n")
    stream.write("next log line\n")
    assert sink.getvalue().splitlines() == ["  0%| 0/4", " 50%| 2/4", "100%| 4/4", "next log line"]
    assert "\r" not in sink.getvalue()


def test_a_real_tqdm_bar_off_a_terminal_prints_lines(monkeypatch):
    sink = io.StringIO()
    monkeypatch.setattr(sys, "stderr", sink)
    with progress.configure(enabled=True):
        for _ in tqdm(range(3), desc="work"):
            pass
    assert sys.stderr is sink
    lines = sink.getvalue().splitlines()
    assert "\r" not in sink.getvalue() and lines and all(line.startswith("work") for line in lines)
    assert "3/3" in lines[-1]


def test_no_progress_silences_datasets_bars_and_restores_them():
    assert datasets.is_progress_bar_enabled()
    with progress.configure(enabled=False):
        assert not datasets.is_progress_bar_enabled()
    assert datasets.is_progress_bar_enabled()
