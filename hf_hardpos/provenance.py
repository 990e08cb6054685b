"""What a number was computed from: the model's and the dataset's content, and the environment.

Resumed evaluations reuse saved scores only when these identities match, so a figure can never
come from stale inputs: a model folder whose weights were replaced, a dataset folder rebuilt in
place, or two folders that share a name. Local files are identified by their bytes (sha256), Hub
repositories by their commit; an in-memory `datasets.Dataset` by its fingerprint.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

# Files whose bytes decide a model's outputs (weights, configs, tokenizer, preprocessing).
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".json", ".txt", ".model")


# sha256 per file, keyed by what `stat` says about it: a suite identifies the same model (hundreds of
# MB) once per dataset and a checkpoint is hashed by the conversion cache on every lookup; a file
# rewritten in place changes its size, mtime or inode and is hashed again.
_FILE_DIGESTS: dict[tuple, str] = {}


def sha256_file(path: str | Path, progress: bool = False, chunk_size: int = 1 << 22) -> str:
    """SHA-256 of a file, read in chunks; computed once per process while the file is unchanged."""
    path = Path(path)
    info = path.stat()
    # ctime too: `cp -p` / `rsync -a` / `os.utime` restore mtime after rewriting a file, but any write
    # or metadata change moves ctime, which no user call can set back.
    key = (str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    if key in _FILE_DIGESTS:
        return _FILE_DIGESTS[key]
    digest = hashlib.sha256()
    with (
        open(path, "rb") as handle,
        tqdm(
            total=info.st_size, unit="B", unit_scale=True, desc=f"sha256 {path.name}", disable=not progress
        ) as bar,
    ):
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
            bar.update(len(chunk))
    _FILE_DIGESTS[key] = digest.hexdigest()
    return _FILE_DIGESTS[key]


def sha256_files(
    paths: Iterable[str | Path],
    root: str | Path | None = None,
    file_digest: Callable[[Path], str] = sha256_file,
) -> str:
    """One digest over several files: their paths (relative to `root`) and contents, in sorted order.

    `file_digest` gives one file's sha256 (e.g. from a cache that outlives the process)."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        name = str(path.relative_to(root)) if root is not None else path.name
        digest.update(name.encode() + b"\0" + file_digest(path).encode() + b"\0")
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


def looks_like_hub_id(name: str | None) -> bool:
    """True for "org/name" or "name" that is not an existing local path."""
    if not name or Path(name).exists():
        return False
    return re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", name) is not None


def looks_like_path(name: str) -> bool:
    """A name meant as a local path: refused as "not found" when missing, at once, rather than passed on to
    the Hub (whose retries take half a minute and end by suggesting a download). Local are "/x", "./x",
    "~/x", "a/b/c", a name ending in a file suffix ("x.parquet"), "a/b" where the folder "a" exists here
    (`runs/hpn` beside `runs/`), and a bare name close to a folder that exists here (`my-evalset` beside
    `my_evalset/`). A Hub id "owner/name" whose owner is no local folder stays a Hub id."""
    import difflib

    if name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1:
        return True
    if Path(name).suffix.lower() in _FILE_SUFFIXES:
        return True
    head, _, tail = name.partition("/")
    if tail:
        return Path(head).is_dir()
    here = [p.name for p in Path(".").iterdir() if p.is_dir()] if Path(".").is_dir() else []
    return bool(difflib.get_close_matches(name, here, n=1, cutoff=0.8))


def local_folder_note(name: str) -> str:
    """Whether a local folder of that name exists: what a person who meant one needs to know when loading
    a Hub id failed (issue: a mistyped folder name ended in "Couldn't reach ... on the Hub" alone)."""
    if Path(name).expanduser().is_dir():
        return f"a local folder {name} exists here (is it complete?)"
    return f"no local folder {name} exists here either"


# Suffixes of files (tables, archives, weights, configs) that no Hub repository name ends in.
_FILE_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".parquet", ".arrow", ".txt", ".tar", ".zip",
                  ".gz", ".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".png", ".jpg", ".jpeg")  # fmt: skip


def model_identity(name_or_path: str) -> dict[str, Any]:
    """A local model folder by the sha256 of its files; a Hub id by its commit (what a family that loads
    folders and Hub ids adds its own facts to: `backends.hf`)."""
    path = Path(name_or_path)
    if path.is_dir():
        files = [f for f in path.rglob("*") if f.is_file() and f.suffix in MODEL_FILE_SUFFIXES]
        return {"path": str(path.resolve()), "sha256": sha256_files(files, root=path)}
    return {"hub_id": name_or_path, "revision": hub_revision(name_or_path, "model")}


# The libraries every score depends on numerically; `versions()` adds any others a record needs.
SCORE_PACKAGES = ("hf_hardpos", "torch", "transformers", "datasets")


def versions(*packages: str) -> dict[str, str]:
    """The installed version of each distribution named (`SCORE_PACKAGES` first), read from its metadata.

    The one record of versions: evaluation results, model cards, dataset cards, the demo and the pixel
    store all take theirs from here. A package that is not installed is left out, not guessed.
    """
    return {
        name: found
        for name in dict.fromkeys((*SCORE_PACKAGES, *packages))
        if (found := _installed_version(name)) is not None
    }


@functools.cache
def _installed_version(name: str) -> str | None:
    """Read once per process: each read scans every `site-packages` entry (5 ms here; a run records the
    versions with every model and every pixel setting), and a package upgraded on disk while a process
    runs has not changed the code that process imported."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def environment(*packages: str) -> dict[str, str]:
    """`versions(*packages)` and the Python version: what a saved result records of its environment."""
    return {**versions(*packages), "python": platform.python_version()}
