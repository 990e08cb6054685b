"""The paper's SWAP eligibility (Appendix C: the word "and", fewer than 15 words), one rule for generator and builder."""

import pytest

from hf_hardpos.data import coco_finetune, coco_finetune_card
from hf_hardpos.generation import swap_rule, validation
from hf_hardpos.generation.rule_generator import RuleGenerator


def _caption(words: int) -> str:
    """A caption of exactly `words` whitespace-separated words with one "and"."""
    head = ["a", "man", "and", "a", "woman"]
    return " ".join(head + ["near"] * (words - len(head)))


@pytest.mark.parametrize(("words", "eligible"), [(5, True), (14, True), (15, False), (16, False)])
def test_fewer_than_15_words(words, eligible):
    caption = _caption(words)
    assert len(caption.split()) == words
    assert swap_rule.swap_eligible(caption) is eligible
    expected = None if eligible else swap_rule.TOO_LONG_FOR_SWAP
    assert swap_rule.swap_ineligibility(caption) == expected


@pytest.mark.parametrize(
    ("caption", "has_and"),
    [
        ("Rock-and-roll band on a stage", False),  # a compound, not the conjunction the prompt swaps around
        ("A cat, and a dog.", True),
        ("And a dog sits", True),
        ("a sandy beach with a band", False),
        ("a man AND a woman", True),
    ],
)
def test_the_word_and(caption, has_and):
    assert swap_rule.has_and(caption) is has_and
    assert (swap_rule.swap_ineligibility(caption) == swap_rule.NO_AND) is not has_and


def test_generator_and_builder_use_the_same_rule():
    assert coco_finetune_card.swap_eligible is swap_rule.swap_eligible
    assert coco_finetune.PAPER_SWAP_HARD_POSITIVES == swap_rule.PAPER_SWAP_ELIGIBLE == 119_071
    generator = RuleGenerator("swap", progress=False)
    for caption in (_caption(14), _caption(15), _caption(16), "Rock-and-roll band on a stage", "two dogs"):
        reason = generator.precheck(caption)
        assert reason == swap_rule.swap_ineligibility(caption)
        assert (reason is None) is coco_finetune_card.swap_eligible(caption)
    assert validation.swap_precheck("replace", _caption(16)) is None  # REPLACE has no such limit


def test_a_too_long_caption_is_written_with_its_reason(tmp_path):
    import json

    captions = [_caption(14), _caption(15)]
    RuleGenerator("swap", progress=False).generate_to_jsonl(captions, tmp_path / "swap.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "swap.jsonl").read_text().splitlines()]
    assert rows[0]["reason"] != swap_rule.TOO_LONG_FOR_SWAP
    assert (
        rows[1]["reason"] == swap_rule.TOO_LONG_FOR_SWAP and rows[1]["raw"] is None and not rows[1]["valid"]
    )
