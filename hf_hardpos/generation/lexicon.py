"""Word tables behind the rule-based hard positives and hard negatives.

Why data and not code: the REPLACE benchmark's hard positives were made from a small hand-written
synonym table (paper Appendix C). The table is not published as such, so we read it off the upstream
pairs (c, c_p) of REPLACE's `data/` files vs `swapped_data/...` (`data.replace`): every row differs
from its hard positive by exactly one of the edits below (counts are rows of the upstream files).
Users do not have that data, so the table lives here, in the package.

Each rule carries the context guards that keep a whole-word replacement grammatical and
meaning-preserving outside REPLACE's three-word captions (e.g. "dressed in" must not become
"dressed within"). Upstream applied its table by substring replacement, which produced
"ivory ivoryboard", "covecrimson", "belengthying" and "within front of" (354 rows); the matcher in
`rules.py` works on whole tokens and honours `protected_phrases()` (fixed expressions and every
multi-word relation), so none of those can happen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rule:
    """Replace the token sequence `source` by one of `targets`.

    `source`/`targets` are lowercase, words separated by single spaces. A match is vetoed when the
    token right after it is in `not_before`, the token right before it is in `not_after`, or (with
    `needs_next`) when no word follows it (e.g. "left behind" has no object for "to the rear of").
    """

    source: str
    targets: tuple[str, ...]
    category: str
    not_before: frozenset[str] = field(default_factory=frozenset)
    not_after: frozenset[str] = field(default_factory=frozenset)
    needs_next: bool = False


# fmt: off
# The word tables are written as paragraphs of words (ruff format would put one word per line).
# Phrases whose words must never be replaced one at a time: an idiom, a fixed expression, or a
# multi-word preposition that only a rule for the whole phrase may rewrite.
PROTECTED_PHRASES: tuple[str, ...] = (
    "in front of", "in between", "black and white", "year old", "years old", "month old", "months old",
    "week old", "weeks old", "day old", "days old", "side by side", "one by one", "by itself",
    "by themselves", "by himself", "by herself", "next to each other", "long time", "as long as",
    "clear of", "little bit", "small talk",
)

# Multi-word relations: no single word inside them may be replaced ("in back of" must never become
# "within back of", the class of upstream's "within front of"); only a rule for the whole phrase
# may rewrite one. Every multi-word source and target of the rule tables is protected too (see
# `protected_phrases`).
MULTIWORD_RELATIONS: tuple[str, ...] = (
    "in back of", "in front of", "on top of", "next to", "close to", "far from", "out of", "inside of",
    "outside of", "ahead of", "in between", "in middle of", "in the middle of", "in center of",
    "in the center of", "on the left of", "on the right of", "to the left of", "to the right of",
    "on side of", "on the side of", "on edge of", "on the edge of", "at the top of", "at the bottom of",
    "at the end of", "on the back of", "in the back of", "on the front of", "in the front of",
    "on either side of", "along the side of", "across from", "away from", "instead of", "because of",
    "in place of",
)

_AUXILIARIES = frozenset({"is", "are", "was", "were", "be", "been", "being", "am"})
# Participles before "by" mark a passive agent ("pulled by a horse"), not a location.
_PASSIVE_PARTICIPLES = frozenset(
    {"taken", "held", "ridden", "drawn", "driven", "made", "eaten", "seen", "thrown", "worn",
     "shown", "flown", "sold", "written", "built", "hit", "caught", "led", "fed", "followed",
     "surrounded", "covered", "pulled", "pushed", "guided", "lined", "bordered", "flanked",
     "framed", "topped", "filled", "lit", "watched", "used", "owned", "operated", "parked",
     "chased", "carried", "photographed", "attended", "accompanied", "separated", "supported"}
)
# "dressed in", "covered in snow": here "in" means wearing/coated, not containment.
_IN_NOT_AFTER = frozenset(
    {"dressed", "clad", "covered", "coated", "filled", "wrapped", "painted", "written", "done",
     "interested", "involved", "engaged", "dipped", "soaked", "drenched", "smothered", "topped",
     "decorated", "lined", "plugged", "checked", "logged", "tucked", "sleeping", "lying", "laying"}
)
_PHRASAL_PARTICLES = frozenset({"out", "up", "down", "around", "over", "off", "for", "like", "forward"})
_STANDING_PARTICLES = frozenset(
    {"still", "about", "by", "back", "aside", "tall", "guard", "apart", "together"}
)
_MOTION_PREPOSITIONS = frozenset(
    {"on", "along", "down", "up", "in", "through", "across", "into", "past", "with", "toward",
     "towards", "around", "by", "at", "over", "under", "onto", "alongside", "behind", "beside",
     "next", "near", "inside", "outside", "off", "away", "to", "from", "and"}
)
_AGE_UNITS = frozenset({"year", "years", "month", "months", "week", "weeks", "day", "days"})

# ---- hard positives: the paper's REPLACE table (read off the upstream data) -------------------
# Per REPLACE subset: (source, target, upstream rows with that edit), most frequent first.
# Attributes: 23 source words. Relations: 15 sources for 14 relations ("wearing"/"wears" share the
# target "in"); "riding on" -> "traveling on" is how upstream avoided "traveling on on".
PAPER_SYNONYMS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "attribute": (
        ("white", "ivory", 2740), ("black", "ebony", 1789), ("blue", "sapphire", 1253),
        ("brown", "chestnut", 946), ("red", "crimson", 827), ("green", "emerald", 754), ("large", "big", 571),
        ("small", "tiny", 358), ("long", "lengthy", 270), ("silver", "metallic", 241),
        ("standing", "upright", 153), ("big", "large", 146), ("sitting", "seated", 88),
        ("walking", "strolling", 64), ("wet", "damp", 62), ("smiling", "happy", 50), ("old", "aged", 46),
        ("clear", "unclouded", 43), ("eating", "ingesting", 41), ("young", "youthful", 36),
        ("huge", "big", 31), ("hanging", "dangling", 29), ("looking", "gazing", 27),
    ),
    "relation": (
        ("in", "within", 6172), ("wearing", "in", 3591), ("behind", "to the rear of", 1056),
        ("holding", "grasping", 950), ("on top of", "on", 683), ("near", "next to", 657),
        ("sitting", "seated", 639), ("next to", "near", 621), ("under", "beneath", 467), ("by", "near", 393),
        ("wears", "in", 385),
        ("hanging", "dangling", 382), ("above", "on top of", 298), ("walking", "strolling", 288),
        ("riding", "traveling on", 245), ("riding on", "traveling on", 38),
    ),
}
# Our own additions (not in the paper's table): common COCO words with an unambiguous synonym.
EXTRA_SYNONYMS: dict[str, str] = {
    "in back of": "behind", "beside": "next to", "atop": "on top of", "couch": "sofa", "sofa": "couch",
    "photograph": "photo", "television": "tv", "bicycle": "bike", "bike": "bicycle", "airplane": "plane",
    "aeroplane": "plane", "automobile": "car", "kitten": "kitty", "puppy": "pup",
}

# Sources that the relation-targeted kinds may touch ("replace-verb", "replace-spatial").
VERB_SOURCES = frozenset(
    {"wearing", "wears", "holding", "sitting", "standing", "walking", "riding", "riding on", "hanging",
     "looking", "eating", "smiling"}
)
SPATIAL_SOURCES = frozenset(
    {"in", "behind", "in back of", "on top of", "near", "next to", "under", "by", "above", "beside", "atop"}
)
# fmt: on

# Context guards per source word (shared by the hard-positive and hard-negative tables).
_GUARDS: dict[str, dict[str, Any]] = {
    "in": {"not_after": _IN_NOT_AFTER, "needs_next": True},
    "by": {"not_after": _PASSIVE_PARTICIPLES, "needs_next": True},
    "wearing": {"not_after": _AUXILIARIES, "needs_next": True},
    **dict.fromkeys(("wears", "behind", "above", "under", "near"), {"needs_next": True}),
    "riding": {"not_before": _MOTION_PREPOSITIONS, "needs_next": True},
    "holding": {"not_before": frozenset({"hands", "up", "on", "out"}), "needs_next": True},
    "hanging": {"not_before": frozenset({"out"})},
    "looking": {"not_before": _PHRASAL_PARTICLES},
    "old": {"not_after": _AGE_UNITS},
    # "standing up / still / around" are phrasal verbs: "upright up" is not English.
    "standing": {"not_before": _PHRASAL_PARTICLES | _STANDING_PARTICLES | frozenset({"ovation", "room"})},
    "long": {
        "not_before": frozenset({"as", "time", "ago", "island", "way"}),
        "not_after": frozenset({"as", "how", "so"}),
    },
    "clear": {"not_before": frozenset({"of", "up", "out", "away"})},
    "silver": {"not_before": frozenset({"lining"})},
}


def hard_positive_rules(include_extra: bool = True) -> tuple[Rule, ...]:
    """Synonym rules: the paper's table (attributes, relations) plus, optionally, our extras.

    "sitting", "walking" and "hanging" appear in both paper subsets with the same target; they are
    kept once.
    """
    table: dict[str, tuple[str, str]] = {}
    for category, edits in PAPER_SYNONYMS.items():
        for source, target, _rows in edits:
            table.setdefault(source, (target, category))
    if include_extra:
        for source, target in EXTRA_SYNONYMS.items():
            table.setdefault(source, (target, "extra"))
    return tuple(Rule(s, (t,), c, **_GUARDS.get(s, {})) for s, (t, c) in table.items())


def synonyms() -> dict[str, frozenset[str]]:
    """Word -> its synonyms in the hard-positive table, both directions ("white" <-> "ivory").

    The masked-LM negatives refuse these fills: a synonym of the masked word is a hard positive,
    not a negative.
    """
    table: dict[str, set[str]] = {}
    for rule in hard_positive_rules(include_extra=True):
        for target in rule.targets:
            table.setdefault(rule.source, set()).add(target)
            table.setdefault(target, set()).add(rule.source)
    return {word: frozenset(others) for word, others in table.items()}


# ---- hard negatives: antonyms and co-hyponyms (CREPE / SugarCrepe "replace") ------------------
# fmt: off
COLOURS: tuple[str, ...] = (
    "white", "black", "red", "blue", "green", "yellow", "brown", "orange", "pink", "purple", "gray",
)
# fmt: on
# Co-hyponym groups: any other member of the group is a meaning-changing replacement.
_COHYPONYM_GROUPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "colour": (COLOURS,),
    "material": (("wooden", "metal", "plastic", "stone", "brick", "leather", "concrete"),),
    "action": (
        ("sitting", "standing", "lying"),
        ("walking", "running"),
        ("pushing", "pulling"),
        ("throwing", "catching"),
        ("opening", "closing"),
        ("smiling", "frowning"),
    ),
}


def _opposites(*pairs: tuple[str, str]) -> dict[str, tuple[str, ...]]:
    """Each word of each pair as the other's antonym."""
    return {word: (other,) for a, b in pairs for word, other in ((a, b), (b, a))}


