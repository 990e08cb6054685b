"""CE-CLIP's four typed hard negatives for the COCO fine-tuning set's ``ce_clip`` config, read from
``hardpos generate --negative --method mlm`` outputs and joined to the captions by index, so every
file is checked first to have been generated from exactly these captions; and what the card says
of each type's procedure, as the file's manifest recorded it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import columns
from .checks import DataValidationError
from .coco_finetune_rows import CE_CLIP_CONFIG
from .generation_outputs import checked_manifest, read_records

CAPTIONS_FOR_GENERATE = (
    "export the captions of a default build (one made without --skip-missing, so every caption is a row) in "
    "its row order, e.g. "
    "datasets.load_dataset(FOLDER, split='train').select_columns(['caption']).to_json('captions.jsonl'), then "
    "run `hardpos generate --negative --method mlm --kind all --input captions.jsonl --output FILE.jsonl`"
)

# How each type is made (hf_hardpos.generation.mlm), for the card's column table.
_FILL = (
    "masked and replaced by the masked LM's best whole-word fill that is not the word itself, its plural or "
    "singular (+s/+es), or its synonym in the hard-positive lexicon"
)
TYPE_PROCEDURES = {
    "relation": "two different nouns (spaCy `NOUN`) swapped: the noun drawn for the caption and seed is swapped "
    "with each other noun and the swap the masked LM scores highest (log-probability of the two moved words "
    "in their new places) is kept",
    "attribute": f"one adjective (spaCy `ADJ`), drawn for the caption and seed, {_FILL}",
    "action": f"one verb (spaCy `VERB`), drawn for the caption and seed, {_FILL}",
    "object": f"one noun (spaCy `NOUN`), drawn for the caption and seed, {_FILL}",
}


@dataclass(frozen=True)
class TypedNegativesSource:
    """One `hardpos generate --method mlm` output: its path, the types it supplies, its manifest's options."""

    path: Path
    types: tuple[str, ...]
    options: Mapping[str, object]

    def describe(self) -> str:
        """The generation settings as the manifest recorded them (the card must not claim more)."""
        spacy_model = self.options.get("spacy_model")
        parts = [
            f"masked LM `{self.options.get('model', 'not recorded')}`",
            f"dtype {self.options.get('dtype', 'not recorded')}",
            f"spaCy pipeline `{spacy_model}`"
            if spacy_model
            else "POS tagger not recorded (a Python API run)",
            f"seed {self.options.get('seed', 'not recorded')}",
        ]
        return ", ".join(parts)


@dataclass
class TypedNegatives:
    """CE-CLIP's typed negatives aligned with the captions: column -> value per caption (None: none)."""

    values: dict[str, list[str | None]]
    sources: dict[str, TypedNegativesSource]  # type -> the file that supplied it


def read_mlm_negatives(
    paths: Sequence[str | Path], captions: Sequence[str], captions_path: Path
) -> TypedNegatives:
    """CE-CLIP's four typed negatives per caption, from one ``--kind all`` output or several single-type ones.

    Why so strict: the records are joined to the captions by index, so every file must have been generated
    from exactly these captions in annotation order (manifest sha256 and count, then each record's input
    text), and together the files must supply each of the four types exactly once, for every caption.
    Raises DataValidationError / MissingSourceError naming the file (and line) otherwise.
    """
    inputs = [caption or None for caption in captions]  # what `hardpos generate` reads for an empty caption
    values: dict[str, list[str | None]] = {
        name: [None] * len(inputs) for name in columns.CE_CLIP_NEGATIVE_COLUMNS
    }
    sources: dict[str, TypedNegativesSource] = {}
    for raw_path in paths:
        path = Path(raw_path)
        options = checked_manifest(path, inputs, captions_path, "--mlm-negatives", CAPTIONS_FOR_GENERATE)
        if (options.get("method"), options.get("polarity")) != ("mlm", "negative"):
            raise DataValidationError(
                f"{path}: written by `hardpos generate` with method {options.get('method')!r} and polarity "
                f"{options.get('polarity')!r} (its manifest); the {CE_CLIP_CONFIG} columns need masked-LM typed "
                "negatives: hardpos generate --negative --method mlm --kind all"
            )
        kind = options.get("kind")
        types = tuple(columns.CE_CLIP_NEGATIVE_TYPES) if kind == "all" else (kind,)
        if any(t not in columns.CE_CLIP_NEGATIVE_TYPES for t in types):
            raise DataValidationError(f"{path}: unknown masked-LM negative kind {kind!r} in its manifest")
        for t in types:
            if t in sources:
                raise DataValidationError(
                    f"{path}: supplies type {t}, which {sources[t].path} supplies too; pass one file per type"
                )
        read_records(
            path, {t: columns.CE_CLIP_NEGATIVE_TYPES[t] for t in types}, inputs, values, CAPTIONS_FOR_GENERATE
        )
        source = TypedNegativesSource(path, types, dict(options))
        sources.update(dict.fromkeys(types, source))
    missing = [t for t in columns.CE_CLIP_NEGATIVE_TYPES if t not in sources]
    if missing:
        given = ", ".join(str(p) for p in paths)
        raise DataValidationError(
            f"--mlm-negatives {given}: no records of type(s) {', '.join(missing)}; the {CE_CLIP_CONFIG} config "
            "needs all four (hardpos generate --negative --method mlm --kind all)"
        )
    return TypedNegatives(values, sources)


def typed_column_meanings(negatives: TypedNegatives) -> dict[str, str]:
    from ..generation import ce_clip  # imports transformers: only when a ce_clip config is built

    meanings = {}
    for kind, name in columns.CE_CLIP_NEGATIVE_TYPES.items():
        source = negatives.sources[kind]
        # `procedure` in the manifest: "ce-clip" (CE-CLIP's released TextAugment, the default) or "ours";
        # outputs written before the key existed were made by ours
        if source.options.get("procedure") == "ce-clip":
            how, nulls = (
                ce_clip.TYPE_PROCEDURES[kind],
                (
                    "null where CE-CLIP writes its '###' placeholder, and where the fill taken is empty (CE-CLIP keeps it)"
                ),
            )
        else:
            how, nulls = (
                TYPE_PROCEDURES[kind],
                "null where the caption has no such word or no fill passed the checks",
            )
        meanings[name] = (
            f"CE-CLIP {kind} hard negative, generated for this build: {how}. Made by "
            f"`hardpos generate --negative --method mlm --kind {source.options.get('kind')}` ({source.describe()}; "
            f"file `{source.path.name}`), hf_hardpos's implementation of CE-CLIP's procedure, not CE-CLIP's "
            f"released negatives; {nulls}"
        )
    return meanings
