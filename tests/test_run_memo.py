"""`run_memo`: what the models of one run compute alike is computed once, and only inside `sharing()`."""

import pytest
from transformers import AutoTokenizer

from hf_hardpos.run_memo import remembered, sharing, tokenizer_key


def test_remembered_computes_once_inside_sharing_and_every_time_outside():
    calls = []

    def compute():
        calls.append(1)
        return [len(calls)]

    assert remembered("k", 1, compute) == [1] and remembered("k", 1, compute) == [2]  # outside: no memo
    with sharing():
        first = remembered("k", 1, compute)
        assert remembered("k", 1, compute) is first  # the same object, computed once
        assert remembered("other kind", 1, compute) == [4]  # kinds never mix
        assert remembered("k", None, compute) == [5] and remembered("k", None, compute) == [
            6
        ]  # None: unknown
        with sharing():  # nested: the outer block's entries
            assert remembered("k", 1, compute) is first
    assert remembered("k", 1, compute) == [7]  # the block's entries are gone


def test_an_exception_is_not_remembered():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first try fails")
        return "ok"

    with sharing():
        with pytest.raises(ValueError):
            remembered("k", "key", flaky)
        assert remembered("k", "key", flaky) == "ok" and len(attempts) == 2


def test_tokenizer_key_tells_tokenizers_apart_by_what_changes_ids(tiny_clip_dir, tmp_path):
    one, two = AutoTokenizer.from_pretrained(tiny_clip_dir), AutoTokenizer.from_pretrained(tiny_clip_dir)
    assert tokenizer_key(one) == tokenizer_key(two) is not None  # loaded twice: the same ids
    two.add_tokens(["zzzqqq"])
    assert tokenizer_key(two) != tokenizer_key(one)  # an added token changes ids
    three = AutoTokenizer.from_pretrained(tiny_clip_dir)
    three.truncation_side = "left"
    assert tokenizer_key(three) != tokenizer_key(one)  # truncation keeps the other end
    assert tokenizer_key(object()) is None  # not a fast tokenizer: never shared
