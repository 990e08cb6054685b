"""The closed vocabulary of the synthetic world: attribute values, relations and their synonyms.

Why a lexicon: hard positives must be correct *by construction*. Every concept (the colour red, the
relation "left of") has a fixed set of surface forms that mean exactly the same thing in this world,
so replacing one form by another is a meaning-preserving edit, and replacing a concept by a different
concept is a meaning-changing one. The parser that checks captions against scenes reads the same
table, so generator and checker cannot drift apart.

The first surface form of each concept is the common one; the others are rarer synonyms, as in
natural captions where "white" is far more frequent than "ivory" (`common_form_probability`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

SIZES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"small": ("small", "little"), "large": ("large", "big")}
)
COLOURS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "red": ("red", "crimson"),
        "green": ("green", "emerald"),
        "blue": ("blue", "azure"),
        "yellow": ("yellow", "golden"),
    }
)
# Shapes are drawn in 2-D: a cube as a filled square, a sphere as a disc, a cone as a triangle.
SHAPES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"cube": ("cube", "block"), "sphere": ("sphere", "ball"), "cone": ("cone", "pyramid")}
)
# "X <relation> Y" with X the first-mentioned object. Multi-word forms are single units.
RELATIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "left": ("to the left of", "left of"),
        "right": ("to the right of", "right of"),
        "above": ("above", "over"),
        "below": ("below", "under", "beneath"),
    }
)
# The relation that holds with the two objects exchanged: X left of Y  <=>  Y right of X.
INVERSE_RELATION: Mapping[str, str] = MappingProxyType(
    {"left": "right", "right": "left", "above": "below", "below": "above"}
)

# Which lexicon an attribute slot reads from (the order is the word order in a phrase).
ATTRIBUTE_LEXICONS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {"size": SIZES, "colour": COLOURS, "shape": SHAPES}
)

ARTICLE = "a"
CONJUNCTION = "and"

# Probability of the common (first) surface form when a caption is written; synonyms share the rest.
COMMON_FORM_PROBABILITY = 0.75


def surface_forms(slot: str, concept: str) -> tuple[str, ...]:
    """All surface forms of `concept` in `slot` ("size", "colour", "shape" or "relation")."""
    table = RELATIONS if slot == "relation" else ATTRIBUTE_LEXICONS[slot]
    return table[concept]


def concept_of(slot: str, form: str) -> str:
    """The concept a surface form names; KeyError names the slot and the unknown form."""
    table = RELATIONS if slot == "relation" else ATTRIBUTE_LEXICONS[slot]
    for concept, forms in table.items():
        if form in forms:
            return concept
    raise KeyError(f"{form!r} is not a known {slot} word of the synthetic world")


def vocabulary() -> list[str]:
    """Every word a synthetic caption can contain, sorted (for tokenizer coverage checks)."""
    words = {ARTICLE, CONJUNCTION}
    for table in (*ATTRIBUTE_LEXICONS.values(), RELATIONS):
        for forms in table.values():
            for form in forms:
                words.update(form.split())
    return sorted(words)
