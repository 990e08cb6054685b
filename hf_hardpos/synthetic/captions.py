"""Captions of synthetic scenes, their hard positives / hard negatives, and a checker.

A caption is held as a small structure (one or two object phrases, two joined by "and" or by a
relation) and written out from it, so each perturbation is an edit of exactly one slot:

- REPLACE positive: one word (or relation phrase) becomes a synonym of the same concept.
- REPLACE negative: one attribute or the relation becomes a *different* concept.
- SWAP positive: the two conjuncts of "X and Y" change places ("and" is symmetric).
- SWAP negative: one attribute is exchanged between the two objects (attribute binding).

Two writers: `describe` writes the precise captions of the fine-tuning and evaluation sets (both
objects, every attribute), `describe_alt_text` the under-specified pretraining captions that play
the part of web alt-text (`AltTextStyle`).

Why the words are chosen as they are (the mechanism of Kamath et al. 2024, made able to act; docs/demo.md,
"The embedded demo"): alt-text writes each concept's rarer synonyms at Zipf frequencies, so the
pretrained model half-knows them; precise captions use the common word, as careful annotators do;
a REPLACE hard negative draws its new word from the whole word list (uniformly over the new concept's
surface forms), as a rule or a generator does, so rare words are over-represented in negatives; a
REPLACE hard positive is a synonym, hence a rarer word. A model trained on hard negatives alone is
thus rewarded for scoring rare words down, and takes the hard positives down with the negatives.
Precise captions name the larger object first (`salience_order`), as people mention the salient object
of a scene first. A rule-made SWAP negative that exchanges the sizes therefore breaks that convention
("a small ... and a large ..."), and so does a SWAP hard positive "Y and X": a model fine-tuned on hard
negatives alone is rewarded for scoring the convention's breach down, i.e. for detecting the word-order
perturbation (the paper's explanation of SWAP brittleness), and takes "Y and X" down with the negatives.

`caption_matches(scene, text)` parses a caption string back and checks it against the drawn scene
(relations from the drawn positions). It shares only the lexicon with the writers, so tests use it
to prove that hard negatives contradict the image and hard positives (and alt-text) describe it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hf_hardpos.synthetic.lexicon import (
    ARTICLE,
    ATTRIBUTE_LEXICONS,
    CONJUNCTION,
    SLOT_LEXICONS,
    concept_of,
    form_probabilities,
    surface_forms,
)
from hf_hardpos.synthetic.scene import Scene, SceneObject

ATTRIBUTE_SLOTS = tuple(ATTRIBUTE_LEXICONS)  # ("size", "colour", "shape"): word order in a phrase
RELATION_SLOT = "relation"
# The adjectives: what a REPLACE-attributes edit changes (REPLACE's attribute subset edits
# adjectives such as colour, size, material, never the object noun) and what a SWAP negative may
# exchange (shapes are nouns: swapping them is swapping the objects).
ADJECTIVE_SLOTS = ("size", "colour")


@dataclass(frozen=True)
class ObjectPhrase:
    """ "a [<size>] [<colour>] <shape>": each slot holds a surface form (e.g. "crimson") or None (unsaid).

    Precise captions fill every slot; alt-text leaves adjectives out. The shape noun is always said.
    """

    size: str | None
    colour: str | None
    shape: str

    def concept(self, slot: str) -> str | None:
        form = getattr(self, slot)
        return None if form is None else concept_of(slot, form)

    def text(self) -> str:
        return " ".join(w for w in (ARTICLE, self.size, self.colour, self.shape) if w is not None)

    def describes(self, obj: SceneObject) -> bool:
        """True when every attribute the phrase says holds of `obj` (unsaid attributes never conflict)."""
        return all(self.concept(slot) in (None, getattr(obj, slot)) for slot in ATTRIBUTE_SLOTS)


@dataclass(frozen=True)
class Caption:
    """One object phrase, or two joined by "and" (`relation` None) or by a relation phrase."""

    first: ObjectPhrase
    second: ObjectPhrase | None = None
    relation: str | None = None

    @property
    def is_conjunction(self) -> bool:
        return self.second is not None and self.relation is None

    def text(self) -> str:
        if self.second is None:
            return self.first.text()
        middle = CONJUNCTION if self.relation is None else self.relation
        return f"{self.first.text()} {middle} {self.second.text()}"


@dataclass(frozen=True)
class Slot:
    """Where an edit lands: an attribute of the first/second phrase, or the relation (`phrase` None)."""

    name: str
    phrase: int | None = None


@dataclass(frozen=True)
class AltTextStyle:
    """How often web-style alt-text says each thing; the pretraining captions are written with it.

    Why these values: they were fixed up front from the analogy with web alt-text (docs/demo.md, "The
    embedded demo") and never tuned on a fine-tuning result. Alt-text names the main subject and often
    leaves the rest out (`one_object`), always names the object (the shape noun), names its colour
    sometimes and its size more rarely, and rarely says where things are (`relation`). What a caption
    says is always true of its image: alt-text under-specifies, it does not lie.
    """

    one_object: float = 0.5  # P(only one of the two objects is named)
    colour: float = 0.5  # P(a named object's colour is said)
    size: float = 0.25  # P(a named object's size is said)
    relation: float = 0.2  # P(two named objects are joined by their relation rather than "and")


ALT_TEXT = AltTextStyle()


def _form(rng: np.random.Generator, slot: str, concept: str) -> str:
    """A surface form for `concept`, drawn at the lexicon's Zipf frequencies (common form mostly)."""
    forms = surface_forms(slot, concept)
    if len(forms) == 1:
        return forms[0]
    return forms[int(rng.choice(len(forms), p=form_probabilities(len(forms))))]


def _common(slot: str, concept: str) -> str:
    """The common surface form of `concept`: the word a careful annotator writes."""
    return surface_forms(slot, concept)[0]


def _phrase(obj: SceneObject) -> ObjectPhrase:
    return ObjectPhrase(**{slot: _common(slot, getattr(obj, slot)) for slot in ATTRIBUTE_SLOTS})


def reading_order(scene: Scene) -> tuple[int, int]:
    """The two objects in reading order: the left one first, or the upper one when they are stacked."""
    return (0, 1) if scene.relation_between(0, 1) in ("left", "above") else (1, 0)


def salience_order(scene: Scene, rng: np.random.Generator, *, conjunction: bool) -> tuple[int, int]:
    """The order in which an annotator mentions the two objects: the larger one first.

    Speakers tend to mention first the referent that draws attention (Gleitman et al., "On the give and take
    between event apprehension and utterance formulation", J. Memory and Language 2007), and size is a main
    cue of what a description mentions (Berg et al., "Understanding and Predicting Importance in Images",
    CVPR 2012). The world takes the larger object as the salient one. Between two objects of the same size,
    "X and Y" follows reading order (`reading_order`) and "X <relation> Y" takes either as its subject.
    """
    sizes = [obj.size for obj in scene.objects]
    if sizes[0] != sizes[1]:
        return (0, 1) if sizes[0] == "large" else (1, 0)
    if conjunction:
        return reading_order(scene)
    return (0, 1) if rng.random() < 0.5 else (1, 0)


def describe(scene: Scene, rng: np.random.Generator, *, conjunction: bool) -> Caption:
    """A precise true caption of `scene`, every attribute said in its common word, the objects in
    `salience_order` (the larger first): "X and Y", or "X <relation> Y"."""
    order = salience_order(scene, rng, conjunction=conjunction)
    first, second = (_phrase(scene.objects[k]) for k in order)
    if conjunction:
        return Caption(first, second)
    return Caption(first, second, _common(RELATION_SLOT, _relation(scene, order)))


def describe_alt_text(scene: Scene, rng: np.random.Generator, style: AltTextStyle = ALT_TEXT) -> Caption:
    """An under-specified true caption of `scene`, written as web alt-text is (`AltTextStyle`)."""
    order = (0, 1) if rng.random() < 0.5 else (1, 0)
    named = order[:1] if rng.random() < style.one_object else order
    joined_by_relation = rng.random() < style.relation
    if len(named) == 2 and not joined_by_relation:
        named = reading_order(scene)
    phrases = [
        ObjectPhrase(
            size=_form(rng, "size", scene.objects[k].size) if rng.random() < style.size else None,
            colour=_form(rng, "colour", scene.objects[k].colour) if rng.random() < style.colour else None,
            shape=_form(rng, "shape", scene.objects[k].shape),
        )
        for k in named
    ]
    if len(phrases) == 1:
        return Caption(phrases[0])
    if joined_by_relation:
        return Caption(phrases[0], phrases[1], _form(rng, RELATION_SLOT, _relation(scene, order)))
    return Caption(phrases[0], phrases[1])


def _relation(scene: Scene, order: tuple[int, int]) -> str:
    relation = scene.relation_between(*order)
    if relation is None:
        raise ValueError(f"scene has no clear relation between its objects: {scene}")
    return relation


def editable_slots(caption: Caption) -> list[Slot]:
    """Every slot a REPLACE edit may target in `caption` (the words it actually says)."""
    phrases = [p for p in (caption.first, caption.second) if p is not None]
    slots = [
        Slot(name, k) for k, phrase in enumerate(phrases) for name in ATTRIBUTE_SLOTS if getattr(phrase, name)
    ]
    if caption.relation is not None:
        slots.append(Slot(RELATION_SLOT))
    return slots


def changed_slots(before: Caption, after: Caption) -> list[Slot]:
    """The slots of `before` whose word differs in `after` (one for a REPLACE edit)."""
    changed = []
    for slot in editable_slots(before):
        try:
            if slot_value(after, slot) != slot_value(before, slot):
                changed.append(slot)
        except ValueError:  # `after` does not say that slot at all
            changed.append(slot)
    return changed


def slot_value(caption: Caption, slot: Slot) -> str:
    """The surface form in `slot`; ValueError when the caption does not say that slot."""
    if slot.phrase is None:
        value = caption.relation
    else:
        phrase = (caption.first, caption.second)[slot.phrase]
        value = None if phrase is None else getattr(phrase, slot.name)
    if value is None:
        raise ValueError(f"caption {caption.text()!r} says nothing in slot {slot}")
    return value


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
    """Replace the concept in `slot` by a different concept, in one of its surface forms drawn uniformly
    (a rule picks from the word list; it does not know which synonym is rare)."""
    current = concept_of(slot.name, slot_value(caption, slot))
    other = str(rng.choice(sorted(c for c in SLOT_LEXICONS[slot.name] if c != current)))
    return _set(caption, slot, str(rng.choice(surface_forms(slot.name, other))))


def swap_positive(caption: Caption) -> Caption:
    """Exchange the conjuncts of "X and Y" (ValueError when the caption has no conjunction)."""
    if not caption.is_conjunction:
        raise ValueError(f"caption {caption.text()!r} has no 'and' to swap around")
    return Caption(caption.second, caption.first)


def swap_negative(caption: Caption, rng: np.random.Generator) -> Caption:
    """Exchange one attribute (size or colour) between the two objects, changing what is bound where.

    Only attributes both phrases say, with different concepts, are eligible: exchanging two equal
    sizes changes nothing.
    """
    second = caption.second
    if second is None:
        raise ValueError(f"caption {caption.text()!r} names one object: there is nothing to swap with")
    slots = [
        s
        for s in ADJECTIVE_SLOTS
        if None not in (caption.first.concept(s), second.concept(s))
        and caption.first.concept(s) != second.concept(s)
    ]
    if not slots:
        raise ValueError(f"caption {caption.text()!r} has no differing attribute to swap")
    name = str(rng.choice(slots))
    first_form, second_form = getattr(caption.first, name), getattr(second, name)
    return replace(
        caption,
        first=replace(caption.first, **{name: second_form}),
        second=replace(second, **{name: first_form}),
    )


def parse_caption(text: str) -> Caption:
    """Parse "a [S] [C] H [<and|relation> a [S] [C] H]" back into a `Caption`; ValueError says what is wrong."""
    words = text.split()
    try:
        first, position = _parse_phrase(words, 0)
        if position == len(words):
            return Caption(first)
        if ARTICLE not in words[position:]:
            raise ValueError("no second object phrase")
        article = words.index(ARTICLE, position)
        middle = " ".join(words[position:article])
        relation = None if middle == CONJUNCTION else middle
        if relation is not None:
            concept_of(RELATION_SLOT, relation)
        second, position = _parse_phrase(words, article)
        if position != len(words):
            raise ValueError(f"unexpected words after the second object: {' '.join(words[position:])!r}")
    except KeyError as err:
        raise ValueError(f"caption {text!r}: {err.args[0]}") from None
    except ValueError as err:
        raise ValueError(f"not a synthetic-world caption: {text!r} ({err})") from None
    return Caption(first, second, relation)


def _parse_phrase(words: list[str], position: int) -> tuple[ObjectPhrase, int]:
    """Read "a [size] [colour] shape" at `position`; return the phrase and the position after it."""
    if position >= len(words) or words[position] != ARTICLE:
        raise ValueError(f"expected {ARTICLE!r} at word {position}")
    found: dict[str, str | None] = dict.fromkeys(ADJECTIVE_SLOTS)
    position += 1
    for slot in ADJECTIVE_SLOTS:
        if position < len(words) and any(
            words[position] in forms for forms in ATTRIBUTE_LEXICONS[slot].values()
        ):
            found[slot] = words[position]
            position += 1
    if position >= len(words):
        raise ValueError("an object phrase has no shape noun")
    concept_of("shape", words[position])  # KeyError names an unknown noun
    return ObjectPhrase(found["size"], found["colour"], words[position]), position + 1


def caption_matches(scene: Scene, caption: str | Caption) -> bool:
    """True when the caption is a correct (possibly under-specified) description of the drawn scene.

    Each phrase must fit a distinct object; a relation must hold between the positions at which
    those objects were drawn. A one-object caption must fit one of the two objects.
    """
    parsed = parse_caption(caption) if isinstance(caption, str) else caption
    if parsed.second is None:
        return any(parsed.first.describes(obj) for obj in scene.objects)
    for i, j in ((0, 1), (1, 0)):
        if parsed.first.describes(scene.objects[i]) and parsed.second.describes(scene.objects[j]):
            if parsed.relation is None:
                return True
            if scene.relation_between(i, j) == concept_of(RELATION_SLOT, parsed.relation):
                return True
    return False
