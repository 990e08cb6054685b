"""What the models of one `hardpos eval --model A --model B ...` run compute alike, computed once.

Why: every model of a sweep reads the same rows, so each used to load and hash the same eval sets, key
the same images by content, collect the same caption slots and, when it shares a tokenizer with an
earlier model, tokenise the same texts again: with small models, or on a GPU, that repeated work cost
several times a model's forward passes (benchmarks/eval_floor.py: "each extra model"). Inside
`sharing()` (the multi-model run holds it) each result is computed by the first model that needs it
and handed to the others; outside it, `remembered` just computes.

What is remembered is keyed so that it can only be reused for the same input: a dataset *object* (its
`id`, the object kept alive by the entry, so the id cannot be recycled while the block lasts; a
`Dataset`'s fingerprint is not unique enough, see `image_keys.distinct_images`), a tokenizer by the
digest of its serialised state, an eval set by the name it was loaded under within this one run.
Values are handed out as they are: callers never modify them.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: ContextVar[dict[tuple, tuple[Any, Any]] | None] = ContextVar("hardpos_run_memo", default=None)


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """For the block: `remembered` results are kept and reused (nested blocks share the outer one's)."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def remembered(kind: str, key: Hashable, compute: Callable[[], T], keep: Any = None) -> T:
    """`compute()`, or inside `sharing()` its result for the same (`kind`, `key`) computed earlier.

    `keep`: the object whose `id` is part of `key`, held by the entry so the id stays its own. A `key`
    of None means "cannot be told apart": computed, never remembered. An exception is never remembered.
    """
    memo = _MEMO.get()
    if memo is None or key is None:
        return compute()
    entry = memo.get((kind, key))
    if entry is None:
        entry = memo[(kind, key)] = (compute(), keep)
    return entry[0]


def tokenizer_key(tokenizer) -> str | None:
    """A digest of everything a fast (Rust) tokenizer's ids depend on (its serialised normaliser, model,
    added and special tokens, post-processor) and its class; None for any other tokenizer, whose texts are
    then tokenised per model."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    to_str = getattr(backend, "to_str", None)
    if to_str is None:
        return None
    side = str(getattr(tokenizer, "truncation_side", "right"))  # which end `truncation=True` cuts
    digest = hashlib.sha256(f"{type(tokenizer).__qualname__}\0{side}\0".encode() + to_str().encode())
    return digest.hexdigest()
