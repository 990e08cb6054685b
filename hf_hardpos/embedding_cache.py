"""Embeddings keyed by the content of the image or text, so each is encoded once per model.

A benchmark suite shows one model the same inputs many times: SugarCrepe and SugarCrepe++ share
COCO images, REPLACE's two subsets share 8,041 images, captions repeat across configs. The scorer
looks every input up here before encoding it. In memory the cache lives as long as the scorer; with
a directory it persists across runs, in a namespace that must identify the model's content and
every setting that changes an embedding (precision, TF32, text length, device type, the image
processor's backend and pixel settings, see `image_processing`) — the caller builds it from `provenance`. Shards are written atomically (temporary file, then rename), so an
interrupted run leaves only complete shards behind; partial files never match the shard pattern.

The folder is untrusted (shared, copied, edited, on a disk that fills up), like the pixel cache's
(`pixel_store`): it can make a run faster, never different. Each entry of a shard carries the SHA-256
digest of (namespace, kind, key, dtype, shape, vector bytes), so a vector moved to another key (keys
rotated), negated or edited, or a shard copied from another model's namespace, no longer matches.
Before an entry is used it must also be what the scorer produces: a float32 vector of the namespace's
one dimension, finite, of unit L2 norm. An entry that fails any check is not used: its input is
encoded again, the shard is rewritten without it (or removed, when nothing in it passes, as is an
unreadable shard), and one warning counts them. The digest catches accidents and careless edits,
not a forger who recomputes it: whoever can write the folder chooses the vectors, as whoever can
write the dataset chooses the images. A failed write (disk full, read-only folder) turns writing off
for the rest of the run with one warning; scoring goes on from memory.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from .errors import UserInputError, warn
from .output_folder import atomic_path

KINDS = ("image", "text")
# A complete shard; partial files are hidden `.<kind>-<id>.tmp-<id>.npz` (`output_folder.temporary_path`),
# and an older version's `<kind>-<id>.tmp.npz` partials do not match either.
SHARD_NAME = re.compile(r"(image|text)-[0-9a-f]{32}\.npz")
VECTOR_DTYPE = np.dtype("<f4")  # what the scorer stores, and all an entry may hold
DIGEST_BYTES = 32
# A stored vector's norm may differ from 1 by float32 rounding of `normalize` (~1e-7 per component
# summed); anything further was not written by the scorer.
NORM_TOLERANCE = 1e-4


def token_key(token_ids: Sequence[int]) -> str:
    """A text's key: its token ids (what the model sees), so texts that tokenize alike share one embedding."""
    return hashlib.blake2b(np.asarray(token_ids, dtype=np.int64).tobytes(), digest_size=16).hexdigest()


def entry_digest(namespace: str, kind: str, key: str, vector: np.ndarray) -> bytes:
    """Binds a vector to the model and settings (the namespace), the kind and the key it is stored under."""
    digest = hashlib.sha256(f"{namespace}\0{kind}\0{key}\0{vector.dtype.str}\0{vector.shape}\0".encode())
    digest.update(memoryview(np.ascontiguousarray(vector)).cast("B"))
    return digest.digest()


