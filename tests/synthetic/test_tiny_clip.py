"""The tiny CLIP's tokenizer: the same text gives the same tokenizer, with the merges of the tokenizers library."""

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

from hf_hardpos.synthetic.tiny_clip import learn_merges, train_clip_tokenizer
from hf_hardpos.synthetic.world import tokenizer_corpus

# Tied pair counts everywhere: "a red cube" and "a blue cube" make (c, u) and (b, l) equally frequent.
TIED = ("a red cube and a blue sphere", "a blue cube and a red sphere", "two green cones")
CLIP_SPLIT = (
    r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
)


def _library_merges(corpus) -> list[tuple[str, str]]:
    """The merges `tokenizers.trainers.BpeTrainer` learns with CLIP's normalisation, split and byte alphabet
    (openai/CLIP `simple_tokenizer.py`: lower case, whitespace collapsed, the regex above, `</w>` word ends)."""
    import json

    bpe = Tokenizer(models.BPE(end_of_word_suffix="</w>", continuing_subword_prefix=""))
    bpe.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CLIP_SPLIT), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])  # fmt: skip
    trainer = trainers.BpeTrainer(
        vocab_size=4096, initial_alphabet=sorted(pre_tokenizers.ByteLevel.alphabet()), end_of_word_suffix="</w>",
        show_progress=False,
    )  # fmt: skip
    bpe.train_from_iterator(list(corpus), trainer=trainer)
    return [
        tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
        for m in json.loads(bpe.to_str())["model"]["merges"]
    ]


def test_the_same_corpus_gives_the_same_tokenizer_every_time():
    # tokenizers' BpeTrainer breaks these ties by a hash map's order, seeded anew for each trainer.
    built = {train_clip_tokenizer(TIED).backend_tokenizer.to_str() for _ in range(8)}
    assert len(built) == 1


def test_merges_are_the_libraries_where_its_result_has_no_tie_to_break():
    corpus = tokenizer_corpus()
    reference = _library_merges(corpus)
    assert (
        len({tuple(_library_merges(corpus)) for _ in range(3)}) == 1
    )  # the library is stable on this corpus
    assert learn_merges(corpus, max_merges=10_000) == reference
    assert len(reference) > 100


def test_merges_join_every_word_into_one_symbol_and_stop_at_the_budget():
    merges = learn_merges(TIED, max_merges=10_000)
    tokenizer = train_clip_tokenizer(TIED)
    for word in "a red cube and blue sphere two green cones".split():
        assert tokenizer.tokenize(word) == [f"{word}</w>"], word
    assert learn_merges(TIED, max_merges=5) == merges[:5]
    # (r, e) is the one pair seen 3 times (red twice, green once); then 14 pairs tie at 2 and the lowest
    # rank wins: "a" first in the byte alphabet, so (a, n) of "and".
    assert merges[:2] == [("r", "e"), ("a", "n")]
    vocab = tokenizer.get_vocab()
    assert len(vocab) == 2 * 256 + len(merges) + 2
    assert vocab["<|endoftext|>"] == len(vocab) - 1 and vocab["<|startoftext|>"] == len(vocab) - 2
