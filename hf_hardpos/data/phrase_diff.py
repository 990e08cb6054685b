"""Which phrase a hard positive replaced, read off the caption pair itself.

Upstream REPLACE files give c and c_p but not the substitution that turned one into the other; users
filtering or grouping by substitution ("white -> ivory", "behind -> to the rear of") need it. The
word-level diff (common prefix and suffix of whitespace tokens) recovers it without a hand-kept table.
"""

from __future__ import annotations


def phrase_diff(caption: str, hard_positive: str) -> tuple[str, str]:
    """Return ``(replaced_phrase, replacement)``: the words of ``caption`` that differ from ``hard_positive``.

    Words are whitespace tokens; the common leading and trailing words are stripped and what is left on
    each side is joined by single spaces. A deletion ("on top of" -> "on") gives an empty replacement;
    identical captions give ``("", "")``.
    """
    source, target = caption.split(), hard_positive.split()
    prefix = 0
    while prefix < min(len(source), len(target)) and source[prefix] == target[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(source), len(target)) - prefix
        and source[len(source) - 1 - suffix] == target[len(target) - 1 - suffix]
    ):
        suffix += 1
    return (
        " ".join(source[prefix : len(source) - suffix]),
        " ".join(target[prefix : len(target) - suffix]),
    )
