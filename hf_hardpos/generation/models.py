"""Loading a generator's model and tokenizer (Hub id or local folder) with a one-line error.

Why: `from_pretrained` on a missing folder says "Repo id must be in the form ...", and offline it
says nothing about the cache; the generators share this loader so that both the LLM and the
masked-LM path say "not found" or "cannot load ... as a Hub id / local folder" instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer

from hf_hardpos import output_folder
from hf_hardpos.errors import UserInputError, first_line
from hf_hardpos.model_checks import refuse_remote_code
from hf_hardpos.provenance import looks_like_path


def require_model_exists(name: str) -> None:
    """Refuse a path-like name ("./x", "/x", "~/x", "a/b/c") that is not a folder: "not found", not a Hub error."""
    if looks_like_path(name) and not Path(name).expanduser().exists():
        raise UserInputError(f"model not found: {name} (no such folder)")


def load_model_and_tokenizer(
    auto_class,
    name_or_path: str | Path,
    *,
    device: str | torch.device | None,
    dtype: str | torch.dtype,
    **kwargs,
):
    """`auto_class.from_pretrained` + `AutoTokenizer`, on `device` (default: cuda when available).

    With `device_map` in `kwargs` the model is placed by accelerate and `device` is ignored.
    """
    name = str(name_or_path)
    path = Path(name).expanduser()
    require_model_exists(name)
    refuse_remote_code(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=False)
        model = auto_class.from_pretrained(name, dtype=dtype, trust_remote_code=False, **kwargs)
    except (OSError, ValueError, KeyError) as error:
        where = "local folder" if path.exists() else "Hub id (offline: it must be in the local cache)"
        raise UserInputError(
            f"cannot load {auto_class.__name__} {name!r} as a {where}: {first_line(error)}"
        ) from None
    if "device_map" not in kwargs:
        model = model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return model, tokenizer


def weight_digest_cache() -> Path:
    """`$HARDPOS_WEIGHT_DIGESTS`, else `<HF_HOME>/hf_hardpos/weight-digests.json`: one file's sha256 per
    (resolved path, size, mtime), shared by every run on this machine."""
    if os.environ.get("HARDPOS_WEIGHT_DIGESTS"):
        return Path(os.environ["HARDPOS_WEIGHT_DIGESTS"])
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "hf_hardpos" / "weight-digests.json"


class CachedFileDigests:
    """sha256 of model files, computed once per file and kept on disk keyed by (path, size, mtime).

    Why: a local Llama-2-70B is ~138 GB; every process start, rank and resume identified it by hashing
    all of it again (minutes per process, with nothing printed). A file whose size or mtime changed
    is hashed again; `verify=True` (`--verify-weights`) hashes every file whatever the cache says and
    refuses a file whose digest differs from the cached one (rewritten in place with its old size and
    mtime). Each file hashed prints a progress bar (to stderr) when `progress`.
    """

    def __init__(
        self, cache_file: Path | None = None, *, verify: bool = False, progress: bool = False
    ) -> None:
        self.cache_file = cache_file or weight_digest_cache()
        self.verify = verify
        self.progress = progress

    def _load(self) -> dict:
        try:
            data = json.loads(self.cache_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # no cache yet, or unreadable: hash again (the cache is never trusted for more)
        return data if isinstance(data, dict) else {}

    def __call__(self, path: Path) -> str:
        from filelock import FileLock

        from hf_hardpos.provenance import sha256_file

        info = path.stat()
        key = f"{path.resolve()}\0{info.st_size}\0{info.st_mtime_ns}"
        cached = self._load().get(key)
        if cached is not None and not self.verify:
            return cached
        if self.progress:
            print(
                f"hashing {path} ({info.st_size / 1e9:.2f} GB) to identify the model",
                file=sys.stderr,
                flush=True,
            )
        digest = sha256_file(path, progress=self.progress)
        if cached is not None and cached != digest:
            raise UserInputError(
                f"{path}: sha256 {digest[:12]}... but {self.cache_file} recorded {cached[:12]}... for the same size "
                "and mtime: the file was rewritten in place; check the model folder"
            )
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.cache_file) + ".lock"):
            entries = self._load()
            entries[key] = digest
            output_folder.write_text(self.cache_file, json.dumps(entries, indent=1, sort_keys=True) + "\n")
        return digest


def model_fingerprint(model_or_name: object, *, verify: bool = False, progress: bool = False) -> dict:
    """What a generation output's manifest records to tell two models apart: a local folder by the
    sha256 of its weights, config and tokenizer files, a Hub id by its resolved commit.

    Why: the name alone lets a resume mix two models in one file (another model saved at the same
    folder, or a new revision of the same Hub id). Takes a loaded model (its `name_or_path`, and the
    commit transformers resolved it to) or a name before loading. A folder's files are hashed once
    per (path, size, mtime) on this machine (`CachedFileDigests`; `verify=True` hashes them again).
    """
    from hf_hardpos.provenance import MODEL_FILE_SUFFIXES, hub_revision, sha256_files

    name = str(getattr(model_or_name, "name_or_path", model_or_name) or "")
    if not name:
        return {"in_memory": True}  # built in code: nothing on disk to identify
    require_model_exists(name)
    folder = Path(name).expanduser()
    if folder.is_dir():
        files = [f for f in folder.rglob("*") if f.is_file() and f.suffix in MODEL_FILE_SUFFIXES]
        digests = CachedFileDigests(verify=verify, progress=progress)
        return {"sha256": sha256_files(files, root=folder, file_digest=digests)}
    commit = getattr(getattr(model_or_name, "config", None), "_commit_hash", None)
    return {"hub_id": name, "revision": commit or hub_revision(name)}
