"""Quality flags for known defects of the upstream REPLACE data (SPEC §3).

The benchmark rows are kept exactly as the paper used them; these flags only let users filter:

- *substring artefacts*: a few hard positives were made by plain substring replacement, so a word
  that merely contains the replaced word was rewritten too ("white whiteboard" -> "ivory ivoryboard",
  "covered" -> "covecrimson", "belonging" -> "belengthying").
- *repeated rows*: a row that repeats an earlier (image_id, c, c_n) triple.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence


def substitution_table(pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The set of (replaced phrase, replacement) pairs observed in a subset.

    The benchmark's own hand-written substitutions ("red" -> "crimson") are the ones whose careless
    substring application produced the artefacts, so the table the data itself exhibits is exactly what
    :func:`is_substring_artifact` needs; no external list has to be kept in sync.
    """
    return {(source, target) for source, target in pairs if source}


def _has_partial_word_occurrence(text: str, phrase: str) -> bool:
    """True if ``phrase`` occurs in ``text`` at least once *not* delimited by word boundaries."""
    whole = {m.start() for m in re.finditer(rf"(?<!\w){re.escape(phrase)}(?!\w)", text)}
    return any(m.start() not in whole for m in re.finditer(re.escape(phrase), text))


def is_substring_artifact(caption: str, hard_positive: str, table: Iterable[tuple[str, str]]) -> bool:
    """True if ``hard_positive`` is ``caption`` with a table substitution applied inside a longer word.

    The test reproduces the upstream mistake: some ``(source, target)`` of the table, applied with
    ``str.replace`` to the whole caption, gives exactly ``hard_positive`` while at least one occurrence
    of ``source`` sat inside another word. Whole-word substitutions, even repeated ones
    ("in building in" -> "within building within"), are not flagged: they keep the meaning.
    """
    for source, target in table:
        if source in caption and caption.replace(source, target) == hard_positive:
            if _has_partial_word_occurrence(caption, source):
                return True
    return False


def first_occurrences(keys: Sequence[tuple]) -> list[int | None]:
    """For each key, the index of its first earlier occurrence, or ``None`` if it is the first."""
    first: dict[tuple, int] = {}
    duplicate_of: list[int | None] = []
    for index, key in enumerate(keys):
        if key in first:
            duplicate_of.append(first[key])
        else:
            first[key] = index
            duplicate_of.append(None)
    return duplicate_of
