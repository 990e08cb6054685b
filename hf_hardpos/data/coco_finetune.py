"""COCO fine-tuning set builder: every COCO train2017 caption with its hard positives and negatives.

Inputs: COCO's ``captions_train2017.json`` (caption order = its ``annotations`` list; 591,753 captions,
the paper's count, docs/reference.md "COCO fine-tuning set") and the Hard Positive paper's
``hard_positives_ft/{replace,swap}_hp.jsonl`` (one JSON string per caption, same order; ``"None"`` where a
caption has no swap). Every line of those files is one caption: a blank line is a missing hard positive
(null), never skipped, so a stray line cannot shift the later lines onto other captions. Hard negatives
are generated per caption by functions passed in (default: the package's CREPE/SugarCrepe-style rules),
so other negative generators can be used without touching the builder. Images are referenced by COCO id
and file name; embedding the images is optional (``coco_images_dir``), and :func:`attach_coco_images`
joins a local COCO folder afterwards.

``coco_split="train2014"`` builds from ``captions_train2014.json`` instead (CE-CLIP fine-tunes on it, so
the ce-clip recipe names it). The paper's hard positives belong to train2017's captions, so a train2014
build has null hard positives.

With ``mlm_negatives`` (``hardpos build finetune --mlm-negatives FILE.jsonl``) a second config,
``ce_clip``, holds the same rows plus CE-CLIP's four typed hard negatives (relation / attribute /
action / object, :data:`hf_hardpos.columns.CE_CLIP_NEGATIVE_COLUMNS`), read from the output of
``hardpos generate --negative --method mlm --kind all`` run over the captions in annotation order.
That output is joined by caption index, so before anything is built its manifest (input sha256 and
row count) and every record's caption are checked against the captions file: a file made
from another caption list would otherwise pair every caption with another caption's negatives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import datasets

from .. import columns
from ..citations import CE_CLIP, COCO, HARD_POSITIVES, cite
from ..errors import UserInputError
from ..generation.swap_rule import PAPER_SWAP_ELIGIBLE, swap_eligible
from .checks import DataValidationError, MissingSourceError, load_json
from .coco_hard_positives import HardPositiveSource, check_line_count, load_hard_positives
from .generation_outputs import checked_manifest, read_records
from .build_report import BuildReport
from .dataset_card import CardFacts
from .hub_folder import BuildOptions, ConfigBuild, export_folder
from .sources import (
    COCO_ANNOTATIONS_URL,
    COCO_CAPTIONS_FILE,
    ImageFolder,
    ImageSpec,
    Sources,
    UnsafePathError,
    path_under,
    resolve_images,
)

CONFIG = "default"
CE_CLIP_CONFIG = "ce_clip"  # the default config's rows + CE-CLIP's four typed hard negatives
SPLIT = "train"
HP_FILES = {"replace": "hard_positives_ft/replace_hp.jsonl", "swap": "hard_positives_ft/swap_hp.jsonl"}
NEGATIVE_TYPES = ("replace", "swap")
PAPER_CAPTIONS = 591_753  # COCO train2017 captions, the paper's count (docs/reference.md, COCO fine-tuning set)
PAPER_SWAP_HARD_POSITIVES = PAPER_SWAP_ELIGIBLE  # captions with "and" and fewer than 15 words (swap_rule)


@dataclass(frozen=True)
class CocoSplit:
    """One COCO caption split the builder reads: where its captions file comes from and what it holds."""

    name: str
    annotations_url: str
    captions_file: str  # path inside the annotations archive
    captions: int | None  # the caption count the paper trained on (None: no published count binds it)
    hard_positives: bool  # whether the paper's hard_positives_ft files are aligned with its captions


COCO_SPLITS = {
    "train2017": CocoSplit(
        "train2017",
        "http://images.cocodataset.org/annotations/annotations_trainval2017.zip",
        "annotations/captions_train2017.json",
        PAPER_CAPTIONS,
        True,
    ),
    "train2014": CocoSplit("train2014", COCO_ANNOTATIONS_URL, COCO_CAPTIONS_FILE, None, False),
}
DEFAULT_COCO_SPLIT = "train2017"

HardNegativeFn = Callable[[str], "str | None"]


def finetune_features() -> datasets.Features:
    """Row schema (the image column is added when images are embedded)."""
    return datasets.Features(
        {
            columns.IMAGE_ID: datasets.Value("string"),
            "file_name": datasets.Value("string"),
            "caption_id": datasets.Value("int64"),
            columns.CAPTION: datasets.Value("string"),
            columns.HARD_POSITIVE_REPLACE: datasets.Value("string"),
            columns.HARD_POSITIVE_SWAP: datasets.Value("string"),
            columns.HARD_NEGATIVE_REPLACE: datasets.Value("string"),
            columns.HARD_NEGATIVE_SWAP: datasets.Value("string"),
        }
    )


def ce_clip_features() -> datasets.Features:
    """The ``ce_clip`` config's schema: the default config's columns, then the four typed negatives."""
    return datasets.Features(
        {**finetune_features(), **{name: datasets.Value("string") for name in columns.CE_CLIP_NEGATIVE_COLUMNS}}
    )


def default_negative_generators(seed: int = 0) -> dict[str, HardNegativeFn]:
    """The package's rule-based hard-negative generators, seeded per caption for reproducibility.

    ``RuleGenerator`` owns the per-caption seeding (a caption's negative does not depend on which
    other captions were processed, so resumed builds give the same data). Imported lazily: a caller
    can pass any ``{"replace": fn, "swap": fn}`` instead.
    """
    from hf_hardpos.generation.rule_generator import RuleGenerator

    return {kind: RuleGenerator(kind, negative=True, seed=seed).perturb for kind in NEGATIVE_TYPES}


def get_coco_split(name: str) -> CocoSplit:
    """The :class:`CocoSplit` called ``name``; a clear error for any other name."""
    if name not in COCO_SPLITS:
        raise UserInputError(f"unknown COCO split {name!r}; choose one of {sorted(COCO_SPLITS)}")
    return COCO_SPLITS[name]


def coco_captions_file(
    sources: Sources, coco_annotations: str | Path | None, split: str = DEFAULT_COCO_SPLIT
) -> Path:
    """The split's captions file (``captions_train2017.json`` by default) from a file, a folder holding it
    (or ``annotations/`` with it), or COCO's annotations archive of that year (downloaded once)."""
    spec = get_coco_split(split)
    name = Path(spec.captions_file).name
    if coco_annotations is None:
        path = sources.download_and_extract(spec.annotations_url) / spec.captions_file
        return sources.record(name, path, f"{spec.annotations_url} ({spec.captions_file})")
    path = Path(coco_annotations)
    candidates = [path] if path.is_file() else [path / name, path / spec.captions_file]
    for candidate in candidates:
        if candidate.is_file():
            other = [s.name for s in COCO_SPLITS.values() if Path(s.captions_file).name == candidate.name != name]
            if other:
                raise DataValidationError(
                    f"{candidate}: a COCO {split} build reads {name}, not {candidate.name}; pass --coco-split "
                    f"{other[0]} to build from that split"
                )
            return sources.record(name, candidate, f"COCO {spec.captions_file} (read from a local copy)")
    looked = ", ".join(map(str, candidates))
    raise MissingSourceError(f"{name} not found at {path} (looked for {looked})")