# Antonyms: pairs of mutual opposites, then directed entries where the reverse would not be a clean
# opposite ("big" -> "small", but "small" -> "large").
_ANTONYMS: dict[str, dict[str, tuple[str, ...]]] = {
    "size": {
        **_opposites(("large", "small"), ("huge", "tiny"), ("thin", "thick"), ("wide", "narrow")),
        "big": ("small",), "little": ("big",), "tall": ("short",), "long": ("short",), "short": ("tall", "long"),
    },
    "state": {
        **_opposites(("open", "closed"), ("empty", "full"), ("wet", "dry"), ("clean", "dirty"), ("old", "new"),
                     ("light", "dark"), ("hot", "cold")),
        "young": ("old",),
    },
    "spatial": {
        **_opposites(("on the left of", "on the right of"), ("above", "below"), ("on top of", "underneath"),
                     ("in front of", "behind"), ("inside", "outside"), ("next to", "far from"),
                     ("to the left of", "to the right of"), ("on the left", "on the right"), ("left side", "right side"),
                     ("at the top of", "at the bottom of"), ("into", "out of"), ("up", "down")),
        "under": ("above",), "beneath": ("above",), "in back of": ("in front of",), "near": ("far from",),
    },
    "action": {
        **_opposites(("entering", "leaving")),
        "holding": ("dropping",), "riding": ("pushing",), "climbing": ("descending",), "sleeping": ("awake",),
        "standing": ("sitting", "lying"),
    },
}  # fmt: skip
# fmt: off
# Negative-side guards for words that are also nouns/verbs in other senses.
_NEGATIVE_GUARDS: dict[str, dict[str, Any]] = {
    "light": {
        "not_before": frozenset({"pole", "poles", "post", "bulb", "switch", "fixture"}), "needs_next": True
    },
    "dark": {"needs_next": True},
    # Phrasal verbs ("set up", "sit down") are not directions.
    "up": {
        "not_after": frozenset(
            {"set", "pick", "picks", "picking", "hold", "holds", "holding", "line", "lined", "close",
             "dressed", "stacked", "piled", "lit", "cut", "hung", "end", "ended", "propped", "stood"}
        )
    },
    "down": {
        "not_after": frozenset(
            {"upside", "lay", "lays", "laying", "sit", "sits", "sitting", "lying", "lie", "lies", "bent",
             "bending", "broken", "slow", "slowing", "calm"}
        )
    },
    # Materials are nouns too ("a pile of stone and brick"): only one before a noun is an attribute.
    **dict.fromkeys(
        ("metal", "stone", "brick", "leather", "concrete"),
        {"needs_next": True, "not_before": frozenset({"of", "and"})},
    ),
    "plastic": {"needs_next": True, "not_before": frozenset({"of", "and", "wrap"})},
    "orange": {
        "needs_next": True,
        "not_before": frozenset({"juice", "slices", "slice", "peel", "and", "of", "is", "are"}),
    },
    "short": {"not_before": frozenset({"of", "sleeve", "sleeved", "while"})},
    "full": {"not_before": frozenset({"of", "length", "size", "body"})},
    "closing": {"not_before": frozenset({"in", "up"})},
    "clean": {"needs_next": True, "not_before": frozenset({"up"})},
    # "an old man" -> "a new man" is not a sensible negative; people age, objects are new/old.
    "old": {
        "not_before": frozenset(
            {"man", "men", "woman", "women", "lady", "ladies", "person", "people", "couple", "guy",
             "gentleman"}
        ),
        "not_after": _AGE_UNITS,
    },
    "new": {"not_before": frozenset({"york", "orleans", "zealand", "jersey", "mexico", "delhi"})},
    "into": {"needs_next": True},
    "out of": {"needs_next": True},
}
# fmt: on


