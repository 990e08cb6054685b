"""A tiny CLIP (model + tokenizer + image processor) built entirely offline.

Why: the Hub is out of reach in tests and in the embedded demo, yet every code path of the package
(`from_pretrained`, `CLIPProcessor`, the trainer, `save_pretrained`) must run for real. This module
learns a CLIP-format byte-level BPE on a caption corpus (split and byte-encoded by the `tokenizers`
library's CLIP pre-tokenizers, merges learned deterministically, `learn_merges`), wraps it in a
`CLIPTokenizer` (77-token context, like OpenAI CLIP), pairs it with a `CLIPImageProcessor` and a
small randomly initialised `CLIPModel`, and saves the lot as a folder laid out like a Hub repo.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

import torch
from tokenizers import Regex, normalizers, pre_tokenizers
from transformers import (
    CLIPConfig,
    CLIPImageProcessor,
    CLIPModel,
    CLIPProcessor,
    CLIPTokenizer,
)

BOS_TOKEN = "<|startoftext|>"
EOS_TOKEN = "<|endoftext|>"
CONTEXT_LENGTH = 77

END_OF_WORD = "</w>"

# The same normalisation and split CLIPTokenizer applies, so the merges we learn are the merges it will use.
_CLIP_SPLIT = (
    r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
)
_NORMALIZER = normalizers.Sequence(
    [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
)
_PRE_TOKENIZER = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(_CLIP_SPLIT), behavior="removed", invert=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
])  # fmt: skip

_DEFAULT_CORPUS = (
    "a photo of a red cube to the left of a blue sphere",
    "a small green cylinder above a large yellow cone",
    "a man holding a wine bottle and wearing glasses",
    "three giraffes and two antelopes in a field",
    "a white and blue stained glass clock shows the time",
)


def train_clip_tokenizer(corpus: Iterable[str], vocab_size: int = 1024) -> CLIPTokenizer:
    """Learn a CLIP-format BPE (byte alphabet, `</w>` word ends) from `corpus`.

    The vocabulary is laid out as OpenAI's: 256 byte symbols, the same with `</w>`, one entry per
    merge, then the two special tokens, so the ids of the specials are the last two. Merges are
    learned until every word is one symbol or the vocabulary holds `vocab_size` entries
    (`learn_merges`: the same text always gives the same tokenizer).
    """
    byte_alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = learn_merges(corpus, max_merges=vocab_size - 2 * len(byte_alphabet) - 2)

    vocab: dict[str, int] = {}
    for symbol in byte_alphabet + [s + END_OF_WORD for s in byte_alphabet]:
        vocab.setdefault(symbol, len(vocab))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    vocab[BOS_TOKEN] = len(vocab)
    vocab[EOS_TOKEN] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=CONTEXT_LENGTH)


def learn_merges(corpus: Iterable[str], max_merges: int) -> list[tuple[str, str]]:
    """BPE merges of `corpus` as CLIP splits and byte-encodes it, most frequent pair first, ties broken by
    the symbols' ranks (the byte alphabet in code-point order, then word-final symbols in code-point order,
    then merged symbols in the order they were made).

    Why not `tokenizers.trainers.BpeTrainer`: it ranks word-final symbols in the iteration order of a
    Rust hash map, which is seeded per process, so a corpus with tied pair counts gave a different
    tokenizer, hence a different tiny CLIP, in every process. With the same tie rule and a fixed rank
    this gives the merges that trainer gives whenever its result does not depend on that order (the
    demo world's corpus: all 138 merges alike), and the same merges in every process always.
    """
    words = Counter(
        word
        for text in corpus
        for word, _ in _PRE_TOKENIZER.pre_tokenize_str(_NORMALIZER.normalize_str(text))
    )
    symbols = {word: [*word[:-1], word[-1] + END_OF_WORD] for word in words}
    rank = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for symbol in sorted({split[-1] for split in symbols.values()}):
        rank.setdefault(symbol, len(rank))
    merges: list[tuple[str, str]] = []
    while len(merges) < max_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, split in symbols.items():
            for pair in pairwise(split):
                pairs[pair] += words[word]
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], -rank[pair[0]], -rank[pair[1]]))
        rank.setdefault(best[0] + best[1], len(rank))
        merges.append(best)
        symbols = {word: _merge(split, best) for word, split in symbols.items()}
    return merges


def _merge(split: list[str], pair: tuple[str, str]) -> list[str]:
    """`split` with every occurrence of `pair` joined, left to right (as BPE applies a merge)."""
    merged, i = [], 0
    while i < len(split):
        if i + 1 < len(split) and (split[i], split[i + 1]) == pair:
            merged.append(split[i] + split[i + 1])
            i += 2
        else:
            merged.append(split[i])
            i += 1
    return merged


def build_tiny_clip(
    output_dir: str | Path,
    corpus: Iterable[str] | None = None,
    *,
    image_size: int = 32,
    patch_size: int = 8,
    hidden_size: int = 64,
    projection_dim: int = 32,
    num_layers: int = 2,
    vocab_size: int = 1024,
    seed: int = 0,
) -> Path:
    """Build and save a randomly initialised tiny CLIP with its processor; return the folder.

    The folder loads with `CLIPModel.from_pretrained` and `CLIPProcessor.from_pretrained`, like any
    Hub checkpoint. `corpus` should contain the captions the model will see so the BPE covers them.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_clip_tokenizer(corpus if corpus is not None else _DEFAULT_CORPUS, vocab_size)
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    )
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)

    # The text and the image tower have the same width and depth.
    tower = {"hidden_size": hidden_size, "intermediate_size": hidden_size * 2, "num_hidden_layers": num_layers,
             "num_attention_heads": 4}  # fmt: skip
    special_ids = {
        f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("bos", "eos", "pad")
    }
    config = CLIPConfig(
        text_config={
            **tower,
            "vocab_size": len(tokenizer),
            "max_position_embeddings": CONTEXT_LENGTH,
            **special_ids,
        },
        vision_config={**tower, "image_size": image_size, "patch_size": patch_size},
        projection_dim=projection_dim,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config)
    model.save_pretrained(output_dir)
    processor.save_pretrained(output_dir)
    return output_dir
