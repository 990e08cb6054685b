"""Loading a generator's model and tokenizer (Hub id or local folder) with a one-line error.

Why: `from_pretrained` on a missing folder says "Repo id must be in the form ...", and offline it
says nothing about the cache; the generators share this loader so that both the LLM and the
masked-LM path say "not found" or "cannot load ... as a Hub id / local folder" instead.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer

from hf_hardpos.errors import UserInputError, first_line
from hf_hardpos.provenance import looks_like_path


def require_model_exists(name: str) -> None:
    """Refuse a path-like name ("./x", "/x", "~/x", "a/b/c") that is not a folder: "not found", not a Hub error."""
    if looks_like_path(name) and not Path(name).expanduser().exists():
        raise UserInputError(f"model not found: {name} (no such folder)")


def load_model_and_tokenizer(
    auto_class, name_or_path: str | Path, *, device: str | torch.device | None, dtype: str | torch.dtype, **kwargs
):
    """`auto_class.from_pretrained` + `AutoTokenizer`, on `device` (default: cuda when available).

    With `device_map` in `kwargs` the model is placed by accelerate and `device` is ignored.
    """
    name = str(name_or_path)
    path = Path(name).expanduser()
    require_model_exists(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = auto_class.from_pretrained(name, dtype=dtype, **kwargs)
    except (OSError, ValueError, KeyError) as error:
        where = "local folder" if path.exists() else "Hub id (offline: it must be in the local cache)"
        raise UserInputError(f"cannot load {auto_class.__name__} {name!r} as a {where}: {first_line(error)}") from None
    if "device_map" not in kwargs:
        model = model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return model, tokenizer


def model_fingerprint(model_or_name: object) -> dict:
    """What a generation output's manifest records to tell two models apart: a local folder by the
    sha256 of its weights, config and tokenizer files, a Hub id by its resolved commit.

    Why: the name alone lets a resume mix two models in one file (another model saved at the same
    folder, or a new revision of the same Hub id). Takes a loaded model (its `name_or_path`, and the
    commit transformers resolved it to) or a name before loading.
    """
    from hf_hardpos.provenance import hub_revision, model_identity

    name = str(getattr(model_or_name, "name_or_path", model_or_name) or "")
    if not name:
        return {"in_memory": True}  # built in code: nothing on disk to identify
    require_model_exists(name)
    if Path(name).expanduser().is_dir():
        return {"sha256": model_identity(str(Path(name).expanduser()))["sha256"]}
    commit = getattr(getattr(model_or_name, "config", None), "_commit_hash", None)
    return {"hub_id": name, "revision": commit or hub_revision(name)}
