"""Rule-based hard positives/negatives: the paper's table, whole-word matching, conservative swaps."""

import json
import random
import re

import pytest

from hf_hardpos.generation import lexicon
from hf_hardpos.generation.rules import (
    hard_positive_candidates,
    replace_hard_negative,
    replace_hard_positive,
    swap_hard_negative,
    swap_hard_positive,
)
from hf_hardpos.generation.validation import NOT_A_SWAP, validate_replace, validate_swap


def _article_blind(text: str) -> str:
    # Upstream writes "a ivory shirt"; we write "an ivory shirt". Compare without that difference.
    return re.sub(r"\ban\b", "a", text)


@pytest.mark.parametrize("subset, minimum", [("attributes", 0.998), ("relations", 0.97)])
def test_table_reproduces_upstream_hard_positives(shared_data, subset, minimum):
    """Every upstream (c, c_p) pair is one of our candidates, except upstream's own defects.

    Relations miss ~2.4%: 354 "within front of" rows and "holding up" -> "grasping up" style rows,
    which our guards refuse on purpose; attributes miss only the substring defects.
    """
    root = shared_data / "hard_positives"
    originals = json.loads((root / "data" / f"vl_checklist_{subset}.json").read_text())[::4]
    positives = json.loads((root / "swapped_data" / f"vl_checklist_{subset}.json").read_text())[::4]
    hits = 0
    for original, positive in zip(originals, positives):
        candidates = hard_positive_candidates(original["true_caption"], include_extra=False)
        hits += _article_blind(positive["true_caption"]) in {_article_blind(c) for c in candidates}
        for candidate in candidates:
            assert "within front of" not in candidate
            assert validate_replace(original["true_caption"], candidate) is None, candidate
    assert hits / len(originals) >= minimum


@pytest.mark.parametrize(
    "caption, expected",
    [
        ("white whiteboard", "ivory whiteboard"),  # upstream: "ivory ivoryboard"
        ("window belonging to long building", "window belonging to lengthy building"),  # "belengthying"
        ("plant covered in green leaf", "plant covered in emerald leaf"),  # "covecrimson"; "in" guarded
        ("wetsuit on young woman", "wetsuit on youthful woman"),  # not "dampsuit"
        ("a silverware drawer", None),
        ("a white-tailed deer", None),
        ("leaf in front of vase", None),  # upstream: "within front of"
        ("a black and white photo", None),
        ("a 5 year old boy", None),
        ("a train pulled by a horse", None),
        ("a man is wearing a hat", None),
        ("nothing to change here", None),
    ],
)
def test_replace_hard_positive_whole_words_and_guards(caption, expected):
    assert replace_hard_positive(caption) == expected


@pytest.mark.parametrize(
    "caption, expected",
    [
        ("WHITE CAT", "IVORY CAT"),
        ("White cat on a mat", "Ivory cat on a mat"),
        ("A white cat.", "An ivory cat."),  # article follows the new word
        ("Behind the house, a dog.", "To the rear of the house, a dog."),
        ("a dog (white) sleeps", "a dog (ivory) sleeps"),
        ("person riding horse", "person traveling on horse"),
        ("a man riding on a horse", "a man traveling on a horse"),  # not "traveling on on"
        ("a cat sitting near.", "a cat seated near."),  # "near" needs an object
    ],
)
def test_replace_hard_positive_case_and_punctuation(caption, expected):
    assert replace_hard_positive(caption) == expected


def test_replace_is_deterministic_given_rng_and_uses_every_option():
    caption = "a small dog holding a red ball behind a white fence"
    assert replace_hard_positive(caption, random.Random(3)) == replace_hard_positive(
        caption, random.Random(3)
    )
    outputs = {replace_hard_positive(caption, random.Random(seed)) for seed in range(40)}
    assert outputs == set(hard_positive_candidates(caption))
    assert len(outputs) == 5


def test_replace_restricted_to_verbs_or_spatial_words():
    caption = "a small dog holding a red ball behind a white fence"
    verb = replace_hard_positive(caption, sources=lexicon.VERB_SOURCES)
    spatial = replace_hard_positive(caption, sources=lexicon.SPATIAL_SOURCES)
    assert verb == "a small dog grasping a red ball behind a white fence"
    assert spatial == "a small dog holding a red ball to the rear of a white fence"