def read_coco_captions(path: Path) -> tuple[list[dict], dict[int, str]]:
    """COCO caption annotations in file order and the image id -> file name map."""
    data = load_json(path)
    if not isinstance(data, dict) or "annotations" not in data or "images" not in data:
        raise DataValidationError(f"{path}: expected a COCO captions file with 'images' and 'annotations'")
    file_names = {int(image["id"]): image["file_name"] for image in data["images"]}
    for index, annotation in enumerate(data["annotations"]):
        missing = [key for key in ("id", "image_id", "caption") if key not in annotation]
        if missing:
            raise DataValidationError(f"{path}: annotation {index} lacks field(s) {', '.join(missing)}")
        if int(annotation["image_id"]) not in file_names:
            raise DataValidationError(f"{path}: annotation {index} refers to unknown image_id {annotation['image_id']}")
    return data["annotations"], file_names


def _no_hard_positives() -> Iterator[None]:
    while True:
        yield None


def _caption_rows(
    captions_path: Path,
    positives: Mapping[str, HardPositiveSource],
    negative_generators: Mapping[str, HardNegativeFn],
) -> Iterator[dict]:
    """Stream the rows in COCO annotation order (591k captions: never all in memory); a hard-positive
    column without a source (a train2014 build, or --hard-positives without it): nulls."""
    annotations, file_names = read_coco_captions(captions_path)
    replace_hp, swap_hp = (
        positives[column].rows() if column in positives else _no_hard_positives()
        for column in columns.FINETUNE_POSITIVE_COLUMNS
    )
    for annotation, positive_replace, positive_swap in zip(annotations, replace_hp, swap_hp):
        caption = annotation["caption"].strip()
        image_id = int(annotation["image_id"])
        yield {
            columns.IMAGE_ID: str(image_id),
            "file_name": file_names[image_id],
            "caption_id": int(annotation["id"]),
            columns.CAPTION: caption,
            columns.HARD_POSITIVE_REPLACE: positive_replace,
            columns.HARD_POSITIVE_SWAP: positive_swap,
            columns.HARD_NEGATIVE_REPLACE: negative_generators["replace"](caption),
            columns.HARD_NEGATIVE_SWAP: negative_generators["swap"](caption),
        }


