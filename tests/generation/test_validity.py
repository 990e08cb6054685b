"""What `valid: true` promises, restated on canned model outputs (issue: validity checks).

Each rule is written out here independently of `validation`: a REPLACE hard positive replaces
(no word only added or dropped, no negation added, not cut off), formatting around an answer is
removed but any other change of symbols is refused, an echoed prompt keeps its answer, the
synonym rules leave phrasal verbs and names alone, and a SWAP keeps names capitalised.
"""

import pytest

from hf_hardpos.generation import rules, tokens, validation
from hf_hardpos.generation.validation import (
    clean_output,
    validate_replace,
    validate_swap,
)

ORIGINAL = "a man holding a cup"


@pytest.mark.parametrize(
    ("original", "candidate", "reason"),
    [
        (ORIGINAL, "A man not holding a cup.", validation.NEGATION),
        ("a man with a hat", "a man without a hat", validation.NEGATION),
        ("a man holding a cup", "a man isn't holding a cup", validation.NEGATION),
        ("a red car on the road", "a car on the road", validation.DELETION),
        ("a dog on a sofa", "a black dog on a sofa", validation.INSERTION),
        ("a cat on a wooden table", "a cat on a wooden", validation.DELETION),
        ("a cat on a wooden table", "a cat on a timber", validation.DELETION),
        ("the Red Sox play on a field", "the Crimson Sox play on a field", validation.NAME_REPLACED),
        # replacements, including the paper's table shortening a phrase, stay valid
        (ORIGINAL, "a man grasping a cup.", None),
        ("pillow on top of white couch", "pillow on white couch", None),
        ("a man in back of a car", "a man behind a car", None),
        ("a man behind a car", "a man to the rear of a car", None),
    ],
)
def test_replace_replaces(original, candidate, reason):
    assert validate_replace(original, candidate) == reason


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("**a man grasping a cup**", "a man grasping a cup"),
        ("> a man grasping a cup", "a man grasping a cup"),
        ("[a man grasping a cup]", "a man grasping a cup"),
        ("→ a man grasping a cup", "a man grasping a cup"),
        ("- a man grasping a cup", "a man grasping a cup"),
        ("a man *grasping* a cup", "a man grasping a cup"),
        ('"a man grasping a cup".', "a man grasping a cup."),
        ("Input: a man holding a cup\nOutput: a man grasping a cup", "a man grasping a cup"),
        ("Input: a man holding a cup\nOutput: a man grasping a cup\nInput: a dog", "a man grasping a cup"),
    ],
)
def test_formatting_and_echo_are_stripped_and_the_answer_is_kept(raw, cleaned):
    assert clean_output(raw, ORIGINAL) == cleaned
    assert validate_replace(ORIGINAL, clean_output(raw, ORIGINAL)) is None


@pytest.mark.parametrize("raw", ["a man grasping a cup 😊", 'a man grasping a cup"', "a man grasping a cup!!!",
                                 "a man grasping a cup :)", "a man, grasping a cup"])  # fmt: skip
def test_symbols_other_than_a_final_mark_are_refused(raw):
    assert validate_replace(ORIGINAL, clean_output(raw, ORIGINAL)) == validation.SYMBOLS_CHANGED


def test_symbols_compare_outside_words():
    # restated: characters that are neither in a word nor a space, one final . ! ? ignored
    assert validation.symbols("a t-shirt, a man's hat.") == [","]
    assert validation.symbols("wow!!!") == ["!", "!"]


@pytest.mark.parametrize(
    ("original", "candidate", "reason"),
    [
        ("John and Mary", "Mary and john", validation.CASING_CHANGED),
        ("a photo of John and Mary", "a photo of Mary and john", validation.CASING_CHANGED),
        ("John and Mary", "Mary and John", None),
        ("A cat and a dog", "A dog and a cat", None),
        ("Rice and broccoli", "Broccoli and rice", None),
    ],
)
def test_swap_keeps_names_capitalised(original, candidate, reason):
    assert validate_swap(original, candidate) == reason


@pytest.mark.parametrize("particle", ["up", "still", "around", "by", "tall"])
def test_standing_before_a_particle_is_not_replaced(particle):
    caption = f"a man standing {particle} in a field"
    for candidate in rules.hard_positive_candidates(caption):
        assert "upright" not in candidate
    assert rules.replace_hard_positive("a man standing in a field") == "a man upright in a field"


@pytest.mark.parametrize(
    ("caption", "name"),
    [
        ("the Red Sox play on a field", "Red"),
        ("Red Sox fans near a car", "Red"),
        ("a Black Forest cake", "Black"),
    ],
)
def test_names_are_not_attributes(caption, name):
    produced = [*rules.hard_positive_candidates(caption), rules.replace_hard_negative(caption)]
    for output in filter(None, produced):
        assert name in output.split()
    assert tokens.proper_noun_tokens(caption) and all(
        tokens.tokenize(caption)[i].text[:1].isupper() for i in tokens.proper_noun_tokens(caption)
    )


def test_names_do_not_block_common_words():
    assert (
        rules.replace_hard_positive("A red car near the Eiffel Tower")
        == "A crimson car near the Eiffel Tower"
    )


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("John and Mary", "Mary and John"),
        ("A cat and a dog", "A dog and a cat"),
        ("Two cats and a dog", "A dog and two cats"),
        ("Rice and broccoli", None),  # a capital we cannot tell from a name: no swap
        ("rice and broccoli", "broccoli and rice"),
    ],
)
def test_rule_swap_keeps_names_capitalised(caption, expected):
    swapped = rules.swap_hard_positive(caption)
    assert swapped == expected
    if swapped is not None:
        assert validate_swap(caption, swapped) is None
