"""`torchrun --nproc_per_node 2 -m hf_hardpos eval` (two CPU processes, gloo) equals one process.

Process 0 reads, resumes and writes; both encode whole batches of the distinct images and captions
(`evaluation.distributed`). The per-row scores must be bit-identical to a single-process run, for one model
and for several models in one run; a process that fails stops both, and nothing half-done is saved.
"""

import io
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from datasets import Dataset, Features, Image, Value

from hf_hardpos.cli import main
from hf_hardpos.evaluation.distributed import deal_batches
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import make_eval_set, write_hub_folder

CONFIGS = ("attributes", "relations")


def _torchrun(*args, cwd):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(cwd / "hf_datasets_cache"),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "hf_hardpos",
            "eval",
            *args,
            "--batch-size",
            "3",
            "--no-progress",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_batches_are_dealt_whole_and_round_robin():
    shares = deal_batches(10, 3, 2)
    assert [s.tolist() for s in shares] == [[0, 1, 2, 6, 7, 8], [3, 4, 5, 9]]
    assert [s.tolist() for s in deal_batches(2, 3, 2)] == [[0, 1], []]


def test_the_resolved_model_is_sent_as_is_and_another_process_scores_with_it(tmp_path, monkeypatch):
    """Process 0 resolves the model once; the other processes get the pickled `ResolvedModel` (what
    `broadcast_object_list` sends) and load it without resolving anything again, encoding as process 0 does."""
    import pickle

    import torch

    from hf_hardpos.backends import ModelBackend, ResolvedModel
    from hf_hardpos.evaluation.distributed import IMAGES, TEXTS, DistributedScorer, Workers
    from hf_hardpos.image_keys import ImageSource
    from hf_hardpos.model_source import ModelSource
    from hf_hardpos.scoring import ITMScorer

    source = ModelSource.resolve(str(build_tiny_clip(tmp_path / "m", seed=3)))
    assert isinstance(source, ResolvedModel) and pickle.loads(pickle.dumps(source)) == source
    model, processor = source.load()
    driver = DistributedScorer(
        model, processor, batch_size=3, progress=False, pixels=None, workers=Workers(0, 2), source=source
    )
    spec = pickle.loads(pickle.dumps(driver.spec))
    assert spec["model"] == source and spec["model"].backend.name == "hf"

    def resolved_again(*args, **kwargs):
        raise AssertionError("another process resolved the model again")

    monkeypatch.setattr(ModelBackend, "resolve_model", resolved_again)
    monkeypatch.setattr(type(source.backend), "resolve", resolved_again)
    worker, scorers = Workers(1, 2), {}
    alone = ITMScorer(model, processor, batch_size=3, progress=False)
    ids = processor.tokenizer(["a red cube", "two dogs on grass", "blue"])["input_ids"]
    assert torch.equal(worker._encode(scorers, TEXTS, spec, ids), alone._encode_token_ids(ids))
    rows = make_eval_set(num_images=3, rows_per_image=1, seed=2)
    sources = [ImageSource(row, f"i{row}", f"k{row}") for row in range(len(rows))]
    images = ([rows[s.row]["image"] for s in sources], sources)
    assert torch.equal(
        worker._encode(scorers, IMAGES, spec, images), alone._encode_images(rows, "image", sources)
    )


def test_two_processes_equal_one_for_one_and_several_models(tmp_path):
    data = write_hub_folder(
        tmp_path / "replace",
        {c: make_eval_set(num_images=5 + i, rows_per_image=2, seed=i) for i, c in enumerate(CONFIGS)},
    )
    models = [build_tiny_clip(tmp_path / "a", seed=1), build_tiny_clip(tmp_path / "b", seed=2, image_size=16)]
    done = _torchrun(
        *(x for m in models for x in ("--model", str(m))),
        "--dataset",
        str(data),
        "--output",
        str(tmp_path / "two"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for model in models:
        alone = tmp_path / f"one-{model.name}"
        assert (
            main(
                [
                    "eval",
                    "--model",
                    str(model),
                    "--dataset",
                    str(data),
                    "--output",
                    str(alone),
                    "--batch-size",
                    "3",
                    "--no-progress",
                ]
            )
            == 0
        )
        together = tmp_path / "two" / model.name
        a, b = (json.loads((f / "metrics.json").read_text()) for f in (alone, together))
        assert a["results"] == b["results"] and a["provenance"] == b["provenance"]
        for config in CONFIGS:
            assert pq.read_table(alone / f"scores-{config}.parquet").equals(
                pq.read_table(together / f"scores-{config}.parquet")
            )


def _png(seed: int) -> bytes:
    import numpy as np
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.fromarray(np.random.default_rng(seed).integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(
        buffer, "PNG"
    )
    return buffer.getvalue()


@pytest.mark.slow
def test_a_failing_process_stops_both_and_the_rerun_resumes(tmp_path):
    """Six distinct images in batches of 3: the broken one (the fifth) is process 1's to decode. The config
    before it is saved; once the image is fixed, a rerun reuses that config and scores the other."""
    good, broken = _six_images(None), _six_images(4)
    data = write_hub_folder(tmp_path / "data", {"attributes": good, "relations": broken})
    model = build_tiny_clip(tmp_path / "m", seed=1)
    out = tmp_path / "out"
    done = _torchrun("--model", str(model), "--dataset", str(data), "--output", str(out), cwd=tmp_path)
    assert done.returncode != 0
    assert "process 1 of 2" in done.stderr and "row 4" in done.stderr
    assert (out / "scores-attributes.parquet").exists() and not (out / "scores-relations.parquet").exists()
    saved = (out / "scores-attributes.parquet").stat().st_mtime_ns

    write_hub_folder(data, {"attributes": good, "relations": _six_images(None, seed=10)})
    done = _torchrun("--model", str(model), "--dataset", str(data), "--output", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "scores-attributes.parquet").stat().st_mtime_ns == saved
    assert set(json.loads((out / "metrics.json").read_text())["results"]) == set(CONFIGS)


def _six_images(broken: int | None, seed: int = 0) -> Dataset:
    images = [_png(seed + i) for i in range(6)]
    if broken is not None:
        images[broken] = b"not an image"
    features = Features(
        {
            "image": Image(),
            "image_id": Value("string"),
            "caption": Value("string"),
            "hard_negative": Value("string"),
            "hard_positive": Value("string"),
        }
    )
    return Dataset.from_dict(
        {
            "image": [{"bytes": b, "path": None} for b in images],
            "image_id": [str(i) for i in range(6)],
            "caption": ["red cube"] * 6,
            "hard_negative": ["blue cube"] * 6,
            "hard_positive": ["a red cube"] * 6,
        },
        features=features,
    )