def _ce_clip_rows(
    captions_path: Path,
    positives: Mapping[str, HardPositiveSource],
    negative_generators: Mapping[str, HardNegativeFn],
    typed_negatives: Mapping[str, Sequence[str | None]],
) -> Iterator[dict]:
    """The default config's rows, each with its typed negatives (looked up by caption index)."""
    rows = _caption_rows(captions_path, positives, negative_generators)
    for index, row in enumerate(rows):
        yield {**row, **{name: values[index] for name, values in typed_negatives.items()}}


# ---- CE-CLIP's typed negatives from `hardpos generate --negative --method mlm` --------------------

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
            f"spaCy pipeline `{spacy_model}`" if spacy_model else "POS tagger not recorded (a Python API run)",
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
    values: dict[str, list[str | None]] = {name: [None] * len(inputs) for name in columns.CE_CLIP_NEGATIVE_COLUMNS}
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
        read_records(path, {t: columns.CE_CLIP_NEGATIVE_TYPES[t] for t in types}, inputs, values, CAPTIONS_FOR_GENERATE)
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


def _typed_column_meanings(negatives: TypedNegatives) -> dict[str, str]:
    from ..generation import ce_clip  # imports transformers: only when a ce_clip config is built

    meanings = {}
    for kind, name in columns.CE_CLIP_NEGATIVE_TYPES.items():
        source = negatives.sources[kind]
        # `procedure` in the manifest: "ce-clip" (CE-CLIP's released TextAugment, the default) or "ours";
        # outputs written before the key existed were made by ours
        if source.options.get("procedure") == "ce-clip":
            how, nulls = ce_clip.TYPE_PROCEDURES[kind], (
                "null where CE-CLIP writes its '###' placeholder, and where the fill taken is empty (CE-CLIP keeps it)"
            )
        else:
            how, nulls = TYPE_PROCEDURES[kind], "null where the caption has no such word or no fill passed the checks"
        meanings[name] = (
            f"CE-CLIP {kind} hard negative, generated for this build: {how}. Made by "
            f"`hardpos generate --negative --method mlm --kind {source.options.get('kind')}` ({source.describe()}; "
            f"file `{source.path.name}`), hf_hardpos's implementation of CE-CLIP's procedure, not CE-CLIP's "
            f"released negatives; {nulls}"
        )
    return meanings


