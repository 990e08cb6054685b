"""The synthetic compositional world as `datasets.Dataset`s, in the package's shared schema.

Why: the whole pipeline (fine-tuning with and without hard positives, REPLACE/SWAP evaluation) must
run with no downloads. These emitters give sets with exactly the columns of the real REPLACE, SWAP
and COCO fine-tuning sets (`hf_hardpos.columns`), so the scorer, the trainer and `hardpos eval`
take them unchanged.

The pretraining pairs stand in for the web crawl a public CLIP was trained on: their captions are
under-specified alt-text (`captions.describe_alt_text`), while the fine-tuning and evaluation sets
carry precise captions, as COCO and the benchmarks do.

Determinism: row `i` of a set is drawn from its own generator seeded by (seed, set kind, i), so a
seed fixes every pixel and caption, a larger `n` only appends rows, and two kinds of set drawn with
the same seed never share scenes by construction of their streams.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from datasets import Dataset, Features, Image, Value

from hf_hardpos import columns
from hf_hardpos.synthetic import captions as cap
from hf_hardpos.synthetic.lexicon import (
    ARTICLE,
    ATTRIBUTE_LEXICONS,
    CONJUNCTION,
    RELATIONS,
)
from hf_hardpos.synthetic.scene import Scene, sample_scene

REPLACE_SUBSETS = ("attributes", "relations")
SUBSET = "subset"  # extra column of the REPLACE sets, as in the upstream-built set

# Share of captions of the fine-tuning set that are conjunctions ("X and Y") rather than relations;
# like COCO, only those get a SWAP hard positive.
CONJUNCTION_PROBABILITY = 0.4


def _features(*text_columns: str) -> Features:
    """An image column, then string columns: the image id, the caption and `text_columns`."""
    names = (columns.IMAGE_ID, columns.CAPTION, *text_columns)
    return Features({columns.IMAGE: Image(), **{name: Value("string") for name in names}})


PRETRAIN_FEATURES = _features()
EVAL_FEATURES = _features(columns.HARD_NEGATIVE, columns.HARD_POSITIVE)
REPLACE_FEATURES = _features(columns.HARD_NEGATIVE, columns.HARD_POSITIVE, SUBSET)
FINETUNE_FEATURES = _features(*columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS)

Example = tuple[Scene, dict[str, Any]]


def _replace_attributes(scene: Scene, rng: np.random.Generator) -> dict[str, Any]:
    """Edit an adjective (colour or size) of one object, as REPLACE's attribute rows do (never the noun)."""
    caption = cap.describe(scene, rng, conjunction=bool(rng.random() < 0.5))
    slot = cap.Slot(str(rng.choice(cap.ADJECTIVE_SLOTS)), int(rng.integers(0, 2)))
    return _eval_row(
        caption, cap.replace_negative(caption, slot, rng), cap.replace_positive(caption, slot, rng)
    )


def _replace_relations(scene: Scene, rng: np.random.Generator) -> dict[str, Any]:
    caption = cap.describe(scene, rng, conjunction=False)
    slot = cap.Slot(cap.RELATION_SLOT)
    return _eval_row(
        caption, cap.replace_negative(caption, slot, rng), cap.replace_positive(caption, slot, rng)
    )


def _swap(scene: Scene, rng: np.random.Generator) -> dict[str, Any]:
    caption = cap.describe(scene, rng, conjunction=True)
    return _eval_row(caption, cap.swap_negative(caption, rng), cap.swap_positive(caption))


def _eval_row(caption: cap.Caption, negative: cap.Caption, positive: cap.Caption) -> dict[str, Any]:
    return {
        columns.CAPTION: caption.text(),
        columns.HARD_NEGATIVE: negative.text(),
        columns.HARD_POSITIVE: positive.text(),
    }


def _finetune(scene: Scene, rng: np.random.Generator) -> dict[str, Any]:
    caption = cap.describe(scene, rng, conjunction=bool(rng.random() < CONJUNCTION_PROBABILITY))
    slots = cap.editable_slots(caption)
    positive_slot = slots[int(rng.integers(0, len(slots)))]
    negative_slot = slots[int(rng.integers(0, len(slots)))]
    return {
        columns.CAPTION: caption.text(),
        columns.HARD_POSITIVE_REPLACE: cap.replace_positive(caption, positive_slot, rng).text(),
        columns.HARD_POSITIVE_SWAP: (cap.swap_positive(caption).text() if caption.is_conjunction else None),
        columns.HARD_NEGATIVE_REPLACE: cap.replace_negative(caption, negative_slot, rng).text(),
        columns.HARD_NEGATIVE_SWAP: cap.swap_negative(caption, rng).text(),
    }


def _pretrain(scene: Scene, rng: np.random.Generator) -> dict[str, Any]:
    return {columns.CAPTION: cap.describe_alt_text(scene, rng).text()}


# Each kind of set: its random stream (part of every row's seed) and how a row's captions are made.
_ROW_MAKERS: dict[str, tuple[int, Callable[[Scene, np.random.Generator], dict[str, Any]]]] = {
    "replace-attributes": (1, _replace_attributes),
    "replace-relations": (2, _replace_relations),
    "swap": (3, _swap),
    "finetune": (4, _finetune),
    "pretrain": (5, _pretrain),
}


