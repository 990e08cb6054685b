"""The on-disk embedding cache survives interrupted writes and unreadable shards."""

import numpy as np
import pytest
import torch

from hf_hardpos.embedding_cache import EmbeddingCache


def test_partial_and_unreadable_shards_are_skipped_and_rewritten(tmp_path):
    cache = EmbeddingCache(tmp_path, namespace="m")
    cache.add("text", ["a", "b"], torch.eye(2))
    folder = tmp_path / "m"
    (good,) = folder.glob("text-*.npz")
    # What an interrupted run of an older version left (matched the loader's glob), and a truncated shard.
    (folder / "text-0123456789abcdef0123456789abcdef.tmp.npz").write_bytes(b"PK\x03\x04 half a zip")
    broken = folder / "image-fedcba9876543210fedcba9876543210.npz"
    broken.write_bytes(good.read_bytes()[:40])
    with pytest.warns(UserWarning, match="unreadable"):
        reopened = EmbeddingCache(tmp_path, namespace="m")
    assert reopened.missing("text", ["a", "b"]) == [] and reopened.missing("image", ["x"]) == [0]
    assert torch.equal(reopened.get("text", ["b", "a"]), torch.eye(2)[[1, 0]])
    assert not broken.exists()  # removed; its inputs get encoded and written again
    reopened.add("image", ["x"], torch.ones(1, 2))
    assert EmbeddingCache(tmp_path, namespace="m").missing("image", ["x"]) == []


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
