"""The CLIP BPE tokenizer for a converted model, offline when need be.

open_clip and OpenAI use one BPE (49,408 tokens). The converted folder needs it as a
`CLIPTokenizer` whose `model_max_length` is the model's context length (saved without it, a
tokenizer never truncates) and whose special-token ids agree with the model config. Sources, in
order: `--tokenizer` (a folder, or a Hub id), else `openai/clip-vit-base-patch32` from the Hub
cache, else the vocabulary file an importable open_clip ships (`bpe_simple_vocab_16e6.txt.gz`).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from ..errors import UserInputError

DEFAULT_TOKENIZER = "openai/clip-vit-base-patch32"
_OPEN_CLIP_MERGES = 49152 - 256 - 2  # open_clip's SimpleTokenizer reads merges[1 : this + 1]
_BYTE_SYMBOLS = 512  # every CLIP-format BPE holds the 256 byte symbols and their `</w>` forms


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible byte -> printable character table, in its vocabulary order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def clip_tokenizer_from_merges(merges: list[tuple[str, str]], context_length: int):
    """A `CLIPTokenizer` with OpenAI's vocabulary layout for the given merges.

    256 byte symbols, the same with `</w>`, one token per merge, then `<|startoftext|>` and
    `<|endoftext|>` — so the end-of-text token is the largest id, which open_clip's argmax pooling
    relies on. With the first k merges of CLIP's BPE this is an exact prefix of CLIP's vocabulary.
    """
    from transformers import CLIPTokenizer

    symbols = list(_bytes_to_unicode().values())
    vocab: dict[str, int] = {}
    for token in symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges]:
        vocab.setdefault(token, len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[tuple(m) for m in merges], model_max_length=context_length)


MAX_MERGES_CHARACTERS = 64 * 1024**2  # open_clip's merges: 1.4 MB of text; CLIP's merges.txt: 0.5 MB


def read_bpe_merges(path: str | Path, limit: int | None = _OPEN_CLIP_MERGES) -> list[tuple[str, str]]:
    """Merges from open_clip's `bpe_simple_vocab_16e6.txt.gz` (or a plain/gzipped HF `merges.txt`)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            text = handle.read(MAX_MERGES_CHARACTERS + 1)  # a gzip bomb stops here, not in memory
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise UserInputError(f"{path}: cannot read it as a BPE merges file ({err})") from err
    if len(text) > MAX_MERGES_CHARACTERS:
        raise UserInputError(f"{path}: more than {MAX_MERGES_CHARACTERS} characters, not a BPE merges file")
    lines = text.split("\n")
    merges = [tuple(line.split()) for line in lines[1:] if line.strip()]
    if limit is not None:
        merges = merges[:limit]
    bad = [m for m in merges if len(m) != 2]
    if bad:
        raise UserInputError(f"{path}: not a BPE merges file (line {bad[0]!r})")
    return merges  # type: ignore[return-value]


def open_clip_bpe_path() -> Path | None:
    """The BPE vocabulary file an importable open_clip ships, or None."""
    try:
        from open_clip.tokenizer import default_bpe
    except (
        Exception
    ):  # not installed, or torchvision cannot load beside this torch (docs/reference.md, Installation notes)
        return None
    path = Path(default_bpe())
    return path if path.is_file() else None


def load_clip_tokenizer(source: str | Path | None, context_length: int):
    """The tokenizer for a converted model, with `model_max_length = context_length`.

    `source` is a folder (`vocab.json` + `merges.txt`, or a saved tokenizer) or a Hub id; None means
    `openai/clip-vit-base-patch32`, falling back offline to open_clip's shipped BPE.
    """
    from transformers import CLIPTokenizer

    from ..model_checks import refuse_remote_code

    name = str(source) if source is not None else DEFAULT_TOKENIZER
    if source is not None and Path(name).exists() and not Path(name).is_dir():
        raise UserInputError(
            f"--tokenizer {name}: expected a folder with vocab.json and merges.txt, or a Hub id"
        )
    try:
        refuse_remote_code(name)
        tokenizer = CLIPTokenizer.from_pretrained(name, trust_remote_code=False)
        if len(tokenizer) < _BYTE_SYMBOLS:  # transformers may return an empty tokenizer when files are absent
            raise OSError(f"no CLIP vocabulary found for {name!r} (got {len(tokenizer)} tokens)")
    except (OSError, ValueError) as err:
        bpe = open_clip_bpe_path() if source is None else None
        if bpe is None:
            raise UserInputError(
                f"cannot load the tokenizer {name!r} ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                "offline, pass --tokenizer FOLDER with CLIP's vocab.json and merges.txt (or install open_clip_torch, "
                "whose BPE file is used as a fallback)"
            ) from err
        tokenizer = clip_tokenizer_from_merges(read_bpe_merges(bpe), context_length)
        tokenizer.init_kwargs["source"] = f"open_clip's {bpe.name}"
    tokenizer.model_max_length = context_length
    return tokenizer


def tokenizer_source(tokenizer, requested: str | Path | None) -> str:
    """Where the tokenizer came from, for the model card."""
    return tokenizer.init_kwargs.get("source") or str(requested or DEFAULT_TOKENIZER)
