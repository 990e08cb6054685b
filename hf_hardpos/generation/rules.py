"""Rule-based hard positives and hard negatives: no model, deterministic, conservative.

Why rules next to the LLM path: the paper's REPLACE hard positives come from a small synonym table,
and CREPE/SugarCrepe-style hard negatives come from word classes (colours, sizes, materials,
spatial relations, actions). Rules run on a laptop over all of COCO in minutes, need no download,
and every output can be traced to a table row. They return `None` rather than a doubtful edit:
a missing hard positive costs one training pair, a wrong one teaches the model a false invariance.

Matching is on whole tokens (`whiteboard` never contains `white`), keeps the casing of the word it
replaces, leaves punctuation where it was and fixes "a"/"an" before the new word.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

from hf_hardpos.generation import lexicon
from hf_hardpos.generation.lexicon import Rule
from hf_hardpos.generation.tokens import (
    Token,
    apply_edits,
    article_edit,
    joined,
    match_case,
    next_token,
    previous_token,
    proper_noun_tokens,
    tokenize,
)


@dataclass(frozen=True)
class _Match:
    first: int  # token index of the first matched token
    stop: int  # one past the last matched token
    rule: Rule


def _phrase_at(caption: str, tokens: Sequence[Token], i: int, words: Sequence[str]) -> bool:
    if i + len(words) > len(tokens):
        return False
    for offset, word in enumerate(words):
        token = tokens[i + offset]
        if token.lower != word:
            return False
        if offset and not joined(caption, tokens[i + offset - 1], token):
            return False
    return True


def _protected_spans(caption: str, tokens: Sequence[Token]) -> list[tuple[int, int]]:
    spans = []
    for i, token in enumerate(tokens):
        for words in _PROTECTED_BY_FIRST_WORD.get(token.lower, ()):
            if _phrase_at(caption, tokens, i, words):
                spans.append((i, i + len(words)))
    return spans


def protected_character_spans(caption: str) -> list[tuple[int, int]]:
    """Character spans of the protected phrases in `caption` ("in front of", "years old", ...):
    the masked-LM path does not mask a word inside one either ("in front of" -> "in side of")."""
    tokens = tokenize(caption)
    return [(tokens[a].start, tokens[b - 1].end) for a, b in _protected_spans(caption, tokens)]


_PROTECTED_BY_FIRST_WORD: dict[str, list[list[str]]] = {}
for _phrase in sorted(lexicon.protected_phrases()):
    _PROTECTED_BY_FIRST_WORD.setdefault(_phrase.split()[0], []).append(_phrase.split())


@lru_cache(maxsize=16)
def _index_rules(rules: tuple[Rule, ...]) -> dict[str, tuple[Rule, ...]]:
    """Rules by the first word of their source, so matching costs one lookup per token."""
    index: dict[str, list[Rule]] = {}
    for rule in rules:
        index.setdefault(rule.source.split()[0], []).append(rule)
    return {word: tuple(group) for word, group in index.items()}


def find_matches(caption: str, rules: Sequence[Rule]) -> list[_Match]:
    """Every place where a rule may fire, after context guards and protected phrases.

    A match inside a protected phrase is dropped unless it covers the whole phrase (the rule for
    "in front of" may fire, the rule for "in" may not); a match strictly inside another match is
    dropped too (prefer "riding on" over "riding").
    """
    tokens = tokenize(caption)
    protected = _protected_spans(caption, tokens)
    names = proper_noun_tokens(caption, tokens)
    by_first_word = _index_rules(tuple(rules))
    found: list[_Match] = []
    for i, token in enumerate(tokens):
        for rule in by_first_word.get(token.lower, ()):
            words = rule.source.split()
            if not _phrase_at(caption, tokens, i, words):
                continue
            stop = i + len(words)
            if any(j in names for j in range(i, stop)):
                continue  # "the Red Sox" is a name, not a red thing
            before = previous_token(caption, tokens, i)
            after = next_token(caption, tokens, stop)
            if after is not None and after.lower in rule.not_before:
                continue
            if before is not None and before.lower in rule.not_after:
                continue
            if rule.needs_next and after is None:
                continue
            if any(a < stop and i < b and not (i <= a and b <= stop) for a, b in protected):
                continue
            found.append(_Match(i, stop, rule))

    def inside_longer(m: _Match) -> bool:
        return any(
            o.first <= m.first and m.stop <= o.stop and o.stop - o.first > m.stop - m.first for o in found
        )

    kept = [m for m in found if not inside_longer(m)]
    kept.sort(key=lambda m: (m.first, m.stop))
    return kept


def _replace(
    caption: str, rules: Sequence[Rule], rng: random.Random | None, *, avoid_present: bool = False
) -> str | None:
    """Apply one rule; with `avoid_present`, never pick a target already in the caption.

    For hard negatives a target that is already there ("a blue and white clock" -> "a white and
    white clock") gives a broken caption rather than a meaningful contrast.
    """
    tokens = tokenize(caption)
    present = " " + " ".join(t.lower for t in tokens) + " "
    candidates = []
    for match in find_matches(caption, rules):
        targets = match.rule.targets
        if avoid_present:
            targets = tuple(t for t in targets if f" {t} " not in present)
        if targets:
            candidates.append((match, targets))
    if not candidates:
        return None
    match, targets = candidates[0] if rng is None else rng.choice(candidates)
    return _apply_match(caption, tokens, match, targets[0] if rng is None else rng.choice(targets))


def _apply_match(caption: str, tokens: Sequence[Token], match: _Match, target: str) -> str:
    """Put `target` in place of the matched tokens, in their casing, with the article fixed."""
    first, last = tokens[match.first], tokens[match.stop - 1]
    new_text = match_case(first.text, target)
    edits = [(first.start, last.end, new_text), *article_edit(caption, tokens, match.first, new_text)]
    return apply_edits(caption, edits)


def replace_words(caption: str, edits: Sequence[tuple[int, int, str]]) -> str:
    """Put each new word in place of the character span [start, end) of a word of `caption`, in the
    casing of the word it replaces, with "a"/"an" before it re-chosen (the masked-LM path's edits).

    A span that does not start a word of `tokenize` (another tokenizer split it differently) is
    replaced as given, without casing or article changes.
    """
    tokens = tokenize(caption)
    first_token = {token.start: i for i, token in enumerate(tokens)}
    changes: list[tuple[int, int, str]] = []
    for start, end, word in edits:
        i = first_token.get(start)
        if i is None:
            changes.append((start, end, word))
            continue
        new_text = match_case(tokens[i].text, word)
        changes += [(start, end, new_text), *article_edit(caption, tokens, i, new_text)]
    return apply_edits(caption, changes)


@lru_cache(maxsize=2)
def _synonym_rules(include_extra: bool) -> tuple[Rule, ...]:
    return lexicon.hard_positive_rules(include_extra)


def _positive_rules(include_extra: bool, sources: Collection[str] | None) -> tuple[Rule, ...]:
    """The synonym rules, restricted to the words in `sources` when given."""
    rules = _synonym_rules(include_extra)
    return rules if sources is None else tuple(rule for rule in rules if rule.source in sources)


@lru_cache(maxsize=1)
def _negative_rules() -> tuple[Rule, ...]:
    return lexicon.hard_negative_rules()


def replace_hard_positive(
    caption: str,
    rng: random.Random | None = None,
    *,
    include_extra: bool = True,
    sources: Collection[str] | None = None,
) -> str | None:
    """Replace one word/phrase by its synonym from the paper's table (plus our extras).

    With `rng=None` the first eligible word is replaced (reproducible without a seed); with a
    `random.Random` the word is drawn from all eligible ones. `sources` restricts the words that may
    be replaced (e.g. `lexicon.VERB_SOURCES`). Returns None when nothing applies.
    """
    return _replace(caption, _positive_rules(include_extra, sources), rng)


def hard_positive_candidates(
    caption: str, *, include_extra: bool = True, sources: Collection[str] | None = None
) -> list[str]:
    """Every hard positive the synonym table can make from `caption` (one per eligible word)."""
    tokens = tokenize(caption)
    matches = find_matches(caption, _positive_rules(include_extra, sources))
    return [_apply_match(caption, tokens, match, match.rule.targets[0]) for match in matches]


def replace_hard_negative(caption: str, rng: random.Random | None = None) -> str | None:
    """Replace one attribute/relation/action by an antonym or co-hyponym (CREPE/SugarCrepe "replace").

    Colours become another colour, sizes and states their opposite, spatial relations their mirror,
    actions a sibling action. Returns None when the caption has no word from those classes.
    """
    return _replace(caption, _negative_rules(), rng, avoid_present=True)


# ---- SWAP: exchange the two conjuncts around "and" -------------------------------------------


def _is_participle(word: str) -> bool:
    return len(word) > 4 and word.endswith("ing") and word not in lexicon.ING_NOUNS


def _is_breaker(word: str) -> bool:
    """Words that end a noun phrase: prepositions, auxiliaries, clause words, participles."""
    return (
        word in lexicon.PREPOSITIONS
        or word in lexicon.AUXILIARIES
        or word in lexicon.CLAUSE_WORDS
        or word == "and"
        or _is_participle(word)
    )


def _contiguous(caption: str, tokens: Sequence[Token], first: int, stop: int) -> bool:
    return all(joined(caption, tokens[i - 1], tokens[i]) for i in range(first + 1, stop))


def _attribute_spans(caption: str, tokens: Sequence[Token], k: int) -> tuple[int, int] | None:
    """ "a blue and white clock" / "the dog is black and brown": two coordinated attributes."""
    if k == 0 or k + 1 >= len(tokens):
        return None
    left, right = tokens[k - 1].lower, tokens[k + 1].lower
    if left not in lexicon.SWAPPABLE_ATTRIBUTES or right not in lexicon.SWAPPABLE_ATTRIBUTES:
        return None
    before = previous_token(caption, tokens, k - 1)
    after = next_token(caption, tokens, k + 2)
    if before is not None and before.lower in lexicon.AUXILIARIES:
        # Predicative ("is blue and white"): the right attribute must end the clause, else
        # "the sky is blue and white clouds" would move "white" away from "clouds".
        return (k - 1, k + 2) if after is None or _is_breaker(after.lower) else None
    if before is None or before.lower in lexicon.DETERMINERS or before.lower in lexicon.PREPOSITIONS:
        return (k - 1, k + 2)
    return None


def _verb_phrase_spans(caption: str, tokens: Sequence[Token], k: int) -> tuple[int, int] | None:
    """ "a man wearing glasses and holding a bottle": two participle phrases, the right one final."""
    if k + 1 >= len(tokens) or not _is_participle(tokens[k + 1].lower):
        return None
    right_words = [t.lower for t in tokens[k + 2 :]]
    if any(_is_participle(w) for w in right_words) or not _contiguous(caption, tokens, k + 1, len(tokens)):
        return None
    for first in range(k - 1, -1, -1):
        if not joined(caption, tokens[first], tokens[first + 1]):
            return None
        if _is_participle(tokens[first].lower):
            return (first, len(tokens))
    return None


def _frame_length(tokens: Sequence[Token]) -> int | None:
    """Length of a frame prefix like "there are" / "a photo of" (0 when the caption starts the list)."""
    words = [t.lower for t in tokens]
    for frame in lexicon.NOUN_PHRASE_FRAMES:
        if tuple(words[: len(frame)]) == frame:
            return len(frame)
    return 0


_MAX_PHRASE = 4


def _noun_phrase_spans(caption: str, tokens: Sequence[Token], k: int) -> tuple[int, int] | None:
    """ "a cat and a dog on a couch": two determiner-led noun phrases, the left one caption-initial.

    Requiring the left phrase to open the caption is what keeps this safe: in "a man with a hat and
    a woman" the left conjunct is "a man with a hat", which contains a preposition, so we refuse
    instead of producing "a man with a woman and a hat".
    """
    first = _frame_length(tokens)
    if first >= k or tokens[first].lower not in lexicon.DETERMINERS:
        return None
    left_words = [t.lower for t in tokens[first + 1 : k]]
    if not left_words or len(left_words) > _MAX_PHRASE or any(_is_breaker(w) for w in left_words):
        return None
    right_determiner = tokens[k + 1].lower if k + 1 < len(tokens) else ""
    if right_determiner not in lexicon.DETERMINERS or right_determiner in lexicon.POSSESSIVES:
        return None  # "a man and his dog" -> "his dog and a man" would lose the antecedent
    stop = k + 2
    while (
        stop < len(tokens)
        and next_token(caption, tokens, stop) is not None
        and not _is_breaker(tokens[stop].lower)
    ):
        stop += 1
    if stop - (k + 2) == 0 or stop - (k + 2) > _MAX_PHRASE:
        return None
    if not _contiguous(caption, tokens, first, stop):
        return None
    return (first, stop)


def _single_word_spans(caption: str, tokens: Sequence[Token], k: int) -> tuple[int, int] | None:
    """ "rice and broccoli", "a sink, toilet and shower": one bare word on each side.

    The word before must be a determiner, preposition or comma (so no modifier is left behind on
    one side: "a red car and truck" is refused), and the word after must end the phrase.
    """
    if k == 0 or k + 1 >= len(tokens):
        return None
    left, right = tokens[k - 1].lower, tokens[k + 1].lower
    if _is_breaker(left) or _is_breaker(right) or left in lexicon.DETERMINERS or right in lexicon.DETERMINERS:
        return None
    if left in lexicon.SWAPPABLE_ATTRIBUTES or right in lexicon.SWAPPABLE_ATTRIBUTES:
        return None  # attributes are handled (more carefully) by _attribute_spans
    before_ok = k - 1 == 0 or not joined(caption, tokens[k - 2], tokens[k - 1])  # start or comma
    if not before_ok:
        before = tokens[k - 2].lower
        before_ok = before in lexicon.DETERMINERS or before in lexicon.PREPOSITIONS
    after = next_token(caption, tokens, k + 2)
    separator = caption[tokens[k + 1].end : tokens[k + 2].start].strip() if k + 2 < len(tokens) else ""
    if after is None and separator and separator not in _CLAUSE_PUNCTUATION:
        return None  # something other than , ; : . follows (a bracket, a quote): refuse
    after_ok = after is None or _is_breaker(after.lower)
    return (k - 1, k + 2) if before_ok and after_ok else None


_CLAUSE_PUNCTUATION = (",", ";", ":", ".", "!", "?")
_SWAP_PARSERS = (_attribute_spans, _verb_phrase_spans, _noun_phrase_spans, _single_word_spans)


def swap_hard_positive(caption: str) -> str | None:
    """Swap the two phrases coordinated by the caption's single "and", or return None.

    Four patterns are recognised (coordinated attributes, participle phrases, caption-initial
    noun phrases, bare words); anything else, several "and"s, or an "and" touching punctuation is
    refused. The conjuncts move as whole strings, so the multiset of words and the "and" are kept.
    """
    tokens = tokenize(caption)
    ands = [i for i, t in enumerate(tokens) if t.lower == "and"]
    if len(ands) != 1:
        return None
    k = ands[0]
    if k == 0 or k + 1 >= len(tokens):
        return None
    if not (joined(caption, tokens[k - 1], tokens[k]) and joined(caption, tokens[k], tokens[k + 1])):
        return None
    for parse in _SWAP_PARSERS:
        span = parse(caption, tokens, k)
        if span is not None:
            return _swap(caption, tokens, span[0], k, span[1])
    return None


# Caption-initial words known to be capitalised only because they open the caption.
_COMMON_INITIAL = lexicon.DETERMINERS | lexicon.PREPOSITIONS | frozenset(lexicon.SWAPPABLE_ATTRIBUTES)


def _swap(caption: str, tokens: Sequence[Token], first: int, k: int, stop: int) -> str | None:
    """The caption with the conjuncts [first, k) and (k, stop) exchanged, or None when the casing
    of a caption-initial conjunct cannot be decided.

    A caption-initial word moves to the middle: "A cat and a dog" -> "A dog and a cat" lowercases it,
    but "John and Mary" -> "Mary and John" must keep the name's capital. Words we know to be common
    (determiners, prepositions, attributes) are lowercased; when the right conjunct starts with a
    capital too both are names and keep their casing; otherwise (a capitalised word we cannot tell
    from a name: "Rice and beans" or "John and a dog") no swap is made.
    """
    left = caption[tokens[first].start : tokens[k - 1].end]
    right = caption[tokens[k + 1].start : tokens[stop - 1].end]
    middle = caption[tokens[k - 1].end : tokens[k + 1].start]  # " and "
    if first == 0 and _sentence_case(tokens[0].text):
        if tokens[0].lower in _COMMON_INITIAL:
            left = left[:1].lower() + left[1:]
            right = right[:1].upper() + right[1:]
        elif not right[:1].isupper():
            return None
    start, end = tokens[first].start, tokens[stop - 1].end
    return caption[:start] + right + middle + left + caption[end:]


def _sentence_case(word: str) -> bool:
    """ "A" or "Two" (capitalised because first), not "I", "TV" or a name we cannot tell apart."""
    return (word[:1].isupper() and word[1:].islower()) or (len(word) == 1 and word.isupper() and word != "I")


# ---- SWAP hard negative: exchange attributes between two objects ------------------------------

_NON_HEADS = lexicon.DETERMINERS | lexicon.PREPOSITIONS | lexicon.AUXILIARIES | lexicon.CLAUSE_WORDS | {"and"}


def _head(caption: str, tokens: Sequence[Token], i: int) -> int | None:
    """Index of the noun an attribute at i modifies: the next token that is not an attribute/"and"."""
    j = i + 1
    while j < len(tokens) and joined(caption, tokens[j - 1], tokens[j]):
        word = tokens[j].lower
        if word not in lexicon.SWAPPABLE_ATTRIBUTES and word != "and":
            return None if word in _NON_HEADS or _is_participle(word) else j
        j += 1
    return None


def _is_boundary(word: str) -> bool:
    return word in _NON_HEADS or _is_participle(word)


def swap_hard_negative(caption: str) -> str | None:
    """Exchange two attributes of two different objects ("a red car and a blue bus" -> "a blue car
    and a red bus"), as SugarCrepe's swap-att; a pair of the same kind (two colours) is preferred.

    Returns None when there are not two prenominal attributes on two different nouns, or when the
    nouns are the same word (swapping would not change the meaning).
    """
    tokens = tokenize(caption)
    attributes = []
    for i, token in enumerate(tokens):
        head = _head(caption, tokens, i) if token.lower in lexicon.SWAPPABLE_ATTRIBUTES else None
        if head is not None:
            attributes.append((i, head))
    pairs = []
    for a, (i, head_i) in enumerate(attributes):
        for j, head_j in attributes[a + 1 :]:
            wi, wj = tokens[i].lower, tokens[j].lower
            if head_i >= j or wi == wj or tokens[head_i].lower == tokens[head_j].lower:
                continue
            if not any(_is_boundary(tokens[m].lower) for m in range(head_i + 1, j)):
                continue  # same noun phrase ("blue and white stained glass clock")
            same_kind = lexicon.SWAPPABLE_ATTRIBUTES[wi] == lexicon.SWAPPABLE_ATTRIBUTES[wj]
            pairs.append((not same_kind, i, j))
    if not pairs:
        return None
    _, i, j = min(pairs)
    new_i = match_case(tokens[i].text, tokens[j].lower)
    new_j = match_case(tokens[j].text, tokens[i].lower)
    edits = [(tokens[i].start, tokens[i].end, new_i), (tokens[j].start, tokens[j].end, new_j)]
    edits += article_edit(caption, tokens, i, new_i) + article_edit(caption, tokens, j, new_j)
    return apply_edits(caption, edits)