def attach_coco_images(dataset: datasets.Dataset, coco_images_dir: str | Path) -> datasets.Dataset:
    """Join a local COCO image folder (``train2017/``, or ``train2014/`` for a train2014 build): add an
    ``image`` column read lazily from ``file_name``.

    The images are decoded on access, not copied, so this is the cheap way to train from the set
    without embedding the 18 GB of train2017 images into it.
    """
    folder = Path(coco_images_dir)
    if dataset.num_rows and not (folder / dataset[0]["file_name"]).is_file():
        raise MissingSourceError(
            f"{folder / dataset[0]['file_name']} not found: is {folder} the COCO image folder of the set's split "
            "(train2017/, or train2014/ for a train2014 build)?"
        )
    def joined(row: dict, index: int) -> dict:
        try:  # a file name is data: it may not lead outside the image folder
            return {columns.IMAGE: str(path_under(folder, row["file_name"]))}
        except UnsafePathError as error:
            raise UnsafePathError(f"row {index} field file_name: {error}") from None

    with_paths = dataset.map(joined, with_indices=True, desc="Joining COCO images")
    return with_paths.cast_column(columns.IMAGE, datasets.Image())


def column_meanings_for(split: CocoSplit) -> dict[str, str]:
    """What each column of a build from ``split`` holds (for the card)."""
    captions = f"`{Path(split.captions_file).name}`"
    example = "000000391895.jpg" if split.name == "train2017" else "COCO_train2014_000000057870.jpg"
    if split.hard_positives:
        positives = {
            columns.HARD_POSITIVE_REPLACE: "hard positive by one-word synonym replacement: Kamath et al.'s LLM output, "
            "upstream `hard_positives_ft/replace_hp.jsonl`",
            columns.HARD_POSITIVE_SWAP: "hard positive by swapping around \"and\": upstream "
            "`hard_positives_ft/swap_hp.jsonl`; null where none exists (the paper made them only for captions "
            "with the word \"and\" and fewer than 15 words)",
        }
    else:
        positives = {
            name: f"null: the paper's hard positives belong to COCO train2017's captions, not {split.name}'s"
            for name in columns.FINETUNE_POSITIVE_COLUMNS
        }
    return {
        columns.IMAGE: f"the COCO {split.name} image, original JPEG bytes (only when built with --coco-images-dir)",
        columns.IMAGE_ID: f"COCO image id (COCO {captions})",
        "file_name": f"COCO file name, e.g. {example} (join key for a local {split.name}/ folder)",
        "caption_id": "COCO caption annotation id",
        columns.CAPTION: f"the COCO caption (COCO {captions}, whitespace stripped)",
        **positives,
        **_NEGATIVE_MEANINGS,
    }


_NEGATIVE_MEANINGS = {
    columns.HARD_NEGATIVE_REPLACE: "hard negative by replacement, generated by this builder with hf_hardpos's "
    "rules (modelled on CREPE/SugarCrepe's procedure, not the paper's own negatives); null where no rule applies",
    columns.HARD_NEGATIVE_SWAP: "hard negative by swapping, generated by this builder with hf_hardpos's rules "
    "(modelled on CREPE/SugarCrepe's procedure, not the paper's own negatives); null where no rule applies",
}

USAGE = """from datasets import load_dataset
from hf_hardpos.data.coco_finetune import attach_coco_images

train = load_dataset("{repo}", split="train")
train = attach_coco_images(train, "/path/to/coco/{split}")  # unless built with embedded images
# equivalently, without hf_hardpos:
# folder = "/path/to/coco/{split}"
# train = train.map(lambda r: {{"image": f"{{folder}}/{{r['file_name']}}"}}).cast_column("image", Image())"""