class EmbeddingCache:
    """Content key -> L2-normalised float32 embedding, for images and texts."""

    def __init__(
        self,
        directory: str | Path | None = None,
        namespace: str = "default",
        warn: Callable[[str], None] = warn,
    ):
        self.directory = Path(directory) / namespace if directory is not None else None
        self.namespace = namespace
        self.warn = warn
        self.write_error: str | None = None  # set by the first failed write: no more writes this run
        self.rejected = 0  # stored entries that failed a check (their inputs are encoded again)
        self.dim: int | None = None  # every vector of a namespace has the model's one dimension
        self._store: dict[str, dict[str, np.ndarray]] = {kind: {} for kind in KINDS}
        if self.directory is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            shards = {kind: sorted(self.directory.glob(f"{kind}-*.npz")) for kind in KINDS}
        except OSError as err:
            raise UserInputError(
                f"--cache-dir {directory}: cannot use it as the embedding cache folder "
                f"({err.strerror or err})"
            ) from None
        for kind in KINDS:
            for shard in shards[kind]:
                if SHARD_NAME.fullmatch(shard.name):  # not a partial file of an interrupted run
                    self._load_shard(kind, shard)
        if self.rejected:
            self.warn(
                f"embedding cache {self.directory}: {self.rejected} stored embeddings failed their checks "
                "(digest, dtype, dimension, finite, unit norm); not used, their inputs are encoded again"
            )

    def _load_shard(self, kind: str, shard: Path) -> None:
        """Load one shard's entries that pass every check; rewrite it without the others (remove it when
        none passes or it cannot be read at all)."""
        try:
            with np.load(shard, allow_pickle=False) as data:
                keys, vectors, digests = data["keys"], data["embeddings"], data["digests"]
            if (
                keys.ndim != 1
                or digests.shape != (len(keys),)
                or digests.dtype != f"S{DIGEST_BYTES}"
                or vectors.ndim != 2
                or len(vectors) != len(keys)
            ):
                raise ValueError("arrays of the wrong shape")
            keys = [str(key) for key in keys.tolist()]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
            self.warn(
                f"embedding cache: {shard} is unreadable ({type(err).__name__}: {err}); removed, its inputs "
                "will be encoded again"
            )
            shard.unlink(missing_ok=True)
            return
        good = [i for i in range(len(keys)) if self._valid(kind, keys[i], vectors[i], digests[i])]
        self._store[kind].update((keys[i], vectors[i]) for i in good)
        if len(good) < len(keys):
            self.rejected += len(keys) - len(good)
            shard.unlink(missing_ok=True)
            if good:
                self._write(kind, [keys[i] for i in good], vectors[good])

    def _valid(self, kind: str, key: str, vector: np.ndarray, digest: bytes) -> bool:
        if vector.dtype != VECTOR_DTYPE or (self.dim is not None and vector.shape != (self.dim,)):
            return False
        if (
            not np.isfinite(vector).all()
            or abs(math.sqrt(float(np.dot(vector, vector))) - 1) > NORM_TOLERANCE
        ):
            return False
        # numpy's fixed-width bytes drop trailing NUL bytes when an element is read: a digest ending in 0x00
        # (one in 256) comes back short, and would be taken for a tampered entry.
        if bytes(digest).ljust(DIGEST_BYTES, b"\0") != entry_digest(self.namespace, kind, key, vector):
            return False
        self.dim = len(vector)
        return True

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
        array = np.ascontiguousarray(embeddings.detach().cpu().float().numpy(), dtype=VECTOR_DTYPE)
        if self.dim is not None and array.shape[1:] != (self.dim,):
            raise ValueError(
                f"embeddings of dimension {array.shape[1:]} added to a cache of dimension {self.dim}"
            )
        self.dim = array.shape[1]
        self._store[kind].update(zip(keys, array))
        if self.directory is not None and self.write_error is None:
            self._write(kind, list(keys), array)

    def _write(self, kind: str, keys: list[str], array: np.ndarray) -> None:
        assert self.directory is not None
        digests = np.asarray(
            [entry_digest(self.namespace, kind, key, vector) for key, vector in zip(keys, array)],
            dtype=f"S{DIGEST_BYTES}",
        )
        try:
            with atomic_path(self.directory / f"{kind}-{uuid.uuid4().hex}.npz") as partial:
                with open(partial, "wb") as handle:  # a file object: np.savez would append ".npz" to a name
                    np.savez(handle, keys=np.asarray(keys), embeddings=array, digests=digests)
        except OSError as err:  # the folder is optional: a full or read-only disk must not stop the run
            self.write_error = err.strerror or str(err)
            self.warn(
                f"embedding cache {self.directory}: cannot write ({self.write_error}); no more embeddings are "
                "written to it this run (scores are unaffected)"
            )
