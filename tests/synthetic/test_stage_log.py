"""The demo's step lines (synthetic/stage_log.py): a loss is printed once, with the step it was logged at."""

from types import SimpleNamespace

from hf_hardpos.synthetic.stage_log import StageLog, TrainingLines


def test_a_logged_loss_is_printed_once_not_on_every_line():
    now = [0.0]
    lines: list[str] = []
    log = StageLog(lines.append, interval=4, clock=lambda: now[0])
    callback = TrainingLines(log, "fine-tune seed 0 hp+hn")
    state = SimpleNamespace(global_step=0, max_steps=80, log_history=[])
    for step in range(1, 81):
        now[0], state.global_step = step * 1.0, step
        if step % 20 == 0:  # the demo logs every quarter of the run
            state.log_history.append({"loss": 1.0 / step, "step": step})
        callback.on_step_end(None, state, None)
    with_loss = [line for line in lines if "loss" in line]
    assert [line.rsplit("(step ", 1)[1] for line in with_loss] == ["20)", "40)", "60)", "80)"]
    assert len(lines) == 40  # a line every 2 s of silence: the step moves on, the loss is not repeated