@pytest.mark.parametrize(
    "caption, expected",
    [
        ("a red car", "a white car"),
        ("An orange cat", "A white cat"),
        ("a cat to the left of a dog", "a cat to the right of a dog"),
        ("hands in front of tablecloth", "hands behind tablecloth"),
        ("a man sitting on a bench", "a man standing on a bench"),
        ("an empty glass", "a full glass"),
        ("a glass of water", None),  # "glass" is not a material here, and nothing else applies
        ("a whiteboard", None),
    ],
)
def test_replace_hard_negative(caption, expected):
    assert replace_hard_negative(caption) == expected


def test_replace_hard_negative_never_duplicates_a_present_word():
    caption = "a blue and white stained glass clock"
    for seed in range(30):
        output = replace_hard_negative(caption, random.Random(seed))
        assert output is not None and output != caption
        assert "white and white" not in output and "blue and blue" not in output


# The paper's five few-shot examples (SPEC §4), with our rule output.
PAPER_SWAPS = [
    ("three giraffes and two antelope", "two antelope and three giraffes"),
    (
        "a blue and white stained glass clock shows the time",
        "a white and blue stained glass clock shows the time",
    ),
    ("a mixture of rice and broccoli are put together", "a mixture of broccoli and rice are put together"),
    ("a bathroom with a sink, toilet and shower", "a bathroom with a sink, shower and toilet"),
    (
        "there is a man wearing glasses and holding a wine bottle",
        "there is a man holding a wine bottle and wearing glasses",
    ),
]


@pytest.mark.parametrize(
    "caption, expected",
    PAPER_SWAPS
    + [
        ("A cat and a dog on a couch.", "A dog and a cat on a couch."),
        ("Two dogs and a cat playing in the snow", "A cat and two dogs playing in the snow"),
        ("the dog is black and brown", "the dog is brown and black"),
        ("a man and woman", "a woman and man"),
    ],
)
def test_swap_hard_positive(caption, expected):
    output = swap_hard_positive(caption)
    assert output == expected
    assert validate_swap(caption, output) is None


@pytest.mark.parametrize(
    "caption",
    [
        "a cat on a mat",  # no "and"
        "Mandy and",  # "and" at the end
        "a man with a hat and a woman",  # would give "a man with a woman and a hat"
        "a man with a hat and a woman with a bag",
        "a man holding a cat and a dog",  # attachment is ambiguous
        "a red car and truck",  # "red" would move to the truck
        "the sky is blue and white clouds",
        "salt and pepper shakers",  # compound
        "dogs and cats and birds",  # several "and"
        "a cat, and a dog",  # "and" next to punctuation
        "a man and his dog",  # the possessive would lose its antecedent
        "sandy beach and band",  # "and" inside words is not "and"
    ],
)
def test_swap_hard_positive_refuses_doubtful_cases(caption):
    assert swap_hard_positive(caption) is None


def test_swap_hard_negative_exchanges_attributes_between_objects():
    caption = "a red car and a blue bus"
    output = swap_hard_negative(caption)
    assert output == "a blue car and a red bus"
    assert validate_swap(caption, output) == NOT_A_SWAP  # same words, different meaning
    assert swap_hard_negative("an orange cat next to a black dog") == "a black cat next to an orange dog"
    assert (
        swap_hard_negative("a large white dog and a small black cat")
        == "a small white dog and a large black cat"
    )
    assert (
        swap_hard_negative("A dog with a Red collar and a blue leash")
        == "A dog with a Blue collar and a red leash"
    )


@pytest.mark.parametrize(
    "caption",
    [
        "a blue and white clock",  # one object
        "a red car and a red bus",
        "a red car and a blue car",
        "a dog on a mat",
        "the car is red and the bus is blue",  # predicative: no prenominal attribute
    ],
)
def test_swap_hard_negative_refuses(caption):
    assert swap_hard_negative(caption) is None


def _multiword_phrases() -> list[str]:
    """Every multi-word relation of the lexicon and every multi-word source/target of its tables."""
    return sorted(p for p in lexicon.protected_phrases() if p in lexicon.MULTIWORD_RELATIONS or " " in p)


