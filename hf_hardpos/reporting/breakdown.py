"""Which replacements a model is brittle on: rows grouped by the phrase the hard positive replaced (REPLACE)
or the pair the hard negative swapped (SWAP), and rolled up by the type of that phrase.

Kamath et al. (ECCV 2024, Sec. 5) read brittleness per replacement to find the words a model is
oversensitive to. A group is only worth reading when it names a whole phrase and holds enough rows:

- **REPLACE**: the word-level difference of c and c_p (`data.replace.phrase_diff`, what the REPLACE builder
  records) cuts multi-word relations apart: "to the left of" -> "left of" leaves `to the -> ""`, the
  same key as "to the right of" -> "right of", and "on top of" -> "on" leaves `top of -> ""`. `replace_key`
  widens that difference over the relation words around it (`RELATION_WORDS`), so a phrase stays whole:
  `to the left of -> left of`, `on top of -> on`, `in front of -> within front of`.
- **SWAP**: c_n exchanges two attributes of c between its objects (ARO's VG-Attribution, whose rows
  carry that pair as `attributes`). The key is that unordered pair (`small / large`), read from the
  `attributes` column when present, else from the two exchanged runs of words of c and c_n; never the
  whole caption, which is unique per row.

Groups with fewer than `MIN_ROWS` rows are counted but not listed (two rows at 100 % say nothing), and
every listed rate carries its 95 % Wilson interval (`metrics.wilson_interval`; rows taken as
independent). `rollup` sums the groups by type: colour, size, material, object, spatial relation,
action, other (`TYPE_WORDS`: the words of REPLACE's replacement table, paper Sec. 3, and the demo's
synthetic world).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import columns
from ..metrics import wilson_interval

MIN_ROWS = 5
MAX_LISTED = 40
ARROW = "\u2192"

# Words that belong to a spatial relation phrase ("to the left of", "on top of", "in front of", "next to").
# "the" joins a phrase only between two such words ("to the left"), never before a noun ("on the table").
RELATION_WORDS = frozenset(
    {
        "to",
        "of",
        "on",
        "in",
        "at",
        "by",
        "top",
        "front",
        "back",
        "left",
        "right",
        "rear",
        "side",
        "next",
        "behind",
        "under",
        "below",
        "beneath",
        "above",
        "over",
        "near",
        "inside",
        "outside",
        "within",
        "beside",
        "atop",
        "onto",
        "into",
        "across",
        "around",
        "along",
        "against",
        "the",
    }
)
_LINKING = frozenset({"the"})

TYPE_WORDS: dict[str, frozenset[str]] = {
    "colour": frozenset(
        {
            "white",
            "black",
            "blue",
            "brown",
            "red",
            "green",
            "yellow",
            "orange",
            "purple",
            "pink",
            "grey",
            "gray",
            "cyan",
            "ivory",
            "ebony",
            "sapphire",
            "chestnut",
            "crimson",
            "emerald",
            "azure",
            "golden",
            "gold",
            "violet",
            "amber",
            "turquoise",
            "rose",
            "beige",
            "tan",
            "teal",
            "maroon",
            "navy",
            "silver",
            "blond",
            "blonde",
            "dark",
            "light",
        }
    ),
    "size": frozenset(
        {
            "large",
            "big",
            "small",
            "tiny",
            "little",
            "huge",
            "long",
            "lengthy",
            "short",
            "tall",
            "giant",
            "thin",
            "thick",
            "wide",
            "narrow",
            "high",
            "low",
        }
    ),
    "material": frozenset(
        {
            "wooden",
            "wood",
            "metal",
            "metallic",
            "plastic",
            "glass",
            "stone",
            "brick",
            "leather",
            "cotton",
            "paper",
            "concrete",
            "steel",
            "ceramic",
            "marble",
            "wool",
        }
    ),
    "object": frozenset(
        {"cube", "block", "sphere", "ball", "cone", "pyramid", "diamond", "rhombus", "cross", "plus"}
    ),
    "spatial relation": RELATION_WORDS - _LINKING,
}
TYPE_ORDER = ("colour", "size", "material", "object", "spatial relation", "action", "other")


def replace_key(caption: str, hard_positive: str) -> tuple[str, str]:
    """The whole phrase of `caption` that `hard_positive` replaced, and its replacement (module docstring)."""
    source, target = caption.split(), hard_positive.split()
    prefix = 0
    while prefix < min(len(source), len(target)) and source[prefix] == target[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(source), len(target)) - prefix and source[-1 - suffix] == target[-1 - suffix]:
        suffix += 1
    start, end_s, end_t = prefix, len(source) - suffix, len(target) - suffix
    changed = source[start:end_s] + target[start:end_t]
    if not changed or not (set(changed) & RELATION_WORDS or start == end_s or start == end_t):
        return " ".join(source[start:end_s]), " ".join(target[start:end_t])

    def joins(word: str, beyond: str | None) -> bool:
        return word in RELATION_WORDS and (
            word not in _LINKING or (beyond is not None and beyond in RELATION_WORDS)
        )

    while start > 0 and joins(source[start - 1], source[start - 2] if start > 1 else None):
        start -= 1
    while end_s < len(source) and joins(
        source[end_s], source[end_s + 1] if end_s + 1 < len(source) else None
    ):
        end_s, end_t = end_s + 1, end_t + 1
    return " ".join(source[start:end_s]), " ".join(target[start:end_t])


def swap_pair(caption: str, hard_negative: str) -> tuple[str, str] | None:
    """The two word runs of `caption` that `hard_negative` exchanges (sorted), or None if it is not such a swap."""
    source, target = caption.split(), hard_negative.split()
    if len(source) != len(target):
        return None
    runs, current = [], []
    for index, (a, b) in enumerate(zip(source, target)):
        if a != b:
            current.append(index)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    if len(runs) != 2:
        return None
    first, second = ([source[i] for i in run] for run in runs)
    if [target[i] for i in runs[0]] != second or [target[i] for i in runs[1]] != first:
        return None
    return tuple(sorted((" ".join(first), " ".join(second))))  # type: ignore[return-value]


def type_of(phrase: str) -> str:
    """The replacement type of a key's words (`TYPE_ORDER`); verbs in -ing (and "wears") are actions."""
    words = phrase.lower().replace("/", " ").replace(ARROW, " ").split()
    for name in TYPE_ORDER[:-2]:
        if any(word in TYPE_WORDS[name] for word in words):
            return name
    if any(word.endswith("ing") or word in ("wears", "wear", "holds", "rides") for word in words):
        return "action"
    return "other"


