"""The closed vocabulary of the synthetic world: attribute values, relations and their synonyms.

Why a lexicon: hard positives must be correct *by construction*. Every concept (the colour red, the
relation "left of") has a fixed set of surface forms that mean exactly the same thing in this world,
so replacing one form by another is a meaning-preserving edit, and replacing a concept by a different
concept is a meaning-changing one. The parser that checks captions against scenes reads the same
table, so generator and checker cannot drift apart.

The first surface form of each concept is the common one; the others are rarer synonyms, as in
natural captions where "white" is far more frequent than "ivory" (`form_probabilities`: Zipf).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

SIZES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"small": ("small", "little"), "large": ("large", "big")}
)
# Eight colours and five shapes: enough concepts that a random batch of 128 scenes seldom holds two
# that differ only in which colour belongs to which shape (about 0.2 such pairs per image per batch,
# against 3.5 with four colours and three shapes), as in a real caption corpus. A world so small that
# random in-batch negatives are already hard negatives would teach binding without them.
COLOURS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "red": ("red", "crimson"), "green": ("green", "emerald"), "blue": ("blue", "azure"),
    "yellow": ("yellow", "golden"), "purple": ("purple", "violet"), "orange": ("orange", "amber"),
    "cyan": ("cyan", "turquoise"), "pink": ("pink", "rose"),
})  # fmt: skip
# Shapes are drawn in 2-D: a cube as a filled square, a sphere as a disc, a cone as a triangle, a
# diamond as a square on its corner, a cross as a plus sign.
SHAPES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "cube": ("cube", "block"), "sphere": ("sphere", "ball"), "cone": ("cone", "pyramid"),
    "diamond": ("diamond", "rhombus"), "cross": ("cross", "plus"),
})  # fmt: skip
# "X <relation> Y" with X the first-mentioned object. Multi-word forms are single units.
RELATIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "left": ("to the left of", "left of"), "right": ("to the right of", "right of"),
    "above": ("above", "over"), "below": ("below", "under", "beneath"),
})  # fmt: skip

# Which lexicon an attribute slot reads from (the order is the word order in a phrase).
ATTRIBUTE_LEXICONS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {"size": SIZES, "colour": COLOURS, "shape": SHAPES}
)
# Every slot a caption has: the attributes, then the relation between two objects.
SLOT_LEXICONS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {**ATTRIBUTE_LEXICONS, "relation": RELATIONS}
)

ARTICLE = "a"
CONJUNCTION = "and"

# Word frequencies in natural text fall off roughly as a power of their rank (Zipf): the k-th surface
# form of a concept is written with probability proportional to 1 / k**ZIPF_EXPONENT. With exponent 2
# a concept with two forms is written 80% / 20%, one with three forms 73% / 18% / 8%.
ZIPF_EXPONENT = 2.0


def form_probabilities(count: int) -> tuple[float, ...]:
    """How often each of `count` surface forms (in lexicon order) is written: Zipf, 1 / rank**2."""
    if count < 1:
        raise ValueError(f"a concept needs at least one surface form, got {count}")
    weights = [1.0 / (rank**ZIPF_EXPONENT) for rank in range(1, count + 1)]
    total = sum(weights)
    return tuple(w / total for w in weights)


def surface_forms(slot: str, concept: str) -> tuple[str, ...]:
    """All surface forms of `concept` in `slot` ("size", "colour", "shape" or "relation")."""
    return SLOT_LEXICONS[slot][concept]


def concept_of(slot: str, form: str) -> str:
    """The concept a surface form names; KeyError names the slot and the unknown form."""
    for concept, forms in SLOT_LEXICONS[slot].items():
        if form in forms:
            return concept
    raise KeyError(f"{form!r} is not a known {slot} word of the synthetic world")


def vocabulary() -> list[str]:
    """Every word a synthetic caption can contain, sorted (for tokenizer coverage checks)."""
    words = {ARTICLE, CONJUNCTION}
    for table in SLOT_LEXICONS.values():
        for forms in table.values():
            for form in forms:
                words.update(form.split())
    return sorted(words)
