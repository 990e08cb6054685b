"""A tiny masked LM and a rule-tagged spaCy pipeline for the masked-LM negative tests (no download).

Shared by the generator tests and the COCO builder's `ce_clip` tests (the fixtures that build them
are in conftest.py). The LM is a random 2-layer BERT over a word-level tokenizer trained here on the
words below and the captions both test files use, so every caption word is one token; spaCy's
`blank("en")` + an attribute ruler sets the POS of exactly these words.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.data_sources import COCO_CAPTIONS

POS = {
    "ADJ": ["white", "red", "small", "big", "black", "blue", "green", "ivory", "tiny", "large", "wooden"],
    "VERB": ["sitting", "holding", "riding", "eating", "standing", "chases", "walking", "seated"],
    "NOUN": ["cat", "dog", "dogs", "man", "mat", "horse", "car", "bus", "fence", "table", "woman", "pizza",
             "ball", "sky", "bench", "street", "front", "top", "umbrella", "sofa", "plates", "food", "bowl",
             "rice", "broccoli", "shirt"],
}  # fmt: skip
OTHER = ["a", "the", "on", "two", "with", "near", "of", "is", "and", ".", "in", "t", "-"]
# The generator tests' captions: every type, no position for some types, an empty row.
CAPTIONS = [
    "a white cat sitting on a mat",
    "a man riding a horse near a fence",
    "A small dog chases a red ball",
    "the sky",
    None,
    "a big black car is on the street",
    "two dogs",
    "a woman eating pizza with a man on a bench",
]
CORPUS = [" ".join(w for words in POS.values() for w in words) + " " + " ".join(OTHER),
          *(c for c in CAPTIONS if c), *(caption for _, _, caption, _, _ in COCO_CAPTIONS)]  # fmt: skip


def make_pos_pipeline():
    """`spacy.blank("en")` whose attribute ruler tags the words of `POS` (no trained model needed)."""
    import spacy

    pipeline = spacy.blank("en")
    ruler = pipeline.add_pipe("attribute_ruler")
    for pos, words in POS.items():
        ruler.add(patterns=[[{"LOWER": {"IN": words}}]], attrs={"POS": pos})
    return pipeline


def build_tiny_mlm(path: Path) -> Path:
    """Save a random tiny BERT masked LM and its word-level tokenizer (with [MASK]) to `path`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(
        CORPUS, trainers.WordLevelTrainer(special_tokens=specials, show_progress=False)
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    config = BertConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=64,
        pad_token_id=fast.pad_token_id,
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(config)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path
