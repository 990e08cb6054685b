"""`hardpos train` with no arguments (synthetic/finetune.py): the demo's hp+hn fine-tune, checked against a
demo run of the same settings (quick budgets; the default settings are the demo's own `DemoConfig()`)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest
from transformers import TrainerCallback

from hf_hardpos.synthetic import finetune
from hf_hardpos.synthetic.config import DemoConfig
from hf_hardpos.synthetic.demo import run_demo

# Two epochs of two steps: a checkpoint after each, so a run can be interrupted between them.
CONFIG = dataclasses.replace(DemoConfig.quick(seeds=(0,)), finetune_epochs=2.0, processes=1)
RATES = ("orig_acc", "aug_acc", "brittleness")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    run_demo(folder, CONFIG, progress=False, log=lambda _: None)
    return folder


class _CtrlCAtStep(TrainerCallback):
    """Sends this process SIGINT at the end of `step`, as a person pressing Ctrl-C would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGINT)
        return control


def test_no_argument_run_is_the_demos_hp_hn_run(demo_dir, tmp_path, monkeypatch):
    """Same start model (reused from the demo's folder, not trained again), same final rates as the demo's
    hp+hn row of the seed; the folder holds what transformers' example scripts write."""
    from huggingface_hub import constants

    monkeypatch.setattr(
        constants, "HF_HOME", str(tmp_path / "hf_home")
    )  # an empty cache: nothing to reuse there
    lines: list[str] = []
    result = finetune.demo_finetune(tmp_path / "run", CONFIG, seed=0, demo_dirs=[demo_dir], log=lines.append)
    assert result.start_model_reused and result.start_model == demo_dir / "models" / "pretrained"
    assert not (tmp_path / "hf_home").exists()
    info = json.loads((demo_dir / "run_info.json").read_text())["per_seed"]
    for dataset in ("replace", "swap", "replace_attributes", "replace_relations"):
        assert result.metrics[dataset] == info["hp+hn"]["0"][dataset], dataset  # equal, digit for digit
        assert result.start[dataset] == info["pretrained"]["0"][dataset], dataset
    assert result.demo_rows["hn"] == info["hn"]["0"]

    saved = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert saved["eval_swap_brittleness"] == info["hp+hn"]["0"]["swap"]["brittleness"]
    combined = json.loads((tmp_path / "run" / "all_results.json").read_text())
    assert (
        combined["eval_replace_aug_acc"] == info["hp+hn"]["0"]["replace"]["aug_acc"]
        and "train_runtime" in combined
    )
    assert (tmp_path / "run" / "README.md").is_file() and (tmp_path / "run" / "model.safetensors").is_file()
    # The table: the start model, the demo's hn row and this run, each with the six rates in %.
    rows = {
        line[:34].strip(): line[34:].split()
        for line in lines
        if line[:34].strip().startswith(("start", "demo", "this"))
    }
    assert rows["demo hn, seed 0"] == [
        f"{100 * info['hn']['0'][d][r]:.1f}" for d in ("replace", "swap") for r in RATES
    ]
    assert rows["this run: hp+hn, seed 0"] == [
        f"{100 * info['hp+hn']['0'][d][r]:.1f}" for d in ("replace", "swap") for r in RATES
    ]


def test_interrupted_run_resumes_from_its_last_checkpoint_when_run_again(
    demo_dir, tmp_path, monkeypatch, caplog
):
    """Ctrl-C after step 3 saves checkpoint-3; the same call again resumes from it (and says so) instead of
    starting from step 0 beside it, and ends with the uninterrupted run's numbers."""
    from hf_hardpos.training.interrupt import TrainingInterrupted

    original = finetune.variant_trainer

    def interrupted(*args, **kwargs):
        trainer = original(*args, **kwargs)
        trainer.add_callback(_CtrlCAtStep(3))
        return trainer

    output = tmp_path / "run"
    monkeypatch.setattr(finetune, "variant_trainer", interrupted)
    with pytest.raises(TrainingInterrupted) as stopped:
        finetune.demo_finetune(output, CONFIG, seed=0, demo_dirs=[demo_dir], log=lambda _: None)
    assert stopped.value.step == 3 and (output / "checkpoint-3" / "trainer_state.json").is_file()
    monkeypatch.setattr(finetune, "variant_trainer", original)

    caplog.set_level("WARNING")
    result = finetune.demo_finetune(output, CONFIG, seed=0, demo_dirs=[demo_dir], log=lambda _: None)
    assert any(
        "resuming from it" in r.getMessage() and "checkpoint-3" in r.getMessage() for r in caplog.records
    )
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    # one history: the epoch-1 checkpoint, the interrupt's and the last, no second run from step 0
    assert sorted(p.name for p in output.glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-3",
        "checkpoint-4",
    ]
    steps = [e["step"] for e in state["log_history"] if "loss" in e]
    assert steps == sorted(set(steps))
    info = json.loads((demo_dir / "run_info.json").read_text())["per_seed"]
    for dataset in ("replace", "swap"):
        for rate in RATES:
            assert result.metrics[dataset][rate] == pytest.approx(info["hp+hn"]["0"][dataset][rate], abs=1e-9)
