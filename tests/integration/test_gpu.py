"""The CUDA paths: AMP fine-tuning with pinned memory and exact resumes; evaluation under `--dtype`,
`--allow-tf32` and `--protocol paper`; several models and `torchrun` on one GPU.

The first two tests also run on the CPU (where the precision exists there; the CPU's fp32 training and
multi-process evaluation have their own tests), and every test runs on `cuda` where torch sees a device; the `cuda` cases carry the `gpu` marker (`pytest -m gpu`; `benchmarks/gpu_check.py` runs them
on a GPU machine). Outcome flips of lower precisions against fp32 are counted and, when
`HARDPOS_GPU_REPORT` names a file, written there for `benchmarks/gpu_check.py` to record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from hf_hardpos import metrics
from hf_hardpos.cli import main
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from hf_hardpos.training import HardPosTrainer
from tests.support.devices import HAS_CUDA
from tests.support.eval_data import make_eval_set, write_hub_folder
from tests.support.training import finetune_rows, load_tiny, make_args

CUDA = pytest.param(
    "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")]
)
CONFIGS = ("attributes", "relations")


def _record(name: str, value) -> None:
    """Add one figure to the file `HARDPOS_GPU_REPORT` names (nothing when unset)."""
    target = os.environ.get("HARDPOS_GPU_REPORT")
    if not target:
        return
    path = Path(target)
    figures = json.loads(path.read_text()) if path.is_file() else {}
    figures[name] = value
    path.write_text(json.dumps(figures, indent=2, sort_keys=True))


@pytest.fixture
def deterministic():
    """Deterministic kernels for the block (CUDA's index backward otherwise accumulates with atomics,
    so a resumed run could differ from the straight one in the last bits), restored afterwards."""
    previous = torch.are_deterministic_algorithms_enabled()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(
        True, warn_only=True
    )  # an op without a deterministic kernel warns, not fails
    yield
    torch.use_deterministic_algorithms(previous)


@pytest.mark.parametrize(
    "device, precision",
    [
        ("cpu", "bf16"),
        pytest.param(*CUDA.values, "fp32", marks=CUDA.marks),
        pytest.param(*CUDA.values, "fp16", marks=CUDA.marks),
        pytest.param(*CUDA.values, "bf16", marks=CUDA.marks),
    ],
)
def test_fine_tuning_with_amp_and_pinned_memory_resumes_exactly(
    device, precision, tiny_clip_dir, tmp_path, deterministic
):
    """A few steps under the Trainer's defaults for the device (pinned memory and a loader worker on
    CUDA), with AMP; every logged loss finite; a resume from the step-2 checkpoint ends where the
    straight run ended (weights, loss state and the logged loss of the last step)."""

    def run(resume=None):
        model, processor = load_tiny(tiny_clip_dir)
        args = make_args(
            tmp_path / "run",
            max_steps=4,
            cmr_weight=0.4,
            save_strategy="steps",
            save_steps=2,
            use_cpu=device == "cpu",
            dataloader_num_workers=0 if device == "cpu" else 1,
            fp16=precision == "fp16",
            bf16=precision == "bf16",
        )
        trainer = HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(24), processor=processor)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    straight = run()
    assert next(straight.model.parameters()).device.type == device
    losses = [e["loss"] for e in straight.state.log_history if "loss" in e and "train_runtime" not in e]
    assert len(losses) == 4 and all(np.isfinite(losses)), losses
    resumed = run(resume=str(tmp_path / "run" / "checkpoint-2"))
    for a, b in ((straight.model, resumed.model), (straight.objective, resumed.objective)):
        for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
            torch.testing.assert_close(y, x, msg=name)
    last = [e["loss"] for e in resumed.state.log_history if "loss" in e and "train_runtime" not in e][-1]
    assert last == pytest.approx(losses[-1], rel=1e-5)
    _record(f"train_{device}_{precision}_losses", losses)


@pytest.fixture(scope="module")
def replace_like(tmp_path_factory) -> Path:
    sets = {
        config: make_eval_set(num_images=6 + i, rows_per_image=3, seed=i) for i, config in enumerate(CONFIGS)
    }
    return write_hub_folder(tmp_path_factory.mktemp("replace"), sets)


def _eval(model: Path, data: Path, out: Path, device: str, *flags: str) -> dict:
    assert (
        main(
            [
                "eval",
                "--model",
                str(model),
                "--dataset",
                str(data),
                "--output",
                str(out),
                "--device",
                device,
                "--batch-size",
                "4",
                "--no-progress",
                *flags,
            ]
        )
        == 0
    )
    return json.loads((out / "metrics.json").read_text())


def _outcomes(folder: Path) -> dict[str, np.ndarray]:
    """Per config, the rows' three outcomes as saved (original correct, augmented correct, brittle), [N, 3];
    checked against the metric definitions on the saved scores."""
    out = {}
    for config in CONFIGS:
        table = pq.read_table(folder / f"scores-{config}.parquet").to_pydict()
        c, n, p = (
            np.asarray(table[f"{k}_score"], dtype=np.float64) for k in ("original", "negative", "positive")
        )
        saved = np.stack([table[k] for k in ("original_correct", "augmented_correct", "brittle")], axis=1)
        recomputed = np.stack(
            [metrics.original_correct(c, n), metrics.augmented_correct(c, n, p), metrics.brittle(c, n, p)],
            axis=1,
        )
        assert (saved == recomputed).all()
        out[config] = saved
    return out


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_evaluation_precisions_are_recorded_and_their_flips_counted(
    device, tiny_clip_dir, replace_like, tmp_path
):
    """fp32, then bf16 / fp16 autocast, TF32 and the paper's protocol on the same rows: each run records
    what it ran, its scores stay within the precision's reach of fp32, and the rows whose outcome flips
    against fp32 are counted (a tiny model's scores are near-tied, so flips are possible, not an error)."""
    reference = _eval(tiny_clip_dir, replace_like, tmp_path / "fp32", device)
    assert reference["run"]["settings"]["device"] == device
    base, base_outcomes = _scores(tmp_path / "fp32"), _outcomes(tmp_path / "fp32")
    variants = {
        "bf16": ("--dtype", "bf16"),
        "fp16": ("--dtype", "fp16"),
        "tf32": ("--allow-tf32",),
        "paper": ("--protocol", "paper"),
    }
    tolerance = {"bf16": 3e-2, "fp16": 5e-3, "tf32": 5e-3, "paper": 5e-2}  # paper: other pixels, fp16 weights
    flips = {}
    for name, flags in variants.items():
        run = _eval(tiny_clip_dir, replace_like, tmp_path / name, device, *flags)
        settings = run["run"]["settings"]
        assert settings["device"] == device
        if name in ("bf16", "fp16"):
            assert settings["precision"] == name
        if name == "tf32":
            assert settings["allow_tf32"] is True
        if name == "paper":
            assert settings["protocol"]["name"] == "paper"
        scores = _scores(tmp_path / name)
        for column, values in scores.items():
            assert np.isfinite(values).all(), (name, column)
            assert np.abs(values - base[column]).max() < tolerance[name], (name, column)
        outcomes = _outcomes(tmp_path / name)
        flips[name] = int(sum((outcomes[c] != base_outcomes[c]).any(axis=1).sum() for c in CONFIGS))
    rows = sum(len(v) for v in base_outcomes.values())
    assert all(0 <= count <= rows for count in flips.values())
    _record(f"eval_{device}_flips_vs_fp32", {**flips, "rows": rows})


def _scores(folder: Path) -> dict[str, np.ndarray]:
    return {
        f"{config}/{column}": np.asarray(values, dtype=np.float64)
        for config in CONFIGS
        for column, values in pq.read_table(folder / f"scores-{config}.parquet").to_pydict().items()
        if column.endswith("_score")
    }


@pytest.mark.parametrize(
    "device", [CUDA]
)  # the CPU: tests/evaluation/test_multi_model.py, tests/evaluation/test_distributed.py
def test_two_models_in_one_run_and_torchrun_equal_single_runs(device, replace_like, tmp_path):
    """`--model A --model B` equals A alone and B alone; `torchrun --nproc_per_node 1` equals a plain
    process (on CUDA: the process's own GPU, LOCAL_RANK 0)."""
    models = [build_tiny_clip(tmp_path / "a", seed=1), build_tiny_clip(tmp_path / "b", seed=2, image_size=16)]
    assert (
        main(
            [
                "eval",
                "--model",
                str(models[0]),
                "--model",
                str(models[1]),
                "--dataset",
                str(replace_like),
                "--output",
                str(tmp_path / "together"),
                "--device",
                device,
                "--batch-size",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )
    for model in models:
        alone = tmp_path / f"alone-{model.name}"
        _eval(model, replace_like, alone, device)
        for config in CONFIGS:
            name = f"scores-{config}.parquet"
            assert pq.read_table(alone / name).equals(
                pq.read_table(tmp_path / "together" / model.name / name)
            )

    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf_datasets_cache")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "1",
            "-m",
            "hf_hardpos",
            "eval",
            "--model",
            str(models[0]),
            "--dataset",
            str(replace_like),
            "--output",
            str(tmp_path / "torchrun"),
            "--device",
            device,
            "--batch-size",
            "4",
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for config in CONFIGS:
        name = f"scores-{config}.parquet"
        assert pq.read_table(tmp_path / "torchrun" / name).equals(
            pq.read_table(tmp_path / f"alone-{models[0].name}" / name)
        )
