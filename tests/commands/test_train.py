"""`hardpos train` (commands/train.py) and its logs: what a fine-tune leaves in a log file and its output folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from hf_hardpos import cli
from tests.support.paths import REPO

REDRAWS = re.compile(
    rb"\r|\x1b\["
)  # carriage-return redraws and terminal control sequences (cursor up: ESC[A)
# Warnings about settings nobody chose: pinning memory on a CPU-only machine, transformers' image backend fallback.
UNCHOSEN_WARNINGS = ("pin_memory", "torchvision")
# The smallest fine-tune of one's own: two steps over a local folder, evaluated at the start and at step 2.
QUICK = [
    "--per_device_train_batch_size", "16", "--max_steps", "2", "--logging_steps", "1", "--eval_strategy", "steps",
    "--eval_steps", "2", "--eval_on_start", "true", "--save_strategy", "no", "--max_eval_samples", "16",
]  # fmt: skip


def _quick(tiny_clip_dir, tmp_path) -> list[str]:
    from tests.support.training import finetune_folder, swap_eval_folder

    return [*QUICK, "--model_name_or_path", str(tiny_clip_dir), "--dataset", str(finetune_folder(tmp_path / "data", 32)),
            "--eval_datasets", f"swap={swap_eval_folder(tmp_path / 'swap')}"]  # fmt: skip


def _eval_tables(text: str) -> list[dict]:
    """The evaluations the fine-tune logged: each `evaluation at step N:` line and its `name=value` table."""
    tables, current = [], None
    for line in text.splitlines():
        if re.match(r"\[train [^]]*\] evaluation at step \d+:$", line):
            current = {}
            tables.append(current)
        elif current is not None and line.startswith("  ") and "=" in line:
            assert len(line) <= 100, line
            current.update({k: float(v) for k, v in re.findall(r"(\S+)=(\S+)", line)})
        else:
            current = None
    return tables


def _json_lines(text: str) -> list[dict]:
    """The JSON objects the fine-tune logged (`[train ...] {...}` lines)."""
    return [json.loads(line.split("] ", 1)[1]) for line in text.splitlines()
            if line.startswith("[train ") and "] {" in line]  # fmt: skip


def test_train_help_and_bad_flags(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["train", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and out.startswith("usage: hardpos train [RECIPE.yaml")
    # the defaults a run with --dataset gets, in groups that each fit a screen; no synthetic option left
    assert re.search(r"--num_train_epochs NUM_TRAIN_EPOCHS.*\n.*\n?.*\(default:\s+5\)", out)
    groups = re.split(r"\n\n(?=\S)", out)
    assert len(groups) >= 6 and max(len(group.splitlines()) for group in groups) <= 70
    assert "synthetic" not in out.replace("hf_hardpos.synthetic.finetune", "") and "--adam_beta1" not in out
    with pytest.raises(SystemExit):
        cli.main(["train", "--help-all"])
    assert "--adam_beta1" in capsys.readouterr().out
    assert cli.main(["train", "--dataset", "x", "--learning_rte", "1e-4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean --learning_rate?" in err[0]
    with pytest.raises(SystemExit) as refused:  # other commands still refuse what they do not know
        cli.main(["zoo", "--learning_rate", "1"])
    assert refused.value.code == 2


def test_log_lines_one_line_per_interval_with_numbers(capsys):
    """Off a terminal: a progress line when `interval` has passed (and at the last step), JSON numbers."""
    from hf_hardpos.training.log_lines import LogLinesCallback

    now = [0.0]
    callback = LogLinesCallback(interval=5, clock=lambda: now[0])
    args = SimpleNamespace(disable_tqdm=False, num_train_epochs=3)
    state = SimpleNamespace(
        is_world_process_zero=True, max_steps=10, global_step=0, epoch=0.0, num_train_epochs=4
    )
    callback.on_train_begin(args, state, None)
    for step in range(1, 11):
        now[0], state.global_step, state.epoch = step * 2.0, step, step * 0.3
        callback.on_step_end(args, state, None)
    callback.on_log(
        args, state, None, logs={"loss": 1.23456789, "epoch": 3.0, "total_flos": 5e12, "step": 10}
    )
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "[train 0 s] 10 steps (4 epochs at most), a line every 5 s"
    steps = [line for line in lines if "] step " in line]
    # steps at 6 s, 12 s, 18 s (5 s passed since the last line) and the last step at 20 s
    assert [re.search(r"step (\d+)/10", line).group(1) for line in steps] == ["3", "6", "9", "10"]
    assert _json_lines("\n".join(lines)) == [{"loss": 1.23457, "epoch": 3.0, "step": 10}]
    evaluation = {f"eval_set{i}_rate": i / 7 for i in range(30)} | {"eval_runtime": 1.5, "epoch": 3.0}
    callback.on_log(args, state, None, logs=evaluation)
    printed = capsys.readouterr().err
    assert _eval_tables(printed) == [{f"set{i}_rate": pytest.approx(i / 7, rel=1e-3) for i in range(30)}]
    assert len(printed.splitlines()) < 15

    # Resumed at step 40 of 128: 4 steps in 8 s is 2 s a step, so 84 steps are about 168 s away (not
    # the 40 steps of the earlier run counted as done in those 8 s).
    now[0], state.global_step, state.max_steps = 100.0, 40, 128
    callback.on_train_begin(args, state, None)
    now[0], state.global_step = 108.0, 44
    callback.on_step_end(args, state, None)
    assert capsys.readouterr().err.splitlines()[-1].endswith("about 2 min 48 s left")


@pytest.mark.slow
def test_fine_tune_keeps_its_output_clean(tiny_clip_dir, tmp_path, capfd, caplog):
    """`hardpos train` on a local folder: evaluated before the first step and at the end; a log with no redraws,
    numbers as numbers and no warning about a setting nobody chose."""
    caplog.set_level("INFO")
    output = tmp_path / "run"
    quick = _quick(tiny_clip_dir, tmp_path)
    capfd.readouterr()  # the test's own folders written: what follows is the command's
    assert cli.main(["train", *quick, "--use_cpu", "--output_dir", str(output)]) == 0
    captured = capfd.readouterr()
    log = captured.out + captured.err
    assert not REDRAWS.search(log.encode()) and not any(w in log for w in UNCHOSEN_WARNINGS)
    logged = _json_lines(log)
    assert any("loss" in entry for entry in logged)
    assert all(
        isinstance(v, (int, float)) for entry in logged for v in entry.values()
    )  # numbers, not strings

    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    evaluated = {e["step"]: e for e in history if "eval_swap_brittleness" in e}
    assert sorted(evaluated) == [0, 2]  # the start model, then the fine-tuned one
    tables = _eval_tables(log)  # printed as short tables with the values saved
    assert [t["swap_brittleness"] for t in tables] == [pytest.approx(evaluated[s]["eval_swap_brittleness"], rel=1e-3)
                                                       for s in (0, 2)]  # fmt: skip
    assert re.search(r"swap_brittleness: [\d.]+ % before fine-tuning, [\d.]+ % after", caplog.text)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # nothing the user did not choose
    assert {p.name for p in output.iterdir() if p.is_dir()} == set()


def test_demo_seam_takes_only_its_flags(capsys):
    """Without --dataset `hardpos train` is the demo's fine-tune: a flag of the real fine-tune is refused in one
    line naming it, before anything is trained."""
    assert cli.main(["train", "--learning_rate", "1e-4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --learning_rate") and "--dataset" in err[0]


@pytest.mark.slow
def test_accelerate_launch_writes_a_log_file_without_redraws(tiny_clip_dir, tmp_path):
    """`accelerate launch examples/finetune.py ... > file 2>&1`: every line a line (no carriage returns, no
    cursor movements), no warning about a setting the user did not choose, metrics as JSON numbers."""
    log_file = tmp_path / "finetune.log"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", str(REPO / "examples" / "finetune.py"),
               *_quick(tiny_clip_dir, tmp_path), "--output_dir", str(tmp_path / "run")]  # fmt: skip
    with log_file.open("wb") as log:
        done = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, timeout=300
        )
    text = log_file.read_bytes()
    assert done.returncode == 0, text[-3000:]
    assert REDRAWS.findall(text) == []
    decoded = text.decode()
    assert not any(w in decoded for w in UNCHOSEN_WARNINGS), decoded
    assert (
        "defaults used instead" not in decoded
    )  # the launch flags given: accelerate's own warning is gone too
    logged = _json_lines(decoded)
    assert [e["swap_brittleness"] for e in _eval_tables(decoded)]  # before and after, as short tables
    assert all(isinstance(v, (int, float)) for entry in logged for v in entry.values())
    assert "step 2/2 (100 %)" in decoded


def test_line_per_update_drops_cursor_movements_and_wraps_once(monkeypatch):
    """tqdm moves the cursor up over a nested bar (ESC[A); in a file that is noise. A training entry point
    inside `hardpos` configures progress again: the stream is wrapped once, not twice."""
    import io

    from hf_hardpos import progress

    out = io.StringIO()
    stream = progress.LinePerUpdate(out, interval=0, clock=lambda: 0.0)
    stream.write("\rEncoding images:   0%|\x1b[A\rEncoding images: 100%|\n")
    assert out.getvalue() == "Encoding images:   0%|\nEncoding images: 100%|\n"
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress.configure(enabled=True):
        outer = sys.stderr
        with progress.configure(enabled=True):
            assert sys.stderr is outer and isinstance(outer, progress.LinePerUpdate)
        assert sys.stderr is outer


@pytest.mark.parametrize("argv, named", [
    (["train", "--model_name_or_path", "runs/hpn", "--dataset", "x"], "runs/hpn"),  # beside an existing runs/
    (["train", "--model_name_or_path", "openai/clip-vit-base-patch32", "--dataset", "my-evalset"], "my-evalset"),
    (["train", "--model_name_or_path", "openai/clip-vit-base-patch32", "--dataset", "data.parquet"], "data.parquet"),
    (["eval", "--model", "runs/hpn", "--dataset", "my_evalset"], "runs/hpn"),
    (["eval", "--model", "./runs/my_evalset", "--dataset", "my_evalset"], "./runs/my_evalset"),
])  # fmt: skip
def test_mistyped_local_paths_fail_fast_with_the_hub_reachable(tmp_path, monkeypatch, capsys, argv, named):
    """A local-looking name that names nothing fails in one line naming it, before any Hub call (so no retries
    whether the Hub is reachable or not; the lead times `hardpos train --model_name_or_path runs/hpn --dataset x`
    with HF_HUB_OFFLINE unset on an idle machine: < 5 s)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "my_evalset").mkdir()  # `my-evalset` is a typo of it
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0]
