"""What a number was computed from: the model's and the dataset's content, and the environment.

Resumed evaluations reuse saved scores only when these identities match, so a figure can never
come from stale inputs: a model folder whose weights were replaced, a dataset folder rebuilt in
place, or two folders that share a name. Local files are identified by their bytes (sha256), Hub
repositories by their commit; an in-memory `datasets.Dataset` by its fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Files whose bytes decide a model's outputs (weights, configs, tokenizer, preprocessing).
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".json", ".txt", ".model")


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_files(paths: Iterable[str | Path], root: str | Path | None = None) -> str:
    """One digest over several files: their paths (relative to `root`) and contents, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        name = str(path.relative_to(root)) if root is not None else path.name
        digest.update(name.encode() + b"\0" + sha256_file(path).encode() + b"\0")
    return digest.hexdigest()


def digest_of(value: Any) -> str:
    """A short stable digest of a JSON-able value (used as a resume key)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def hub_revision(repo_id: str, repo_type: str = "model") -> str | None:
    """The commit a Hub repo id resolves to: asked of the Hub, else read from the local cache, else None.

    None means "unknown" (offline and never downloaded): callers then treat the inputs as changed.
    """
    from huggingface_hub import HfApi, snapshot_download

    try:
        info = HfApi().repo_info(repo_id, repo_type=repo_type)
        return info.sha
    except Exception:  # offline, gated, or no such repo: fall back to the cache
        pass
    try:
        return Path(snapshot_download(repo_id, repo_type=repo_type, local_files_only=True)).name
    except Exception:
        return None


def model_identity(name_or_path: str) -> dict[str, Any]:
    """A local model folder by the sha256 of its files; a Hub id by its commit."""
    path = Path(name_or_path)
    if path.is_dir():
        files = [f for f in path.rglob("*") if f.is_file() and f.suffix in MODEL_FILE_SUFFIXES]
        return {"path": str(path.resolve()), "sha256": sha256_files(files, root=path)}
    return {"hub_id": name_or_path, "revision": hub_revision(name_or_path, "model")}


def environment() -> dict[str, str]:
    """Versions of everything a score depends on numerically."""
    import datasets
    import torch
    import transformers

    from . import __version__

    return {
        "hf_hardpos": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "datasets": datasets.__version__,
        "python": platform.python_version(),
    }