def sample_examples(
    kind: str, n: int, seed: int = 0, *, image_size: int = 32, start: int = 0
) -> list[Example]:
    """The scenes and caption columns behind rows `start` to `n - 1` of a set, without images encoded.

    `kind` is one of "replace-attributes", "replace-relations", "swap", "finetune", "pretrain". Row `i` is
    the same whatever `start` and `n` are, so a set can be drawn in parts.
    """
    if kind not in _ROW_MAKERS:
        raise ValueError(f"unknown synthetic set kind {kind!r}; known: {sorted(_ROW_MAKERS)}")
    if not 0 <= start <= n:
        raise ValueError(f"need 0 <= start <= n, got start={start}, n={n}")
    stream, make_row = _ROW_MAKERS[kind]
    examples = []
    for index in range(start, n):
        rng = np.random.default_rng([seed, stream, index])
        scene = sample_scene(rng, image_size)
        row = {columns.IMAGE_ID: f"synthetic-{kind}-{seed}-{index:06d}", **make_row(scene, rng)}
        examples.append((scene, row))
    return examples


def _to_dataset(examples: list[Example], features: Features, extra: dict[str, Any] | None = None) -> Dataset:
    data: dict[str, list[Any]] = {name: [] for name in features}
    for scene, row in examples:
        row = {**row, **(extra or {}), columns.IMAGE: {"bytes": scene.to_png(), "path": None}}
        for name in features:
            data[name].append(row[name])
    return Dataset.from_dict(data, features=features)


class RenderedRows:
    """A set's rows as its `datasets.Dataset` yields them (the image a PIL image, every other column a
    string or None), rendered once and held in memory: what the demo trains on.

    Why: the demo reads each training row once per epoch (8 pretraining epochs, 5 per fine-tune), and a
    `datasets.Image` column decodes its PNG on every read; on 2 CPU cores reading and decoding rows was
    about 40% of the time the trainer's collator spent on a batch. PNG is lossless, so these are the same
    pixels. A map-style dataset (`len`, indexing) with `column_names`, which `HardPosTrainer` checks.
    """

    def __init__(self, column_names: list[str], rows: list[dict[str, Any]]):
        self.column_names = column_names
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]


def render_rows(kind: str, n: int, seed: int = 0, *, image_size: int = 32, start: int = 0) -> RenderedRows:
    """Rows `start` to `n - 1` of `make_finetune_dataset` ("finetune") or `make_pretrain_dataset` ("pretrain"),
    images rendered straight to PIL (no PNG round trip)."""
    features = {"finetune": FINETUNE_FEATURES, "pretrain": PRETRAIN_FEATURES}[kind]
    rows = [
        {name: scene.render() if name == columns.IMAGE else row[name] for name in features}
        for scene, row in sample_examples(kind, n, seed, image_size=image_size, start=start)
    ]
    return RenderedRows(list(features), rows)


def make_replace_dataset(
    n: int, seed: int = 0, subset: str = "attributes", *, image_size: int = 32
) -> Dataset:
    """A REPLACE set: c_n changes one attribute (or the relation), c_p swaps the same word for a synonym."""
    if subset not in REPLACE_SUBSETS:
        raise ValueError(f"unknown REPLACE subset {subset!r}; known: {list(REPLACE_SUBSETS)}")
    examples = sample_examples(f"replace-{subset}", n, seed, image_size=image_size)
    return _to_dataset(examples, REPLACE_FEATURES, {SUBSET: subset})


def make_swap_dataset(n: int, seed: int = 0, *, image_size: int = 32) -> Dataset:
    """A SWAP set: "X and Y"; c_n exchanges an attribute between X and Y, c_p reads "Y and X"."""
    return _to_dataset(sample_examples("swap", n, seed, image_size=image_size), EVAL_FEATURES)


def make_finetune_dataset(n: int, seed: int = 0, *, image_size: int = 32) -> Dataset:
    """A fine-tuning set in the COCO schema: REPLACE/SWAP hard positives and negatives per caption.

    `hard_positive_swap` is null where the caption has no "and" (relational captions), as upstream.
    """
    return _to_dataset(sample_examples("finetune", n, seed, image_size=image_size), FINETUNE_FEATURES)


def make_pretrain_dataset(n: int, seed: int = 0, *, image_size: int = 32) -> Dataset:
    """Image / alt-text pairs for contrastive pretraining (no hard positives or negatives).

    The captions are under-specified as web alt-text is (`captions.AltTextStyle`): one object or
    two, adjectives often left out, relations rarely said, synonyms at Zipf frequencies.
    """
    return _to_dataset(sample_examples("pretrain", n, seed, image_size=image_size), PRETRAIN_FEATURES)


def tokenizer_corpus() -> list[str]:
    """Sentences that contain every word and phrase of the world, for training the tiny tokenizer.

    Every object phrase in every surface form, and every relation form between two fixed phrases, so
    a BPE trained on it has seen each word as a whole.
    """
    sentences = []
    forms = {slot: [f for fs in table.values() for f in fs] for slot, table in ATTRIBUTE_LEXICONS.items()}
    for size in forms["size"]:
        for colour in forms["colour"]:
            for shape in forms["shape"]:
                sentences.append(f"{ARTICLE} {size} {colour} {shape}")
    anchor = sentences[0]
    for forms_of_relation in RELATIONS.values():
        for relation in forms_of_relation:
            sentences.append(f"{anchor} {relation} {anchor}")
    sentences.append(f"{anchor} {CONJUNCTION} {anchor}")
    return sentences
