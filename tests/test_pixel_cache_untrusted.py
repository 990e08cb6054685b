"""A `--pixel-cache` folder is untrusted: it may make a run slower, never different (`pixel_store`).

Swapped entries, zeros, float64 copies, truncated or wrong-shape files are rejected, decoded again,
rewritten and counted (in `metrics.json` too); a full disk turns writing off with one warning.
"""

import errno
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.cli import main
from hf_hardpos.pixel_store import PixelStore, SharedPixelScorer
from hf_hardpos.scoring import ITMScorer
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import make_eval_set, write_hub_folder


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("models") / "a", seed=1)


def _scorer(folder, cls=ITMScorer, **kwargs):
    return cls(
        CLIPModel.from_pretrained(folder),
        CLIPProcessor.from_pretrained(folder),
        batch_size=3,
        progress=False,
        **kwargs,
    )


def _entries(store: PixelStore) -> list:
    return sorted(store.directory.glob("*/*.npy"))


def _swap(a, b) -> None:
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(b_bytes)
    b.write_bytes(a_bytes)


def test_swapped_and_corrupted_entries_are_rejected_decoded_again_and_rewritten(model, tmp_path):
    dataset = make_eval_set(num_images=6, rows_per_image=1, seed=3)
    alone = _scorer(model).embed_images(dataset)[0]
    first = PixelStore(tmp_path / "pixels")
    _scorer(model, SharedPixelScorer, pixels=first).embed_images(dataset)
    files = _entries(first)
    assert len(files) == 6
    reference = np.load(files[2])
    _swap(files[0], files[1])  # both still valid .npy files of the right shape and dtype
    np.save(files[2], np.zeros_like(reference))  # a plain .npy of zeros
    with open(files[3], "wb") as handle:
        np.save(handle, reference.astype(np.float64))  # same values, another dtype
    files[4].write_bytes(b"")  # empty
    later = PixelStore(tmp_path / "pixels")
    got = _scorer(model, SharedPixelScorer, pixels=later).embed_images(dataset)[0]
    assert torch.equal(got, alone)
    assert (later.stats.rejected, later.stats.rewritten, later.stats.from_disk) == (5, 5, 1)
    clean = PixelStore(tmp_path / "pixels")  # the rewritten entries now pass
    assert torch.equal(_scorer(model, SharedPixelScorer, pixels=clean).embed_images(dataset)[0], alone)
    assert (clean.stats.rejected, clean.stats.from_disk, clean.stats.decoded) == (0, 6, 0)


def test_a_crafted_header_is_rejected_before_its_data_is_read(model, tmp_path):
    dataset = make_eval_set(num_images=2, rows_per_image=1, seed=4)
    store = PixelStore(tmp_path / "pixels")
    _scorer(model, SharedPixelScorer, pixels=store).embed_images(dataset)
    target = _entries(store)[0]
    with open(target, "wb") as handle:  # declares 3 x 10^5 x 10^5 float32 (120 GB), holds nothing
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": (3, 100_000, 100_000)}
        )
    reread = PixelStore(tmp_path / "pixels")
    _scorer(model, SharedPixelScorer, pixels=reread).embed_images(dataset)
    assert (reread.stats.rejected, reread.stats.rewritten) == (1, 1)


def test_a_full_disk_turns_writing_off_with_one_warning(model, tmp_path, monkeypatch):
    dataset = make_eval_set(num_images=5, rows_per_image=1, seed=5)
    alone = _scorer(model).embed_images(dataset)[0]

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    warnings: list[str] = []
    store = PixelStore(tmp_path / "pixels", warn=warnings.append)
    assert torch.equal(_scorer(model, SharedPixelScorer, pixels=store).embed_images(dataset)[0], alone)
    assert len(warnings) == 1 and "No space left on device" in warnings[0]
    assert (store.stats.written, store.stats.not_written_failed, store.stats.decoded) == (0, 5, 5)
    assert _entries(store) == []  # no partial file left behind


def _eval(*args) -> int:
    return main(["eval", *args, "--batch-size", "3", "--no-progress"])


def test_metrics_json_says_where_pixels_came_from_and_swaps_change_nothing(model, tmp_path):
    hub = write_hub_folder(
        tmp_path / "repo", {"attributes": make_eval_set(num_images=6, rows_per_image=2, seed=1)}
    )
    cache = tmp_path / "pixels"
    assert _eval("--model", str(model), "--dataset", str(hub), "--output", str(tmp_path / "plain")) == 0
    assert (
        _eval(
            "--model",
            str(model),
            "--dataset",
            str(hub),
            "--output",
            str(tmp_path / "first"),
            "--pixel-cache",
            str(cache),
        )
        == 0
    )
    files = sorted(cache.glob("*/*.npy"))
    _swap(files[0], files[1])
    assert (
        _eval(
            "--model",
            str(model),
            "--dataset",
            str(hub),
            "--output",
            str(tmp_path / "swapped"),
            "--pixel-cache",
            str(cache),
        )
        == 0
    )
    plain, first, swapped = (
        json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("plain", "first", "swapped")
    )
    assert "pixels" not in plain["provenance"]["attributes"]
    assert first["provenance"]["attributes"]["pixels"]["pixel_cache"] == str(cache)
    assert (
        first["provenance"]["attributes"]["pixels"]["decoded"],
        first["provenance"]["attributes"]["pixels"]["written"],
    ) == (6, 6)
    counts = swapped["provenance"]["attributes"]["pixels"]
    assert (counts["from_disk"], counts["rejected"], counts["rewritten"], counts["decoded"]) == (4, 2, 2, 2)
    assert swapped["results"] == plain["results"]
    assert pq.read_table(tmp_path / "swapped" / "scores-attributes.parquet").equals(
        pq.read_table(tmp_path / "plain" / "scores-attributes.parquet")
    )


@pytest.mark.parametrize("size", ["nan", "inf", "1e-12", "-1", "0"])
def test_pixel_cache_bounds_that_mean_nothing_are_refused(model, tmp_path, size, capsys):
    assert (
        _eval(
            "--model",
            str(model),
            "--dataset",
            str(tmp_path),
            "--pixel-cache",
            str(tmp_path / "p"),
            "--pixel-cache-max-gb",
            size,
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--pixel-cache-max-gb" in err


def test_an_evaluated_image_over_pils_pixel_limit_is_one_line(model, tmp_path, monkeypatch, capsys):
    hub = write_hub_folder(
        tmp_path / "repo", {"attributes": make_eval_set(num_images=2, rows_per_image=1, seed=1)}
    )
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # the 24 x 20 test images are over twice this
    capsys.readouterr()
    assert _eval("--model", str(model), "--dataset", str(hub)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot read the image of row 0" in err
