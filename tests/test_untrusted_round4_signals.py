"""The demo's forked fine-tunes under signals: Ctrl-C exits 130 with one line, the workers end with a parent
killed with -9, a worker killed with -9 is one line (`synthetic.forked_runs`, `training.interrupt`)."""

import os
import pickle
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hf_hardpos.errors import UserInputError
from hf_hardpos.synthetic.forked_runs import run_all
from hf_hardpos.training.interrupt import TrainingInterrupted

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_training_interrupted_pickles_with_its_step_and_checkpoint():
    stop = pickle.loads(pickle.dumps(TrainingInterrupted(7, "/x/checkpoint-7")))
    assert (stop.step, stop.checkpoint, str(stop)) == (
        7,
        "/x/checkpoint-7",
        str(TrainingInterrupted(7, "/x/checkpoint-7")),
    )


def _interrupted(task, log):
    raise TrainingInterrupted(task, None)


def _killed(task, log):
    if task == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return task


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux")
def test_a_run_interrupted_in_a_worker_reaches_the_parent_as_itself():
    with pytest.raises(TrainingInterrupted) as stop:
        list(run_all(_interrupted, [3, 4], workers=2, log=lambda line: None))
    assert stop.value.step in (3, 4)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux")
def test_a_worker_killed_with_9_is_one_line():
    with pytest.raises(UserInputError, match="ended abruptly") as err:
        list(run_all(_killed, [0, 1, 2], workers=2, log=lambda line: None))
    assert "\n" not in str(err.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux, /proc")
def test_workers_end_when_their_parent_is_killed_with_9():
    script = textwrap.dedent("""
        import time
        from hf_hardpos.synthetic.forked_runs import run_all

        def wait(task, log):
            log("started")
            time.sleep(120)

        print("go", flush=True)
        list(run_all(wait, [0, 1], workers=2, log=print))
    """)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT
    )
    try:
        assert parent.stdout.readline().strip() == "go"
        deadline = time.monotonic() + 60
        while len(_children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _children(parent.pid)
        assert len(workers) == 2
        parent.kill()
        parent.wait(10)
        assert _gone_within(workers, 10), [p for p in workers if _alive(p)]
    finally:
        parent.kill()
        for pid in _children(parent.pid):
            os.kill(pid, signal.SIGKILL)


def _demo_until_fine_tunes(tmp_path):
    # As from a terminal: SIGINT at its default in the demo. A test run in a background job (`cmd &` in a
    # script, nohup) ignores SIGINT, and an ignored signal stays ignored across exec, so the demo would
    # never see the Ctrl-C below; a handled one is reset to the default.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        demo = _start_demo(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    for line in demo.stdout:
        if re.match(r"\[fine-tune\] \d+ runs, 2 at a time", line):
            break
    else:
        pytest.fail(f"the demo never forked its fine-tunes: {demo.stderr.read()}")
    deadline = time.monotonic() + 30
    while len(_children(demo.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return demo


def _start_demo(tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hf_hardpos",
            "demo",
            "--quick",
            "--processes",
            "2",
            "--no-progress",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )


def _error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in re.split(r"[\r\n]+", stderr) if line.startswith("hardpos demo:")]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux, /proc")
def test_ctrl_c_during_the_forked_fine_tunes_exits_130_with_one_line(tmp_path):
    demo = _demo_until_fine_tunes(tmp_path)
    workers = _children(demo.pid)
    time.sleep(1)
    os.killpg(demo.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    _, stderr = demo.communicate(timeout=120)
    assert demo.returncode == 130, stderr
    assert len(_error_lines(stderr)) == 1
    assert _gone_within(workers, 10)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux, /proc")
def test_demo_workers_end_with_a_killed_parent_and_a_killed_worker_is_one_line(tmp_path):
    demo = _demo_until_fine_tunes(tmp_path / "a")
    workers = _children(demo.pid)
    demo.kill()
    demo.wait(10)
    assert workers and _gone_within(workers, 10), [p for p in workers if _alive(p)]
    demo = _demo_until_fine_tunes(tmp_path / "b")
    os.kill(_children(demo.pid)[0], signal.SIGKILL)
    _, stderr = demo.communicate(timeout=180)
    assert demo.returncode == 2 and len(_error_lines(stderr)) == 1, stderr
