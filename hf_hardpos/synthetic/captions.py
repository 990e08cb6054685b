"""Captions of synthetic scenes, their hard positives / hard negatives, and a checker.

A caption is held as a small structure (two object phrases joined by "and" or by a relation) and
written out from it, so each perturbation is an edit of exactly one slot:

- REPLACE positive: one word (or relation phrase) becomes a synonym of the same concept.
- REPLACE negative: one attribute or the relation becomes a *different* concept.
- SWAP positive: the two conjuncts of "X and Y" change places ("and" is symmetric).
- SWAP negative: one attribute is exchanged between the two objects (attribute binding).

`caption_matches(scene, text)` parses a caption string back and checks it against the drawn scene
(relations from the drawn positions). It shares only the lexicon with the generator, so tests use it
to prove that hard negatives contradict the image and hard positives describe it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hf_hardpos.synthetic.lexicon import (
    ARTICLE,
    ATTRIBUTE_LEXICONS,
    COMMON_FORM_PROBABILITY,
    CONJUNCTION,
    INVERSE_RELATION,
    RELATIONS,
    concept_of,
    surface_forms,
)
from hf_hardpos.synthetic.scene import Scene, SceneObject

ATTRIBUTE_SLOTS = tuple(ATTRIBUTE_LEXICONS)  # ("size", "colour", "shape"): word order in a phrase
RELATION_SLOT = "relation"
# Attributes a SWAP negative may exchange. Shapes are nouns: swapping them is swapping the objects.
SWAPPABLE_SLOTS = ("size", "colour")


@dataclass(frozen=True)
class ObjectPhrase:
    """"a <size> <colour> <shape>", each slot holding a surface form (e.g. "crimson")."""

    size: str
    colour: str
    shape: str

    def concept(self, slot: str) -> str:
        return concept_of(slot, getattr(self, slot))

    def text(self) -> str:
        return f"{ARTICLE} {self.size} {self.colour} {self.shape}"

    def describes(self, obj: SceneObject) -> bool:
        return all(self.concept(slot) == getattr(obj, slot) for slot in ATTRIBUTE_SLOTS)


@dataclass(frozen=True)
class Caption:
    """Two object phrases joined by "and" (`relation` None) or by a relation phrase."""

    first: ObjectPhrase
    second: ObjectPhrase
    relation: str | None = None

    @property
    def is_conjunction(self) -> bool:
        return self.relation is None

    def text(self) -> str:
        middle = CONJUNCTION if self.relation is None else self.relation
        return f"{self.first.text()} {middle} {self.second.text()}"


@dataclass(frozen=True)
class Slot:
    """Where an edit lands: an attribute of the first/second phrase, or the relation (`phrase` None)."""

    name: str
    phrase: int | None = None


def _form(rng: np.random.Generator, slot: str, concept: str) -> str:
    """A surface form for `concept`: the common one mostly, a synonym otherwise."""
    forms = surface_forms(slot, concept)
    if len(forms) == 1 or rng.random() < COMMON_FORM_PROBABILITY:
        return forms[0]
    return str(rng.choice(forms[1:]))


def _phrase(rng: np.random.Generator, obj: SceneObject) -> ObjectPhrase:
    return ObjectPhrase(
        size=_form(rng, "size", obj.size),
        colour=_form(rng, "colour", obj.colour),
        shape=_form(rng, "shape", obj.shape),
    )


def describe(scene: Scene, rng: np.random.Generator, *, conjunction: bool) -> Caption:
    """A true caption of `scene`: "X and Y" or "X <relation> Y", objects in random order."""
    order = (0, 1) if rng.random() < 0.5 else (1, 0)
    first, second = (_phrase(rng, scene.objects[k]) for k in order)
    if conjunction:
        return Caption(first, second)
    relation = scene.relation_between(*order)
    if relation is None:
        raise ValueError(f"scene has no clear relation between its objects: {scene}")
    return Caption(first, second, _form(rng, RELATION_SLOT, relation))


def editable_slots(caption: Caption) -> list[Slot]:
    """Every slot a REPLACE edit may target in `caption`."""
    slots = [Slot(name, phrase) for phrase in (0, 1) for name in ATTRIBUTE_SLOTS]
    if caption.relation is not None:
        slots.append(Slot(RELATION_SLOT))
    return slots


def slot_value(caption: Caption, slot: Slot) -> str:
    """The surface form currently in `slot` (ValueError for the relation of a conjunction)."""
    if slot.phrase is None:
        if caption.relation is None:
            raise ValueError(f"caption {caption.text()!r} has no relation to edit")
        return caption.relation
    return getattr((caption.first, caption.second)[slot.phrase], slot.name)


def _set(caption: Caption, slot: Slot, form: str) -> Caption:
    if slot.phrase is None:
        return replace(caption, relation=form)
    if slot.phrase == 0:
        return replace(caption, first=replace(caption.first, **{slot.name: form}))
    return replace(caption, second=replace(caption.second, **{slot.name: form}))


def replace_positive(caption: Caption, slot: Slot, rng: np.random.Generator) -> Caption:
    """Replace the word in `slot` by a synonym (another surface form of the same concept)."""
    current = slot_value(caption, slot)
    forms = [f for f in surface_forms(slot.name, concept_of(slot.name, current)) if f != current]
    return _set(caption, slot, str(rng.choice(forms)))


def replace_negative(caption: Caption, slot: Slot, rng: np.random.Generator) -> Caption:
    """Replace the concept in `slot` by a different concept (in one of its surface forms)."""
    table = RELATIONS if slot.phrase is None else ATTRIBUTE_LEXICONS[slot.name]
    current = concept_of(slot.name, slot_value(caption, slot))
    other = str(rng.choice(sorted(c for c in table if c != current)))
    return _set(caption, slot, _form(rng, slot.name, other))


def swap_positive(caption: Caption) -> Caption:
    """Exchange the conjuncts of "X and Y" (ValueError when the caption has no conjunction)."""
    if not caption.is_conjunction:
        raise ValueError(f"caption {caption.text()!r} has no 'and' to swap around")
    return Caption(caption.second, caption.first)


def swap_negative(caption: Caption, rng: np.random.Generator) -> Caption:
    """Exchange one attribute (size or colour) between the two objects, changing what is bound where.

    Only attributes whose concepts differ are eligible: exchanging two equal sizes changes nothing.
    """
    slots = [s for s in SWAPPABLE_SLOTS if caption.first.concept(s) != caption.second.concept(s)]
    if not slots:
        raise ValueError(f"caption {caption.text()!r} has no differing attribute to swap")
    name = str(rng.choice(slots))
    first_form, second_form = getattr(caption.first, name), getattr(caption.second, name)
    return replace(
        caption,
        first=replace(caption.first, **{name: second_form}),
        second=replace(caption.second, **{name: first_form}),
    )


def invert_relation(caption: Caption, rng: np.random.Generator) -> Caption:
    """"X left of Y" -> "Y right of X": same meaning, objects reordered (a relational swap positive)."""
    if caption.relation is None:
        raise ValueError(f"caption {caption.text()!r} has no relation to invert")
    inverse = INVERSE_RELATION[concept_of(RELATION_SLOT, caption.relation)]
    return Caption(caption.second, caption.first, _form(rng, RELATION_SLOT, inverse))


def parse_caption(text: str) -> Caption:
    """Parse "a S C H <and|relation> a S C H" back into a `Caption`; ValueError says what is wrong."""
    words = text.split()
    if len(words) < 9 or words[0] != ARTICLE or words[-4] != ARTICLE:
        raise ValueError(f"not a synthetic-world caption: {text!r}")
    middle = " ".join(words[4:-4])
    try:
        first = ObjectPhrase(*words[1:4])
        second = ObjectPhrase(*words[-3:])
        for phrase in (first, second):
            for slot in ATTRIBUTE_SLOTS:
                phrase.concept(slot)
        relation = None if middle == CONJUNCTION else middle
        if relation is not None:
            concept_of(RELATION_SLOT, relation)
    except KeyError as err:
        raise ValueError(f"caption {text!r}: {err.args[0]}") from None
    return Caption(first, second, relation)


def caption_matches(scene: Scene, caption: str | Caption) -> bool:
    """True when the caption is a correct description of the drawn scene.

    Each phrase must name all attributes of a distinct object; a relation must hold between the
    positions at which those objects were drawn.
    """
    parsed = parse_caption(caption) if isinstance(caption, str) else caption
    for i, j in ((0, 1), (1, 0)):
        if parsed.first.describes(scene.objects[i]) and parsed.second.describes(scene.objects[j]):
            if parsed.relation is None:
                return True
            if scene.relation_between(i, j) == concept_of(RELATION_SLOT, parsed.relation):
                return True
    return False