def replacement_keys(dataset) -> tuple[list[str], list[str], str]:
    """Each row's key and its type, and what the keys are (for the page's caption)."""
    names = dataset.column_names
    if "attributes" in names:
        pairs = [tuple(sorted(str(a) for a in attrs)) for attrs in dataset["attributes"]]
        keys = [" / ".join(pair) for pair in pairs]
        return (
            keys,
            [type_of(k) for k in keys],
            "the attribute pair the hard negative swaps (the data's `attributes`)",
        )
    captions, negatives, positives = (
        dataset[c] for c in (columns.CAPTION, columns.HARD_NEGATIVE, columns.HARD_POSITIVE)
    )
    keys, types, swaps = [], [], 0
    for caption, negative, positive in zip(captions, negatives, positives):
        pair = swap_pair(caption, negative)
        if pair is not None:
            swaps += 1
            keys.append(" / ".join(pair))
            types.append(type_of(keys[-1]))
        else:
            replaced, replacement = replace_key(caption, positive)
            keys.append(f"{replaced} {ARROW} {replacement}")
            types.append(type_of(replaced))
    if swaps == len(keys):
        what = "the pair of words the hard negative swaps between the objects (unordered)"
    elif swaps == 0:
        what = "the whole phrase of c the hard positive replaces \u2192 its replacement"
    else:
        what = (
            "the phrase the hard positive replaces, or the pair the hard negative swaps (rows of both kinds)"
        )
    return keys, types, what


@dataclass(frozen=True)
class Group:
    """One key (or type) with its row count and two rates, each with its 95 % Wilson interval."""

    key: str
    type: str
    rows: int
    augmented: float
    augmented_interval: tuple[float, float]
    brittleness: float
    brittleness_interval: tuple[float, float]


def _group(key: str, kind: str, augmented: np.ndarray, brittle: np.ndarray) -> Group:
    rows = int(augmented.size)
    aug, brit = int(augmented.sum()), int(brittle.sum())
    return Group(
        key, kind, rows, aug / rows, wilson_interval(aug, rows), brit / rows, wilson_interval(brit, rows)
    )


def _order(groups: list[Group]) -> list[Group]:
    return sorted(groups, key=lambda g: (-g.brittleness, -g.rows, g.key))


def breakdown(
    keys: Sequence[str],
    types: Sequence[str],
    augmented: np.ndarray,
    brittle: np.ndarray,
    min_rows: int = MIN_ROWS,
) -> tuple[list[Group], int, int]:
    """Groups with at least `min_rows` rows, most brittle first (ties: more rows first), at most `MAX_LISTED`;
    and how many groups and rows were left out for having fewer rows."""
    augmented, brittle = np.asarray(augmented, dtype=bool), np.asarray(brittle, dtype=bool)
    index: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        index[key].append(i)
    kind = dict(zip(keys, types))
    groups = [_group(k, kind[k], augmented[rows], brittle[rows]) for k, rows in index.items()]
    small = [g for g in groups if g.rows < min_rows]
    return (
        _order([g for g in groups if g.rows >= min_rows])[:MAX_LISTED],
        len(small),
        sum(g.rows for g in small),
    )


def rollup(types: Sequence[str], augmented: np.ndarray, brittle: np.ndarray) -> list[Group]:
    """One group per replacement type, in `TYPE_ORDER`."""
    augmented, brittle = np.asarray(augmented, dtype=bool), np.asarray(brittle, dtype=bool)
    kinds = np.asarray(types)
    return [
        _group(t, t, augmented[kinds == t], brittle[kinds == t]) for t in TYPE_ORDER if np.any(kinds == t)
    ]


def worst(groups: Sequence[Group], min_rows: int = MIN_ROWS) -> Group | None:
    """The most brittle group with at least `min_rows` rows (None if none has that many)."""
    enough = _order([g for g in groups if g.rows >= min_rows])
    return enough[0] if enough else None