def hard_negative_rules() -> tuple[Rule, ...]:
    """Meaning-changing rules: each source word maps to the replacements it may become."""
    targets: dict[str, tuple[list[str], str]] = {}
    for category, groups in _COHYPONYM_GROUPS.items():
        for group in groups:
            for word in group:
                entry = targets.setdefault(word, ([], category))
                entry[0].extend(w for w in group if w != word and w not in entry[0])
    for category, table in _ANTONYMS.items():
        for word, replacements in table.items():
            entry = targets.setdefault(word, ([], category))
            entry[0].extend(w for w in replacements if w not in entry[0])
    return tuple(
        Rule(
            source,
            tuple(replacements),
            category,
            **{**_GUARDS.get(source, {}), **_NEGATIVE_GUARDS.get(source, {})},
        )
        for source, (replacements, category) in targets.items()
    )


def protected_phrases() -> frozenset[str]:
    """Every phrase inside which no single word may be replaced: fixed expressions, multi-word
    relations, and every multi-word source or target of the positive and negative tables."""
    rules = hard_positive_rules(include_extra=True) + hard_negative_rules()
    multiword = {p for rule in rules for p in (rule.source, *rule.targets) if " " in p}
    return frozenset(PROTECTED_PHRASES) | frozenset(MULTIWORD_RELATIONS) | multiword


