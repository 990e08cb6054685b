"""Captions as word tokens, and the edits the rules make on them.

Why one layer: every rule and every check of a rule's output (`validation`, `swap_rule`, the masked-LM
path) must agree on what a word is, so a check never counts words differently from the rule it checks.
A word is matched whole (`whiteboard` never contains `white`); an edit keeps the casing of the word it
replaces, leaves punctuation where it was and re-chooses "a"/"an" before a new word; a capitalised
word that does not open a sentence is a name part, which no rule rewrites.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# A word: letters/digits, possibly joined by apostrophes or hyphens ("t-shirt", "man's").
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_VOWEL_SOUND_EXCEPTIONS_A = ("uni", "use", "one", "eu", "ufo")  # vowel letter, consonant sound
_VOWEL_SOUND_EXCEPTIONS_AN = ("hour", "honest", "honor", "heir")  # consonant letter, vowel sound


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int

    @property
    def lower(self) -> str:
        return self.text.lower()


def tokenize(caption: str) -> list[Token]:
    """Word tokens with their character spans; punctuation and spaces are left out."""
    return [Token(m.group(), m.start(), m.end()) for m in _WORD.finditer(caption)]


def joined(caption: str, left: Token, right: Token) -> bool:
    """True when only whitespace separates two tokens (no comma, full stop, bracket...)."""
    return caption[left.end : right.start].strip() == ""


def previous_token(caption: str, tokens: Sequence[Token], i: int) -> Token | None:
    if i == 0 or not joined(caption, tokens[i - 1], tokens[i]):
        return None
    return tokens[i - 1]


def next_token(caption: str, tokens: Sequence[Token], j: int) -> Token | None:
    """The token after position j-1 (i.e. tokens[j]) when it directly follows, else None."""
    if j >= len(tokens) or not joined(caption, tokens[j - 1], tokens[j]):
        return None
    return tokens[j]


def match_case(template: str, replacement: str) -> str:
    """Give `replacement` the casing pattern of the word it replaces."""
    if len(template) > 1 and template.isupper():
        return replacement.upper()
    if template[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _article_for(word: str) -> str:
    lower = word.lower()
    if lower.startswith(_VOWEL_SOUND_EXCEPTIONS_AN):
        return "an"
    if lower.startswith(_VOWEL_SOUND_EXCEPTIONS_A):
        return "a"
    return "an" if lower[:1] in "aeiou" else "a"


def _sentence_initial(caption: str, tokens: Sequence[Token], i: int) -> bool:
    """True for the first word of the caption or of a sentence in it (after . ! ? and optional quotes)."""
    if i == 0:
        return True
    between = caption[tokens[i - 1].end : tokens[i].start].strip().strip("\"'“”‘’([")
    return between[-1:] in (".", "!", "?")


def proper_noun_tokens(caption: str, tokens: Sequence[Token] | None = None) -> set[int]:
    """Indices of the tokens that look like parts of a name ("Red" and "Sox" in "the Red Sox").

    A capitalised word that does not open a sentence is a name part; so is a sentence-initial
    capitalised word directly followed by a name part ("Red Sox fans"). Why: a synonym or antonym
    rule must not rewrite a name ("the Crimson Sox"). A caption without lowercase letters (all caps)
    carries no casing signal and gets none.
    """
    tokens = tokenize(caption) if tokens is None else tokens
    if not any(ch.islower() for ch in caption):
        return set()
    names = {
        i for i, t in enumerate(tokens) if t.text[:1].isupper() and not _sentence_initial(caption, tokens, i)
    }
    for i, token in enumerate(tokens):
        if token.text[:1].isupper() and i + 1 in names and joined(caption, token, tokens[i + 1]):
            names.add(i)
    return names


def apply_edits(caption: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        caption = caption[:start] + text + caption[end:]
    return caption


def article_edit(
    caption: str, tokens: Sequence[Token], first: int, new_word: str
) -> list[tuple[int, int, str]]:
    """Re-choose "a"/"an" before token `first` when the word after it changes."""
    before = previous_token(caption, tokens, first)
    if before is None or before.lower not in ("a", "an"):
        return []
    article = match_case(before.text, _article_for(new_word))
    return [] if article == before.text else [(before.start, before.end, article)]
