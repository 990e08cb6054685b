"""Embeddings keyed by the content of the image or text, so each is encoded once per model.

A benchmark suite shows one model the same inputs many times: SugarCrepe and SugarCrepe++ share
COCO images, REPLACE's two subsets share 8,041 images, captions repeat across configs. The scorer
looks every input up here before encoding it. In memory the cache lives as long as the scorer; with
a directory it persists across runs, in a namespace that must identify the model's content and
every setting that changes an embedding (precision, TF32, text length, device type, the image
processor's backend and pixel settings, see `image_processing`) — the caller builds it from `provenance`. Shards are written atomically (temporary file, then rename), so an
interrupted run leaves only complete shards behind; partial files never match the shard pattern,
and a shard that cannot be read is removed with a warning and its inputs encoded again.
"""

from __future__ import annotations

import hashlib
import re
import uuid
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .output_folder import atomic_path

KINDS = ("image", "text")
# A complete shard; partial files are hidden `.<kind>-<id>.tmp-<id>.npz` (`output_folder.temporary_path`),
# and an older version's `<kind>-<id>.tmp.npz` partials do not match either.
SHARD_NAME = re.compile(r"(image|text)-[0-9a-f]{32}\.npz")


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
                    if SHARD_NAME.fullmatch(shard.name):  # not a partial file of an interrupted run
                        self._load_shard(kind, shard)

    def _load_shard(self, kind: str, shard: Path) -> None:
        """Load one shard; an unreadable one is removed with a warning, and its inputs encoded again."""
        try:
            with np.load(shard) as data:
                entries = dict(zip(data["keys"].tolist(), data["embeddings"]))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
            warnings.warn(f"embedding cache: {shard} is unreadable ({type(err).__name__}); removed, its inputs will "
                          "be encoded again", stacklevel=3)
            shard.unlink(missing_ok=True)
            return
        self._store[kind].update(entries)

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
            with atomic_path(self.directory / f"{kind}-{uuid.uuid4().hex}.npz") as partial:
                with open(partial, "wb") as handle:  # a file object: np.savez would append ".npz" to a name
                    np.savez(handle, keys=np.asarray(list(keys)), embeddings=array)