CE_CLIP_USAGE = """

# CE-CLIP's four typed hard negatives (one CMR threshold each): the ce_clip config
ce_clip = load_dataset("{repo}", "ce_clip", split="train")"""

LICENSE_TEXT = (
    "COCO annotations and images: CC BY 4.0 (images: Flickr terms of use). Hard positives: Kamath et al. "
    "2024 (github.com/amitakamath/hard_positives); check its terms before redistribution."
)


def _quality_counts(
    dataset: datasets.Dataset,
    names: Sequence[str] = (*columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS),
) -> dict[str, int]:
    """Measured per-column facts for the report and the card (non-null values, values equal to c) and,
    with the swap hard positives, how many captions are SWAP-eligible and how many swaps sit elsewhere."""
    counts = {}
    captions = dataset[columns.CAPTION]
    for name in names:
        values = dataset[name]
        counts[f"{name} present"] = sum(value is not None for value in values)
        counts[f"{name} equal to caption"] = sum(value == caption for value, caption in zip(values, captions))
    if columns.HARD_POSITIVE_SWAP in names:
        eligible = [swap_eligible(caption) for caption in captions]
        counts[SWAP_ELIGIBLE] = sum(eligible)
        counts[SWAP_INELIGIBLE] = sum(
            value is not None and not ok for value, ok in zip(dataset[columns.HARD_POSITIVE_SWAP], eligible)
        )
    return counts


SWAP_ELIGIBLE = "swap-eligible captions"  # with the word "and" and fewer than 15 words
SWAP_INELIGIBLE = "swap hard positives on ineligible captions"


def _ce_clip_quality_counts(dataset: datasets.Dataset) -> dict[str, int]:
    """The ``ce_clip`` config's own columns (the others are the default config's, counted there)."""
    return _quality_counts(dataset, columns.CE_CLIP_NEGATIVE_COLUMNS)


def _counts_table(flags: Mapping[str, int], names: Sequence[str]) -> list[str]:
    return ["| column | present | equal to the caption |", "|---|---:|---:|"] + [
        f"| `{name}` | {flags[f'{name} present']:,} | {flags[f'{name} equal to caption']:,} |" for name in names
    ]


# How the `ce_clip` config's typed negatives may be null or odd, per generator (a manifest's `procedure`).
_TYPED_DEFECTS = {
    "ce-clip": (
        "As CE-CLIP's released generator (lezhang7/Enhance-FineGrained data/dataset.py @ef87eb7, TextAugment) "
        "makes them, a typed negative is null where it writes its '###' placeholder: the relation negative "
        "of a caption with two nouns or fewer. The adjective, verb and noun negatives are filled: a caption "
        "without a word of that part of speech is masked whole, so its negative is the masked LM's fill alone "
        "(one word; null where that fill decodes to nothing, e.g. a special token: hf_hardpos's one departure, "
        "CE-CLIP would train on the empty string), and the 4th of the top-5 fills is taken with no check that it "
        "differs from the masked word, so a negative can equal its caption. The relation swap replaces every "
        "occurrence of the first two nouns, inside other words too. The generation output keeps the masked text "
        "and the five ranked fills of every row."
    ),
    "ours": (
        "A typed negative is null where the caption has no word of that part of speech (no adjective, "
        "no verb, fewer than two different nouns for a relation swap), where no masked-LM fill passed "
        "the checks (whole word, not the word itself, not a synonym), or where the candidate failed "
        "validation; the generation output keeps every rejected candidate with its reason."
    ),
}