def _partial_edits(caption: str, phrase: str) -> list[str]:
    """Rule matches (positive and negative tables) that replace part, not all, of `phrase`."""
    from hf_hardpos.generation.rules import find_matches
    from hf_hardpos.generation.tokens import tokenize

    words = [t.lower for t in tokenize(caption)]
    target = phrase.split()
    spans = [(i, i + len(target)) for i in range(len(words)) if words[i : i + len(target)] == target]
    rules = lexicon.hard_positive_rules() + lexicon.hard_negative_rules()
    return [
        f"{m.rule.source!r} inside {phrase!r} of {caption!r}"
        for m in find_matches(caption, rules)
        for a, b in spans
        if m.first < b and a < m.stop and not (m.first <= a and b <= m.stop)
    ]


def test_no_replacement_inside_a_multiword_relation_of_the_lexicon():
    """Why: "in back of" became "within back of" (the class of upstream's "within front of")."""
    assert "in back of" in lexicon.MULTIWORD_RELATIONS
    found = []
    for phrase in _multiword_phrases():
        for caption in (f"a cat {phrase} a dog", f"A small white dog sitting {phrase} the old red car."):
            found += _partial_edits(caption, phrase)
    assert found == []
    assert (
        replace_hard_positive("a dog in back of a car") == "a dog behind a car"
    )  # the whole phrase may change
    assert replace_hard_negative("a dog in back of a car") == "a dog in front of a car"


def test_no_replacement_inside_a_multiword_relation_of_the_replace_captions(shared_data):
    """Every REPLACE caption (both subsets) holding a multi-word relation keeps it whole."""
    phrases = _multiword_phrases()
    checked, found = 0, []
    for subset in ("attributes", "relations"):
        for row in json.loads(
            (shared_data / "hard_positives" / "data" / f"vl_checklist_{subset}.json").read_text()
        ):
            caption = row["true_caption"]
            padded = f" {caption.lower()} "
            for phrase in phrases:
                if f" {phrase} " in padded:
                    checked += 1
                    found += _partial_edits(caption, phrase)
    assert checked > 2000  # "in front of", "on top of", "next to", "in back of" (15 rows), ...
    assert found == [], found[:5]
    in_back_of = []
    for subset in ("attributes", "relations"):
        rows = json.loads(
            (shared_data / "hard_positives" / "data" / f"vl_checklist_{subset}.json").read_text()
        )
        in_back_of += [r["true_caption"] for r in rows if " in back of " in f" {r['true_caption'].lower()} "]
    assert len(in_back_of) == 14  # upstream's hard positive says "within back of" in the 12 relation rows
    for caption in in_back_of:
        candidates = hard_positive_candidates(caption)
        assert candidates and not any("within back of" in c.lower() for c in candidates)
        # each candidate keeps "in back of" whole (another word changed) or replaces it whole
        assert all(" in back of " in f" {c.lower()} " or " behind " in f" {c.lower()} " for c in candidates)
        assert any(" behind " in f" {c.lower()} " for c in candidates)


def test_paper_table_keeps_the_upstream_row_counts_and_merges_the_shared_sources():
    """The paper's table as read off upstream: most frequent edit first in each subset; the three
    sources in both subsets have one target, so each makes one rule (the attribute one)."""
    targets = {subset: {s: t for s, t, _ in edits} for subset, edits in lexicon.PAPER_SYNONYMS.items()}
    assert (len(targets["attribute"]), len(targets["relation"])) == (23, 16)
    for edits in lexicon.PAPER_SYNONYMS.values():
        counts = [rows for _, _, rows in edits]
        assert counts == sorted(counts, reverse=True) and min(counts) > 0
    shared = targets["attribute"].keys() & targets["relation"].keys()
    assert shared == {"sitting", "walking", "hanging"}
    rules = {rule.source: rule for rule in lexicon.hard_positive_rules(include_extra=False)}
    assert len(rules) == 23 + 16 - 3
    assert all(
        rules[w].targets == (targets["relation"][w],) and rules[w].category == "attribute" for w in shared
    )