# fmt: off
# Attribute words whose exchange between two objects makes a SWAP hard negative, and which may be
# coordinated ("blue and white") in a SWAP hard positive.
SWAPPABLE_ATTRIBUTES: dict[str, str] = {
    **{c: "colour" for c in COLOURS + ("grey", "silver", "gold", "golden", "tan", "beige")},
    **{m: "material" for m in ("wooden", "metal", "metallic", "plastic", "stone", "brick", "leather",
                                "glass", "concrete", "ceramic", "paper", "steel", "wood")},
    **{s: "size" for s in ("large", "big", "huge", "small", "tiny", "little", "tall", "short",
                            "long", "thin", "thick", "wide", "narrow")},
    **{s: "state" for s in ("open", "closed", "empty", "full", "wet", "dry", "clean", "dirty",
                             "old", "new", "young", "striped", "spotted", "checkered", "dark",
                             "bright", "shiny", "fluffy", "furry", "round", "square")},
}

# ---- closed word classes for the "and"-swap parser ---------------------------------------------
DETERMINERS = frozenset(
    {"a", "an", "the", "this", "that", "these", "those", "his", "her", "their", "its", "my", "our",
     "your", "some", "several", "many", "few", "two", "three", "four", "five", "six", "seven",
     "eight", "nine", "ten", "one", "both", "each", "every", "another", "other"}
)
PREPOSITIONS = frozenset(
    {"of", "with", "on", "in", "at", "by", "near", "under", "over", "above", "below", "behind",
     "beside", "between", "inside", "outside", "into", "onto", "from", "to", "for", "through",
     "across", "along", "around", "against", "beneath", "underneath", "next", "atop", "while",
     "during", "without", "like", "toward", "towards", "past", "off", "up", "down", "among"}
)
POSSESSIVES = frozenset({"his", "her", "their", "its", "my", "our", "your"})
AUXILIARIES = _AUXILIARIES | frozenset({"has", "have", "had", "does", "do", "did", "can", "will",
                                        "could", "would", "may", "might", "should", "'s"})
