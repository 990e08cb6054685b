"""A tiny CLIP (model + tokenizer + image processor) built entirely offline.

Why: the Hub is out of reach in tests and in the embedded demo, yet every code path of the package
(`from_pretrained`, `CLIPProcessor`, the trainer, `save_pretrained`) must run for real. This module
trains a CLIP-format byte-level BPE on a caption corpus with the `tokenizers` library, wraps it in a
`CLIPTokenizer` (77-token context, like OpenAI CLIP), pairs it with a `CLIPImageProcessor` and a
small randomly initialised `CLIPModel`, and saves the lot as a folder laid out like a Hub repo.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

BOS_TOKEN = "<|startoftext|>"
EOS_TOKEN = "<|endoftext|>"
CONTEXT_LENGTH = 77

# The same split CLIPTokenizer applies, so the merges we learn are the merges it will use.
_CLIP_SPLIT = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""

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
    merge, then the two special tokens, so the ids of the specials are the last two.
    """
    bpe = Tokenizer(models.BPE(end_of_word_suffix="</w>", continuing_subword_prefix=""))
    bpe.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_CLIP_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    byte_alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=byte_alphabet,
        end_of_word_suffix="</w>",
        show_progress=False,
        min_frequency=1,
    )
    bpe.train_from_iterator(list(corpus), trainer=trainer)
    merges = _learned_merges(bpe)

    vocab: dict[str, int] = {}
    for symbol in byte_alphabet + [s + "</w>" for s in byte_alphabet]:
        vocab.setdefault(symbol, len(vocab))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    vocab[BOS_TOKEN] = len(vocab)
    vocab[EOS_TOKEN] = len(vocab)
    # Keep only merges whose parts are in the vocabulary (always true for BPE order, checked anyway).
    merges = [(a, b) for a, b in merges if a in vocab and b in vocab]
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=CONTEXT_LENGTH)


def _learned_merges(bpe: Tokenizer) -> list[tuple[str, str]]:
    import json

    state = json.loads(bpe.to_str())["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in state]


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
    special_ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("bos", "eos", "pad")}
    config = CLIPConfig(
        text_config={**tower, "vocab_size": len(tokenizer), "max_position_embeddings": CONTEXT_LENGTH, **special_ids},
        vision_config={**tower, "image_size": image_size, "patch_size": patch_size},
        projection_dim=projection_dim,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config)
    model.save_pretrained(output_dir)
    processor.save_pretrained(output_dir)
    return output_dir
