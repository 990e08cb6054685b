"""`evaluation.decode_ahead`: images decoded by a process forked at start-up give the scores a run decoding
alone gives; pixels that differ from the run's processor are never used; the command cleans up."""

import os
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from hf_hardpos.cli import build_parser
from hf_hardpos.evaluation.decode_ahead import PREFIX, DecodeAhead, wanted
from hf_hardpos.evaluation.multi_model import scorer_factory
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.pixel_entries import AHEAD_KEY, read_entry, write_entry
from tests.support.eval_data import write_attributes_relations_folder

DISTINCT_IMAGES = 8  # two configs of 4 images each, with their own seeds


def _finished(ahead: DecodeAhead) -> DecodeAhead:
    """Wait for the decoder to decode everything (a run would stop it earlier, with what it had)."""
    deadline = time.monotonic() + 120
    while ahead.process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ahead.process.is_alive()
    return ahead


def _scores(report) -> dict:
    """Each config's per-row scores of the caption, hard negative and hard positive."""
    rows = report.section.row_scores
    return {
        config: np.stack([rows[config][c] for c in ("original", "negative", "positive")]) for config in rows
    }


def _scored_with(ahead: DecodeAhead, model, dataset):
    """(the run's pixel store, its report) of a run scored from `ahead`'s pixels, `ahead` closed after."""
    try:
        store = ahead.pixels(shared=False)
        report = evaluate_model(
            str(model), str(dataset), progress=False, log=lambda m: None, make_scorer=scorer_factory(store)
        )
    finally:
        ahead.close()
    return store, report


@pytest.fixture
def dataset(tmp_path):
    return write_attributes_relations_folder(tmp_path / "data")


def test_a_run_on_pixels_decoded_ahead_scores_as_one_decoding_alone(tiny_clip_dir, dataset):
    alone = evaluate_model(str(tiny_clip_dir), str(dataset), progress=False, log=lambda m: None)
    ahead = _finished(DecodeAhead.begin(str(tiny_clip_dir), str(dataset), "test"))
    store, shared = _scored_with(ahead, tiny_clip_dir, dataset)
    assert (store.stats.from_disk, store.stats.decoded) == (DISTINCT_IMAGES, 0)
    for config, scores in _scores(alone).items():
        assert np.array_equal(_scores(shared)[config], scores)
    assert not ahead.directory.exists()


def test_pixels_that_differ_from_the_processors_are_never_used(tiny_clip_dir, dataset):
    """Entries with valid digests but other pixels (as a processor restated wrongly would make) fail the
    comparison with the run's own processor: every image is decoded by the run, scores unchanged."""
    alone = evaluate_model(str(tiny_clip_dir), str(dataset), progress=False, log=lambda m: None)
    ahead = _finished(DecodeAhead.begin(str(tiny_clip_dir), str(dataset), "test"))
    entries = sorted((ahead.directory / AHEAD_KEY[:32]).glob("*.npy"))
    assert len(entries) == DISTINCT_IMAGES
    for path in entries:
        pixels = read_entry(path, AHEAD_KEY, path.stem, None)
        write_entry(path, AHEAD_KEY, path.stem, pixels + np.float32(1e-3))
    store, shared = _scored_with(ahead, tiny_clip_dir, dataset)
    assert (store.stats.from_disk, store.stats.decoded) == (0, DISTINCT_IMAGES)
    assert set(store.equal.values()) == {False}
    for config, scores in _scores(alone).items():
        assert np.array_equal(_scores(shared)[config], scores)


def _eval_args(*extra: str):
    argv = ["eval", "--model", "m", "--dataset", ".", *extra]
    return build_parser(argv).parse_known_args(argv)[0]


@pytest.mark.parametrize(
    "extra",
    [
        ["--no-decode-ahead"],
        ["--max-rows", "2"],
        ["--protocol", "paper"],
        ["--image-backend", "paper"],
        ["--pixel-cache", "cache"],
        ["--models", "table8"],
    ],
)
def test_taken_only_where_it_cannot_change_or_slow_a_run(tmp_path, monkeypatch, tiny_clip_dir, extra):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "torch")  # as in a fresh `hardpos eval` process, before its imports
    args = _eval_args(*extra)
    args.model = [str(tiny_clip_dir)]
    assert wanted(args) is None
    args = _eval_args()
    args.model = [str(tiny_clip_dir)]
    assert wanted(args) == (str(tiny_clip_dir), ".")
    args.dataset = "user/hub-dataset"  # not a local folder
    assert wanted(args) is None
    monkeypatch.setitem(sys.modules, "torch", torch)  # a process that has imported torch may run threads
    assert wanted(_eval_args()) is None


def test_the_command_scores_as_without_it_and_leaves_nothing_behind(tmp_path, tiny_clip_dir, dataset):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    outputs = {}
    for name, extra in (("with", []), ("without", ["--no-decode-ahead"])):
        command = [sys.executable, "-m", "hf_hardpos", "eval", "--model", str(tiny_clip_dir), "--dataset"]
        command += [
            str(dataset),
            "--output",
            str(tmp_path / name),
            "--device",
            "cpu",
            "--no-progress",
            *extra,
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs[name] = done.stdout
    decoded, ahead = map(
        int, re.search(r"pixels: (\d+) images decoded, (\d+) decoded ahead", outputs["with"]).groups()
    )
    assert decoded + ahead == DISTINCT_IMAGES
    assert "decoded ahead" not in outputs["without"]
    for config in ("attributes", "relations"):
        with_ahead = pd.read_parquet(tmp_path / "with" / f"scores-{config}.parquet")
        assert with_ahead.equals(pd.read_parquet(tmp_path / "without" / f"scores-{config}.parquet"))
    assert not [p for p in temporary.iterdir() if p.name.startswith(PREFIX)]


def test_the_decoder_stops_at_its_bound(tiny_clip_dir, dataset, monkeypatch):
    """The temporary folder stays bounded whatever the dataset's size (`MAX_BYTES`)."""
    from hf_hardpos.evaluation import decode_ahead

    monkeypatch.setattr(decode_ahead, "MAX_BYTES", 1)  # the forked process sees the bound set here
    ahead = _finished(DecodeAhead.begin(str(tiny_clip_dir), str(dataset), "test"))
    try:
        assert len(list((ahead.directory / AHEAD_KEY[:32]).glob("*.npy"))) == 1
    finally:
        ahead.close()