# Words that end a noun phrase besides prepositions and verbs: relative pronouns, conjunctions.
CLAUSE_WORDS = frozenset({"that", "which", "who", "whom", "whose", "where", "when", "as", "or", "but",
                          "so", "because", "then", "there", "it", "they", "he", "she", "while"})
# Frames before a list of objects that do not bind to either conjunct ("a photo of ...").
NOUN_PHRASE_FRAMES: tuple[tuple[str, ...], ...] = (
    ("there", "is"), ("there", "are"), ("this", "is"), ("these", "are"), ("here", "is"),
    ("here", "are"), ("a", "photo", "of"), ("a", "picture", "of"), ("an", "image", "of"),
    ("a", "close", "up", "of"), ("close", "up", "of"), ("a", "view", "of"),
)
# "-ing" words that are nouns, not participles (so they do not start or end a verb phrase).
ING_NOUNS = frozenset(
    {"building", "buildings", "ceiling", "clothing", "painting", "paintings", "ring", "rings", "king",
     "thing", "things", "string", "wing", "wings", "evening", "morning", "icing", "frosting",
     "topping", "toppings", "stuffing", "pudding", "dumpling", "dumplings", "railing", "railings",
     "sibling", "awning", "bedding", "wedding", "sling", "swing", "spring", "ping", "sing",
     "wring", "ding", "bring", "sting", "swimming", "lighting", "sign", "clearing",
     "crossing", "dressing", "filling", "landing", "living", "parking", "serving",
     "servings", "siding", "skiing", "snowboarding", "surfing", "skateboarding", "seating",
     "boarding", "shopping", "something", "anything", "nothing", "everything", "during", "drawing",
     "drawings", "carving", "opening", "setting", "ending", "beginning"}
)
# fmt: on
