"""Embeddings keyed by the content of the image or text, so each is encoded once per model.

A benchmark suite shows one model the same inputs many times: SugarCrepe and SugarCrepe++ share
COCO images, REPLACE's two subsets share 8,041 images, captions repeat across configs. The scorer
looks every input up here before encoding it. In memory the cache lives as long as the scorer; with
a directory it persists across runs, in a namespace that must identify the model's content and
every setting that changes an embedding (precision, TF32, text length, device type) — the caller
builds it from `provenance`. Shards are written atomically (temporary file, then rename), so an
interrupted run leaves only complete shards behind.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

KINDS = ("image", "text")


def token_key(token_ids: Sequence[int]) -> str:
    """A text's key: its token ids (what the model sees), so texts that tokenize alike share one embedding."""
    return hashlib.blake2b(np.asarray(token_ids, dtype=np.int64).tobytes(), digest_size=16).hexdigest()


class EmbeddingCache:
    """Content key -> L2-normalised float32 embedding, for images and texts."""

    def __init__(self, directory: str | Path | None = None, namespace: str = "default"):
        self.directory = Path(directory) / namespace if directory is not None else None
        self._store: dict[str, dict[str, np.ndarray]] = {kind: {} for kind in KINDS}
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            for kind in KINDS:
                for shard in sorted(self.directory.glob(f"{kind}-*.npz")):
                    with np.load(shard) as data:
                        self._store[kind].update(zip(data["keys"].tolist(), data["embeddings"]))

    def __len__(self) -> int:
        return sum(len(store) for store in self._store.values())

    def missing(self, kind: str, keys: Sequence[str]) -> list[int]:
        """Positions in `keys` that have no embedding yet."""
        store = self._store[kind]
        return [i for i, key in enumerate(keys) if key not in store]

    def get(self, kind: str, keys: Sequence[str]) -> torch.Tensor:
        store = self._store[kind]
        return torch.from_numpy(np.stack([store[key] for key in keys]))

    def add(self, kind: str, keys: Sequence[str], embeddings: torch.Tensor) -> None:
        if not len(keys):
            return
        array = embeddings.detach().cpu().float().numpy()
        self._store[kind].update(zip(keys, array))
        if self.directory is not None:
            final = self.directory / f"{kind}-{uuid.uuid4().hex}.npz"
            partial = final.with_name(final.stem + ".tmp.npz")
            np.savez(partial, keys=np.asarray(list(keys)), embeddings=array)
            os.replace(partial, final)
