"""The on-disk embedding cache survives interrupted writes and unreadable shards."""

import numpy as np
import pytest
import torch

from hf_hardpos.embedding_cache import EmbeddingCache


def test_partial_and_unreadable_shards_are_skipped_and_rewritten(tmp_path):
    cache = EmbeddingCache(tmp_path, namespace="m")
    cache.add("text", ["a", "b"], torch.eye(2))
    cache.add("image", ["y"], torch.eye(2)[:1])
    folder = tmp_path / "m"
    (good,) = folder.glob("image-*.npz")
    # What an interrupted run of an older version left (matched the loader's glob), and a truncated shard.
    (folder / "text-0123456789abcdef0123456789abcdef.tmp.npz").write_bytes(b"PK\x03\x04 half a zip")
    broken = folder / "image-fedcba9876543210fedcba9876543210.npz"
    broken.write_bytes(good.read_bytes()[:40])
    warnings: list[str] = []
    reopened = EmbeddingCache(tmp_path, namespace="m", warn=warnings.append)
    assert len(warnings) == 1 and "unreadable" in warnings[0]
    assert reopened.missing("text", ["a", "b"]) == [] and reopened.missing("image", ["x"]) == [0]
    assert torch.equal(reopened.get("text", ["b", "a"]), torch.eye(2)[[1, 0]])
    assert not broken.exists()  # removed; its inputs get encoded and written again
    reopened.add("image", ["x"], torch.eye(2)[1:])
    assert EmbeddingCache(tmp_path, namespace="m").missing("image", ["x"]) == []


def test_an_entry_whose_digest_ends_in_a_zero_byte_is_kept(tmp_path):
    """numpy's `S32` elements come back without trailing NUL bytes: one entry in 256 has such a digest."""
    from hf_hardpos.embedding_cache import entry_digest

    vector = torch.nn.functional.normalize(torch.arange(1.0, 9.0), dim=0).numpy()
    key = next(
        f"k{i}" for i in range(100_000) if entry_digest("model", "text", f"k{i}", vector).endswith(b"\0")
    )
    EmbeddingCache(tmp_path, "model").add(
        "text", [key, "other"], torch.from_numpy(np.stack([vector, vector]))
    )
    again = EmbeddingCache(tmp_path, "model")
    assert again.rejected == 0 and again.missing("text", [key, "other"]) == []
    torch.testing.assert_close(again.get("text", [key])[0], torch.from_numpy(vector), rtol=0, atol=0)


def test_shards_are_written_under_a_name_the_loader_never_reads_until_complete(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path, namespace="m")

    def interrupted(handle, **arrays):
        handle.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.add("text", ["a"], torch.ones(1, 2))
    monkeypatch.undo()
    assert list((tmp_path / "m").iterdir()) == []
    assert EmbeddingCache(tmp_path, namespace="m").missing("text", ["a"]) == [0]


# A `--cache-dir` folder is untrusted, like `--pixel-cache`: whatever was done to it, a run's numbers
# equal a run without it (`embedding_cache`). Each variant below is what an adversarial campaign did to
# a real cache written by `hardpos eval`; before the checks, the first three turned an orig acc of 66.7
# into 33.3 with exit 0 and the others gave a "cosine" of -368 or a traceback.

import errno  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

from hf_hardpos.cli import main  # noqa: E402
from tests.support.eval_data import make_eval_set, write_hub_folder  # noqa: E402


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return write_hub_folder(
        tmp_path_factory.mktemp("cache_hub"),
        {"attributes": make_eval_set(num_images=4, rows_per_image=2, seed=1)},
    )


def _eval(model, hub, output, *args) -> int:
    return main(
        [
            "eval",
            "--model",
            str(model),
            "--dataset",
            str(hub),
            "--output",
            str(output),
            "--batch-size",
            "3",
            "--no-progress",
            *args,
        ]
    )


@pytest.fixture(scope="module")
def fresh(tiny_clip_dir, hub, tmp_path_factory):
    """What a run without any cache gives: its results and per-row scores."""
    output = tmp_path_factory.mktemp("fresh")
    assert _eval(tiny_clip_dir, hub, output) == 0
    return _results(output)


def _results(output) -> tuple:
    metrics = json.loads((output / "metrics.json").read_text())
    return metrics["results"], pq.read_table(output / "scores-attributes.parquet").to_pydict()


def _shards(cache, kind="*") -> list:
    return sorted(cache.glob(f"*/{kind}-*.npz"))


