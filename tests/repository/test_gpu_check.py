"""`benchmarks/gpu_check.py` drives the other benchmarks with flags they must keep accepting: each step's
script exists and its `--help` lists every option the step passes (a drift would only show on a GPU
machine, in the few minutes a session has one)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

BENCHMARKS = REPO / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from gpu_check import run_step, steps  # noqa: E402


@pytest.mark.parametrize("name", list(steps(None)))
def test_every_step_passes_only_options_its_script_knows(name):
    commands, limit = steps(Path("upstream"))[name]
    assert 0 < limit <= 300
    for command in commands:
        script = Path(command[1]) if command[1] != "-m" else None
        if script is None:  # pytest
            assert "-m" in command[3:] and command[command.index("-m", 3) + 1] == "gpu"
            assert all(Path(c).is_file() for c in command if c.endswith(".py"))
            continue
        assert script.is_file(), script
        options = [c for c in command[2:] if c.startswith("--")]
        if not options:
            continue
        usage = subprocess.run(
            [sys.executable, str(script), "--help"],
            cwd=BENCHMARKS,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert usage.returncode == 0, usage.stderr[-2000:]
        for option in options:
            assert option in usage.stdout, (script.name, option)


def test_a_step_reports_failure_and_timeout(tmp_path):
    fail = run_step([[sys.executable, "-c", "print('x'); raise SystemExit(3)"]], 30, {})
    assert fail[0] == "exit status 3" and fail[2] == "x"
    slow = run_step([[sys.executable, "-c", "import time; time.sleep(5)"]], 1, {})
    assert slow[0] == "timed out after 1 s"


def test_a_steps_whole_output_goes_to_its_log(tmp_path):
    """`--log-dir`: each command's whole output, a timed-out one's too (what it printed before the limit)."""
    log = tmp_path / "step.log"
    lines = "; ".join(f"print('line {i}')" for i in range(12))
    run_step([[sys.executable, "-c", lines]], 30, {}, log)
    slow = "import sys, time; print('before', flush=True); time.sleep(5)"
    assert run_step([[sys.executable, "-c", slow]], 2, {}, log)[0] == "timed out after 2 s"
    text = log.read_text()
    assert [f"line {i}" in text for i in range(12)] == [True] * 12  # more than the 8 lines of the tail
    assert text.count("$ ") == 2 and "before" in text


def test_the_forward_floor_feeds_the_model_on_the_device_it_names(tmp_path, monkeypatch):
    """The first GPU run of `gpu_check.py` (H200) crashed here: the floor's batches stayed on the CPU while the scorer had
    moved the model to CUDA. The meta device stands in for CUDA (a device that is not the CPU, on any
    machine); the forwards are replaced by a check that each input is where the model's weights are."""
    from eval_sweep import forward_floor
    from transformers import CLIPModel

    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
    from tests.support.eval_data import write_attributes_relations_folder

    seen = []

    def check(kind):
        def forward(self, **inputs):
            weights = next(self.parameters()).device
            seen.append((kind, weights.type, {name: t.device.type for name, t in inputs.items()}))

        return forward

    monkeypatch.setattr(CLIPModel, "get_image_features", check("image"))
    monkeypatch.setattr(CLIPModel, "get_text_features", check("text"))
    data = write_attributes_relations_folder(tmp_path / "data")
    model = build_tiny_clip(tmp_path / "model", ["red cube", "blue sphere on the left"], seed=0)
    forward_floor(model, data, 4, "meta")
    assert {kind for kind, _, _ in seen} == {"image", "text"}
    for _, weights, inputs in seen:
        assert weights == "meta" and set(inputs.values()) == {"meta"}
