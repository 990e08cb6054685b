"""`forked_runs`: independent runs in forked workers, their log lines printed by the parent."""

import os

import pytest

from hf_hardpos.synthetic import forked_runs
from hf_hardpos.synthetic.forked_runs import run_all, worker_count


def _square_in_a_process(task, log):
    log(f"squaring {task}")
    if task < 0:
        raise ValueError(f"negative task {task}")
    return task * task, os.getpid()


@pytest.fixture
def cpu_only_linux(monkeypatch):
    """A Linux CPU machine with 4 usable cores, whatever machine runs the test."""
    monkeypatch.setattr(forked_runs, "accelerator_present", lambda: False)
    monkeypatch.setattr(forked_runs.sys, "platform", "linux")
    monkeypatch.setattr(forked_runs, "usable_cores", lambda: 4)


def test_one_run_per_core_on_a_linux_cpu_but_never_more_than_the_runs(cpu_only_linux):
    assert worker_count(None, runs=6, torch_threads=1) == 4
    assert worker_count(None, runs=3, torch_threads=1) == 3
    assert worker_count(2, runs=6, torch_threads=1) == 2
    assert worker_count(1, runs=6, torch_threads=1) == 1


def test_runs_go_one_after_another_where_a_fork_is_unsafe(cpu_only_linux, monkeypatch):
    assert worker_count(None, runs=6, torch_threads=2) == 1  # an OpenMP team does not survive a fork
    monkeypatch.setattr(forked_runs.sys, "platform", "darwin")
    assert worker_count(None, runs=6, torch_threads=1) == 1
    monkeypatch.setattr(forked_runs.sys, "platform", "linux")
    monkeypatch.setattr(forked_runs, "accelerator_present", lambda: True)  # a CUDA context cannot be forked
    assert worker_count(None, runs=6, torch_threads=1) == 1
    with pytest.raises(ValueError):
        worker_count(0, runs=6, torch_threads=1)


def test_a_gpu_machine_is_seen_as_one(monkeypatch):
    import torch

    if getattr(torch, "accelerator", None) is not None:
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert forked_runs.accelerator_present()


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_forked_runs_return_every_result_and_every_log_line():
    lines = []
    results = dict(run_all(_square_in_a_process, [3, 1, 2, 5], workers=2, log=lines.append))
    assert {task: square for task, (square, _) in results.items()} == {3: 9, 1: 1, 2: 4, 5: 25}
    pids = {pid for _, pid in results.values()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert sorted(lines) == ["squaring 1", "squaring 2", "squaring 3", "squaring 5"]


def test_one_worker_runs_here_in_order():
    lines = []
    results = list(run_all(_square_in_a_process, [3, 1], workers=1, log=lines.append))
    assert results == [(3, (9, os.getpid())), (1, (1, os.getpid()))]
    assert lines == ["squaring 3", "squaring 1"]


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_a_failed_run_raises_in_the_parent():
    with pytest.raises(ValueError, match="negative task -1"):
        list(run_all(_square_in_a_process, [2, -1, 4], workers=2, log=lambda _: None))


def _pid_and_sum(*numbers):
    return os.getpid(), sum(numbers)


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_background_work_runs_in_another_process_and_comes_back():
    with forked_runs.background(forked=True) as submit:
        later = [submit(_pid_and_sum, 1, 2), submit(_pid_and_sum, 3)]
    (first_pid, three), (second_pid, also_three) = (future.result() for future in later)
    assert (three, also_three) == (3, 3)
    assert first_pid == second_pid != os.getpid()  # one forked process, in submission order


def test_background_work_without_a_fork_is_done_at_once_here():
    with forked_runs.background(forked=False) as submit:
        future = submit(_pid_and_sum, 4, 5)
        assert future.done() and future.result() == (os.getpid(), 9)