def _rewrite(shard, change) -> None:
    with np.load(shard) as data:
        arrays = change({name: data[name] for name in data.files})
    with open(shard, "wb") as handle:
        np.savez(handle, **arrays)


def _negated(arrays):
    return {**arrays, "embeddings": -arrays["embeddings"]}


def _keys_rotated(arrays):
    return {**arrays, "keys": np.roll(arrays["keys"], 1)}


def _unnormalised(arrays):
    return {**arrays, "embeddings": arrays["embeddings"] * 100}


def _integers(arrays):
    return {**arrays, "embeddings": np.round(arrays["embeddings"] * 10).astype(np.int32)}


def _nan(arrays):
    return {**arrays, "embeddings": np.full_like(arrays["embeddings"], np.nan)}


def _short(arrays):
    return {
        **arrays,
        "embeddings": arrays["embeddings"][:, :3]
        / np.linalg.norm(arrays["embeddings"][:, :3], axis=1, keepdims=True),
    }


def _no_digests(arrays):  # what a version before the checks wrote; here with its vectors negated
    return {"keys": arrays["keys"], "embeddings": -arrays["embeddings"]}


@pytest.mark.parametrize(
    "change", [_negated, _keys_rotated, _unnormalised, _integers, _nan, _short, _no_digests]
)
def test_a_tampered_cache_gives_the_numbers_of_a_fresh_run(
    tiny_clip_dir, hub, fresh, tmp_path, change, capsys
):
    cache = tmp_path / "cache"
    assert _eval(tiny_clip_dir, hub, tmp_path / "first", "--cache-dir", str(cache)) == 0
    for shard in _shards(cache, "image"):  # images only: negating both sides would keep every cosine
        _rewrite(shard, change)
    capsys.readouterr()
    assert _eval(tiny_clip_dir, hub, tmp_path / "second", "--cache-dir", str(cache)) == 0
    assert _results(tmp_path / "second") == fresh
    assert "embedding cache" in capsys.readouterr().err
    # The rejected entries were replaced: a third run reads them all from the folder, rejecting none.
    assert _eval(tiny_clip_dir, hub, tmp_path / "third", "--cache-dir", str(cache)) == 0
    assert _results(tmp_path / "third") == fresh
    assert "embedding cache" not in capsys.readouterr().err


def test_an_extra_shard_from_another_model_or_negated_changes_nothing(tiny_clip_dir, hub, fresh, tmp_path):
    cache = tmp_path / "cache"
    assert _eval(tiny_clip_dir, hub, tmp_path / "first", "--cache-dir", str(cache)) == 0
    (image,) = _shards(cache, "image")
    extra = image.with_name("image-" + "f" * 32 + ".npz")  # a negated copy, read after the original
    shutil.copyfile(image, extra)
    _rewrite(extra, _negated)
    other = cache / ("0" * 64)  # a shard of another namespace (model or settings), valid there
    other.mkdir()
    foreign = EmbeddingCache(cache, namespace=other.name)
    with np.load(image) as data:
        foreign.add("image", data["keys"].tolist(), -torch.from_numpy(data["embeddings"]))
    (namespace,) = {shard.parent for shard in _shards(cache)} - {other}
    for shard in other.glob("*.npz"):
        shutil.copyfile(shard, namespace / shard.name)
    assert _eval(tiny_clip_dir, hub, tmp_path / "second", "--cache-dir", str(cache)) == 0
    assert _results(tmp_path / "second") == fresh


def test_cache_dir_naming_a_file_is_one_line(tiny_clip_dir, hub, tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    capsys.readouterr()
    assert _eval(tiny_clip_dir, hub, tmp_path / "out", "--cache-dir", str(tmp_path / "file")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--cache-dir" in err and str(tmp_path / "file") in err


def test_a_full_disk_turns_writing_off_with_one_warning(
    tiny_clip_dir, hub, fresh, tmp_path, monkeypatch, capsys
):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    capsys.readouterr()
    assert _eval(tiny_clip_dir, hub, tmp_path / "out", "--cache-dir", str(tmp_path / "cache")) == 0
    assert _results(tmp_path / "out") == fresh
    warnings = [line for line in capsys.readouterr().err.splitlines() if "embedding cache" in line]
    assert len(warnings) == 1 and "No space left on device" in warnings[0]
    assert _shards(tmp_path / "cache") == []