def _defects_text(report: BuildReport, procedures: tuple[str, ...] = ()) -> str:
    """The card's measured defects; `procedures` names the generator(s) of the `ce_clip` config's negatives."""
    text = (
        ["Measured in this build (rows):", ""]
        + _counts_table(report.flags[CONFIG], (*columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS))
        + [
            "",
            (
                "Hard positives are LLM outputs kept as upstream wrote them (whitespace stripped; \"None\" -> null). "
                "A hard positive equal to its caption is a generation failure the paper's prompt did not filter. "
                "Hard negatives come from this package's rules; a rule that finds nothing to change gives null."
            ),
            "",
            (
                f"SWAP-eligible captions (the word \"and\", fewer than 15 words): "
                f"{report.flags[CONFIG][SWAP_ELIGIBLE]:,}; swap hard positives on other captions: "
                f"{report.flags[CONFIG][SWAP_INELIGIBLE]:,}."
            ),
        ]
    )
    if CE_CLIP_CONFIG in report.flags:
        text += (
            ["", f"The `{CE_CLIP_CONFIG}` config's typed hard negatives, non-null values per type (rows):", ""]
            + _counts_table(report.flags[CE_CLIP_CONFIG], columns.CE_CLIP_NEGATIVE_COLUMNS)
            + [
                *(line for procedure in procedures for line in ("", _TYPED_DEFECTS[procedure])),
            ]
        )
    return "\n".join(text)


def _count_swap_hard_positives(papers_files: bool, report: BuildReport) -> None:
    """Counts of the swap column; with the paper's released files, checked against the paper's 119,071."""
    report.counts["swap hard positives"] = report.flags[CONFIG][f"{columns.HARD_POSITIVE_SWAP} present"]
    report.counts[SWAP_ELIGIBLE] = report.flags[CONFIG][SWAP_ELIGIBLE]
    if papers_files:
        report.expected_counts["swap hard positives"] = PAPER_SWAP_HARD_POSITIVES
        report.expected_counts[SWAP_ELIGIBLE] = PAPER_SWAP_HARD_POSITIVES


def _hard_positive_sources(
    split: CocoSplit,
    sources: Sources,
    hard_positives: Sequence[str | Path] | None,
    annotations: Sequence[dict],
    captions_path: Path,
) -> dict[str, HardPositiveSource]:
    """Column -> source of the hard positives: the given files (checked against the captions now), else
    upstream's released files for a split they belong to (line counts checked now), else none."""
    if hard_positives:
        captions = [annotation["caption"].strip() for annotation in annotations]  # as _caption_rows writes them
        found = load_hard_positives(hard_positives, captions, captions_path)
        for column, source in found.items():
            name = f"{source.path.name} ({column})"
            sources.record(name, source.path, f"{source.describe()}, read from {source.path}")
            sources.local_variants.append(name)  # the rows are the user's: the paper's counts do not bind them
        return found
    if not split.hard_positives:
        return {}
    found = {}
    for column, relative in zip(columns.FINETUNE_POSITIVE_COLUMNS, HP_FILES.values()):
        path = sources.upstream_file(relative)
        check_line_count(path, captions_path, len(annotations))
        found[column] = HardPositiveSource(column, path)
    return found


def export_finetune(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    coco_annotations: str | Path | None = None,
    coco_images_dir: str | Path | None = None,
    negative_generators: Mapping[str, HardNegativeFn] | None = None,
    seed: int = 0,
    mlm_negatives: Sequence[str | Path] | None = None,
    coco_split: str = DEFAULT_COCO_SPLIT,
    hard_positives: Sequence[str | Path] | None = None,
    **settings: Any,
) -> BuildReport:
    """Build the COCO HP+HN fine-tuning set into ``output_dir`` (config ``default``, split ``train``).

    ``coco_split``: ``"train2017"`` (the paper's 591,753 captions; the hard-positive files' lines follow
    ``captions_train2017.json``) or ``"train2014"`` (CE-CLIP's captions; no hard positives: the columns
    are null and the upstream files are not read).

    ``mlm_negatives``: outputs of ``hardpos generate --negative --method mlm`` (one ``--kind all`` file,
    or single-type files covering the four types) over these captions in annotation order; with them a
    second config, ``ce_clip``, holds the default config's columns plus CE-CLIP's four typed negatives
    (:data:`~hf_hardpos.columns.CE_CLIP_NEGATIVE_COLUMNS`). Embedded images are then stored in both configs.

    ``hard_positives``: your own hard-positive files instead of upstream's (`coco_hard_positives`):
    ``hardpos generate`` outputs over these captions in annotation order (one per column: a replace kind,
    swap) or files in upstream's ``{replace,swap}_hp.jsonl`` format; a column no file supplies is null,
    and upstream's files are not read.

    Every input is checked before the build (one hard-positive line per caption, each line valid,
    every typed-negative record generated from these captions, images present), so a bad file fails
    in seconds, not after generating 591k negatives. ``settings``: the fields of :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    repo_id = options.repo_id_for_card or "hardpos/coco"
    negative_generators = dict(negative_generators or default_negative_generators(seed))
    missing_types = [name for name in NEGATIVE_TYPES if name not in negative_generators]
    if missing_types:
        raise DataValidationError(f"negative_generators lacks {missing_types}; expected keys {NEGATIVE_TYPES}")
    sources = Sources(upstream_dir, options.cache_dir)
    report = BuildReport(dataset="finetune")
    split = get_coco_split(coco_split)
    captions_path = coco_captions_file(sources, coco_annotations, split.name)
    annotations, file_names = read_coco_captions(captions_path)
    positives = _hard_positive_sources(split, sources, hard_positives, annotations, captions_path)
    typed = None
    if mlm_negatives:
        captions = [annotation["caption"].strip() for annotation in annotations]  # as _caption_rows writes them
        typed = read_mlm_negatives(mlm_negatives, captions, captions_path)
        del captions
        for source in {source.path: source for source in typed.sources.values()}.values():
            sources.record(
                f"{source.path.name} ({CE_CLIP_CONFIG} typed negatives: {', '.join(source.types)})",
                source.path,
                f"`hardpos generate --negative --method mlm --kind {source.options.get('kind')}` output "
                f"({source.describe()}), read from {source.path}",
            )
    report.record_sources(sources)
    used_images = {file_names[int(annotation["image_id"])] for annotation in annotations}
    images = None
    if coco_images_dir is not None:
        folder = ImageFolder(coco_images_dir, sources, option="--coco-images-dir")
        wanted = dict.fromkeys(sorted(used_images))
        origins = {name: f"{captions_path}: image {image_id} field file_name" for image_id, name in file_names.items()}
        found, missing = resolve_images(
            folder, wanted, skip_missing=options.skip_missing, progress=options.progress, origins=origins
        )
        images = ImageSpec(found, missing, key="file_name")
        report.sources["images"] = f"embedded from a local {split.name} folder"
    else:
        report.sources["images"] = "not embedded (join by file_name)"
    # Both configs hold every caption, with the same images.
    shared = dict(
        expected_count=split.captions, images=images, num_upstream_rows=len(annotations), image_keys=used_images
    )
    caption_inputs = (captions_path, positives, negative_generators)
    configs = [
        ConfigBuild(
            CONFIG, rows=partial(_caption_rows, *caption_inputs), features=finetune_features(), flags=_quality_counts,
            **shared,
        )
    ]
    if hard_positives:
        positives_text = (
            "with hard positives generated for this build (not the paper's released ones): "
            + "; ".join(f"`{column}` from {source.describe()}" for column, source in positives.items())
            + ". A hard-positive column no file supplied is null."
        )
    elif split.hard_positives:
        positives_text = (
            "with the hard positives of *The Hard Positive Truth about Vision-Language Compositionality* "
            "(Kamath et al., ECCV 2024): a replace hard positive, and a swap hard positive where the caption "
            "allows one."
        )
    else:
        positives_text = (
            "(CE-CLIP's fine-tuning captions). The paper's hard positives belong to train2017's captions, so "
            "the hard-positive columns are null in this build."
        )
    summary = (
        f"Every COCO {split.name} caption, one row per caption in `{Path(split.captions_file).name}` order, "
        f"{positives_text} The replace/swap hard negatives are made "
        "by hf_hardpos's own rules, which follow the CREPE/SugarCrepe procedure only as far as those "
        "rules go; they are not the hard negatives the paper trained with. Missing items are nulls, "
        "never the string \"None\"."
    )
    usage = USAGE.format(repo=repo_id, split=split.name)
    column_meanings = column_meanings_for(split)
    if hard_positives:
        column_meanings.update({
            column: f"your hard positive, {positives[column].describe()}; null where no valid candidate"
            if column in positives else "null: no --hard-positives file supplied this column"
            for column in columns.FINETUNE_POSITIVE_COLUMNS
        })  # fmt: skip
    citation = cite(HARD_POSITIVES, COCO)
    procedures: tuple[str, ...] = ()  # the typed negatives' generator(s), named on the card
    if typed is not None:
        configs.append(
            ConfigBuild(
                CE_CLIP_CONFIG, rows=partial(_ce_clip_rows, *caption_inputs, typed.values),
                features=ce_clip_features(), flags=_ce_clip_quality_counts, **shared,
            )
        )
        models = sorted({str(source.options.get("model", "not recorded")) for source in typed.sources.values()})
        # `procedure` in the manifest: "ce-clip" (the default) or "ours"; outputs older than the key: ours
        procedures = tuple(sorted({"ce-clip" if s.options.get("procedure") == "ce-clip" else "ours"
                                   for s in typed.sources.values()}))  # fmt: skip
        how = {
            "ce-clip": "a re-implementation of CE-CLIP's released generator (lezhang7/Enhance-FineGrained "
            "data/dataset.py @ef87eb7, TextAugment; seeded): the first two nouns exchanged for a relation negative "
            "when the caption has more than two nouns, and for an adjective, verb or noun one drawn word masked "
            "and the 4th of the masked LM's top-5 fills taken",
            "ours": "hf_hardpos's filtered procedure: fills of an adjective, a verb or a noun that pass whole-word, "
            "not-the-word and not-a-synonym checks, and noun swaps ranked by the masked LM for relations",
        }
        summary += (
            f" The `{CE_CLIP_CONFIG}` config holds the same rows plus CE-CLIP's four typed hard negatives "
            f"(Zhang et al., CVPR 2024): {', '.join(f'`{n}`' for n in columns.CE_CLIP_NEGATIVE_COLUMNS)}, made "
            "for this build (`hardpos generate --negative --method mlm`) with a masked LM at spaCy part-of-speech "
            f"positions by {'; and by '.join(how[p] for p in procedures)} (masked LM "
            f"{', '.join(f'`{m}`' for m in models)}; CE-CLIP used distilroberta-base); they are not CE-CLIP's "
            "released negatives."
        )
        usage += CE_CLIP_USAGE.format(repo=repo_id)
        column_meanings.update(_typed_column_meanings(typed))
        citation = cite(HARD_POSITIVES, COCO, CE_CLIP)
    del annotations, file_names
    facts = CardFacts(
        title="COCO hard-positive + hard-negative fine-tuning set",
        pretty_name="COCO HP+HN fine-tuning set (Hard Positive paper)",
        summary=summary,
        builder="hf_hardpos.data.coco_finetune.export_finetune",
        usage=usage,
        column_meanings=column_meanings,
        defects=partial(_defects_text, procedures=procedures),
        license_id="cc-by-4.0",
        license_text=LICENSE_TEXT,
        citation=citation,
        tags=["compositionality", "hard-positives", "hard-negatives", "clip", "coco"],
    )
    on_built = partial(_count_swap_hard_positives, split.hard_positives and not hard_positives)
    return export_folder(output_dir, configs, facts, report, split=SPLIT, options=options, on_built=on_built)
