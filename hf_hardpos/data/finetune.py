"""COCO fine-tuning set builder: every COCO train 2014 caption with its hard positives and negatives.

Inputs: COCO's ``captions_train2014.json`` (caption order = its ``annotations`` list) and the Hard
Positive paper's ``hard_positives_ft/{replace,swap}_hp.jsonl`` (one JSON string per caption, same order;
``"None"`` where a caption has no swap). Hard negatives are generated per caption by functions passed
in (default: the package's CREPE/SugarCrepe-style rules), so other negative generators can be used
without touching the builder. Images are referenced by COCO id and file name; embedding the 13 GB of
train2014 images is optional (``coco_images_dir``), and :func:`attach_coco_images` joins a local COCO
folder afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path

import datasets

from .. import columns
from ..citations import COCO, HARD_POSITIVES, cite
from .checks import DataValidationError, MissingSourceError, load_json
from .hub_folder import SHARD_SIZE, BuildReport, CardFacts, ConfigBuild, ImageSpec, export_folder
from .sources import COCO_ANNOTATIONS_URL, COCO_CAPTIONS_FILE, ImageFolder, Sources, resolve_images

CONFIG = "default"
SPLIT = "train"
HP_FILES = {"replace": "hard_positives_ft/replace_hp.jsonl", "swap": "hard_positives_ft/swap_hp.jsonl"}
NEGATIVE_TYPES = ("replace", "swap")
PAPER_CAPTIONS = 591_753  # COCO train 2014 captions (SPEC §3)
PAPER_SWAP_HARD_POSITIVES = 119_071  # captions with "and" and fewer than 15 words

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


def default_negative_generators(seed: int = 0) -> dict[str, HardNegativeFn]:
    """The package's rule-based hard-negative generators, seeded per caption for reproducibility.

    ``RuleGenerator`` owns the per-caption seeding (a caption's negative does not depend on which
    other captions were processed, so resumed builds give the same data). Imported lazily: a caller
    can pass any ``{"replace": fn, "swap": fn}`` instead.
    """
    from hf_hardpos.generation.rule_generator import RuleGenerator

    return {kind: RuleGenerator(kind, negative=True, seed=seed).perturb for kind in NEGATIVE_TYPES}


def coco_captions_file(sources: Sources, coco_annotations: str | Path | None) -> Path:
    """``captions_train2014.json`` from a file, a folder holding it (or ``annotations/`` with it), or
    the COCO 2014 annotations archive (downloaded and extracted once)."""
    name = Path(COCO_CAPTIONS_FILE).name
    if coco_annotations is None:
        path = sources.download_and_extract(COCO_ANNOTATIONS_URL) / COCO_CAPTIONS_FILE
        return sources.record(name, path, f"{COCO_ANNOTATIONS_URL} ({COCO_CAPTIONS_FILE})")
    path = Path(coco_annotations)
    candidates = [path] if path.is_file() else [path / name, path / COCO_CAPTIONS_FILE]
    for candidate in candidates:
        if candidate.is_file():
            return sources.record(name, candidate, f"COCO {COCO_CAPTIONS_FILE} (read from a local copy)")
    looked = ", ".join(map(str, candidates))
    raise MissingSourceError(f"captions_train2014.json not found at {path} (looked for {looked})")


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


def parse_hard_positive(line: str, path: Path, line_number: int) -> str | None:
    """One jsonl line -> the hard positive, or ``None`` where upstream wrote "None" (or null)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataValidationError(f"{path}: line {line_number} is not valid JSON ({error})") from error
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataValidationError(f"{path}: line {line_number} holds a {type(value).__name__}, expected a JSON string")
    value = value.strip()
    return None if value in ("", "None") else value


def count_hard_positives(path: Path) -> int:
    """Parse every line once (so a bad line fails before the build, naming its number) and count them."""
    return sum(1 for _ in _read_hard_positives(path))


def _read_hard_positives(path: Path) -> Iterator[str | None]:
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                yield parse_hard_positive(line, path, line_number)


def _caption_rows(
    captions_path: Path,
    replace_path: Path,
    swap_path: Path,
    negative_generators: Mapping[str, HardNegativeFn],
) -> Iterator[dict]:
    """Stream the rows in COCO annotation order (591k captions: never all in memory)."""
    annotations, file_names = read_coco_captions(captions_path)
    replace_hp, swap_hp = _read_hard_positives(replace_path), _read_hard_positives(swap_path)
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


def attach_coco_images(dataset: datasets.Dataset, coco_images_dir: str | Path) -> datasets.Dataset:
    """Join a local COCO ``train2014/`` folder: add an ``image`` column read lazily from ``file_name``.

    The images are decoded on access, not copied, so this is the cheap way to train from the set
    without embedding 13 GB into it.
    """
    folder = Path(coco_images_dir)
    if dataset.num_rows and not (folder / dataset[0]["file_name"]).is_file():
        raise MissingSourceError(f"{folder / dataset[0]['file_name']} not found: is {folder} COCO's train2014 folder?")
    with_paths = dataset.map(lambda row: {columns.IMAGE: str(folder / row["file_name"])}, desc="Joining COCO images")
    return with_paths.cast_column(columns.IMAGE, datasets.Image())


COLUMN_MEANINGS = {
    columns.IMAGE: "the COCO train2014 image, original JPEG bytes (only when built with --coco-images-dir)",
    columns.IMAGE_ID: "COCO image id (COCO `captions_train2014.json`)",
    "file_name": "COCO file name, e.g. COCO_train2014_000000057870.jpg (join key for a local train2014/ folder)",
    "caption_id": "COCO caption annotation id",
    columns.CAPTION: "the COCO caption (COCO `captions_train2014.json`, whitespace stripped)",
    columns.HARD_POSITIVE_REPLACE: "hard positive by one-word synonym replacement: Kamath et al.'s LLM output, "
    "upstream `hard_positives_ft/replace_hp.jsonl`",
    columns.HARD_POSITIVE_SWAP: "hard positive by swapping around \"and\": upstream "
    "`hard_positives_ft/swap_hp.jsonl`; null where none exists",
    columns.HARD_NEGATIVE_REPLACE: "hard negative by replacement, generated by this builder with hf_hardpos's "
    "rules (modelled on CREPE/SugarCrepe's procedure, not the paper's own negatives); null where no rule applies",
    columns.HARD_NEGATIVE_SWAP: "hard negative by swapping, generated by this builder with hf_hardpos's rules "
    "(modelled on CREPE/SugarCrepe's procedure, not the paper's own negatives); null where no rule applies",
}

USAGE = """from datasets import load_dataset
from hf_hardpos.data.finetune import attach_coco_images

train = load_dataset("{repo}", split="train")
train = attach_coco_images(train, "/path/to/coco/train2014")  # unless built with embedded images
# equivalently, without hf_hardpos:
# folder = "/path/to/coco/train2014"
# train = train.map(lambda r: {{"image": f"{{folder}}/{{r['file_name']}}"}}).cast_column("image", Image())"""

LICENSE_TEXT = (
    "COCO annotations and images: CC BY 4.0 (images: Flickr terms of use). Hard positives: Kamath et al. "
    "2024 (github.com/amitakamath/hard_positives); check its terms before redistribution."
)


def _quality_counts(dataset: datasets.Dataset) -> dict[str, int]:
    """Measured per-column facts for the report and the card (nulls, c_p equal to c)."""
    counts = {}
    captions = dataset[columns.CAPTION]
    for name in (*columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS):
        values = dataset[name]
        counts[f"{name} present"] = sum(value is not None for value in values)
        counts[f"{name} equal to caption"] = sum(value == caption for value, caption in zip(values, captions))
    return counts


def _defects_text(report: BuildReport) -> str:
    flags = report.flags[CONFIG]
    return "\n".join(
        ["Measured in this build (rows):", "", "| column | present | equal to the caption |", "|---|---:|---:|"]
        + [
            f"| `{name}` | {flags[f'{name} present']:,} | {flags[f'{name} equal to caption']:,} |"
            for name in (*columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS)
        ]
        + [
            "",
            "Hard positives are LLM outputs kept as upstream wrote them (whitespace stripped; \"None\" -> null). "
            "A hard positive equal to its caption is a generation failure the paper's prompt did not filter. "
            "Hard negatives come from this package's rules; a rule that finds nothing to change gives null.",
        ]
    )


def _count_swap_hard_positives(report: BuildReport) -> None:
    report.counts["swap hard positives"] = report.flags[CONFIG][f"{columns.HARD_POSITIVE_SWAP} present"]
    report.expected_counts["swap hard positives"] = PAPER_SWAP_HARD_POSITIVES


def export_finetune(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    coco_annotations: str | Path | None = None,
    coco_images_dir: str | Path | None = None,
    negative_generators: Mapping[str, HardNegativeFn] | None = None,
    skip_missing: bool = False,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    max_shard_size: int | str = SHARD_SIZE,
    repo_id_for_card: str = "hardpos/coco",
    verify: bool = True,
    progress: bool = True,
) -> BuildReport:
    """Build the COCO HP+HN fine-tuning set into ``output_dir`` (config ``default``, split ``train``).

    Every input is checked before the build (one hard-positive line per caption, each line valid,
    images present), so a bad file fails in seconds, not after generating 591k negatives.
    """
    negative_generators = dict(negative_generators or default_negative_generators(seed))
    missing_types = [name for name in NEGATIVE_TYPES if name not in negative_generators]
    if missing_types:
        raise DataValidationError(f"negative_generators lacks {missing_types}; expected keys {NEGATIVE_TYPES}")
    sources = Sources(upstream_dir, cache_dir)
    report = BuildReport(dataset="finetune")
    captions_path = coco_captions_file(sources, coco_annotations)
    annotations, file_names = read_coco_captions(captions_path)
    hp_paths = {name: sources.upstream_file(relative) for name, relative in HP_FILES.items()}
    for path in hp_paths.values():
        lines = count_hard_positives(path)
        if lines != len(annotations):
            raise DataValidationError(
                f"{path} has {lines} lines but {captions_path} has {len(annotations)} captions; "
                "the hard-positive file must have one line per COCO caption, in annotation order"
            )
    report.sources.update(sources.provenance)
    used_images = {file_names[int(annotation["image_id"])] for annotation in annotations}
    images = None
    if coco_images_dir is not None:
        folder = ImageFolder(coco_images_dir, sources, option="--coco-images-dir")
        wanted = dict.fromkeys(sorted(used_images))
        found, missing = resolve_images(folder, wanted, skip_missing=skip_missing, progress=progress)
        images = ImageSpec(found, missing, key="file_name")
        report.sources["images"] = "embedded from a local train2014 folder"
    else:
        report.sources["images"] = "not embedded (join by file_name)"
    config = ConfigBuild(
        CONFIG,
        rows=partial(_caption_rows, captions_path, hp_paths["replace"], hp_paths["swap"], negative_generators),
        features=finetune_features(),
        expected_count=PAPER_CAPTIONS,
        flags=_quality_counts,
        images=images,
        num_upstream_rows=len(annotations),
        image_keys=used_images,
    )
    del annotations, file_names
    facts = CardFacts(
        title="COCO hard-positive + hard-negative fine-tuning set",
        pretty_name="COCO HP+HN fine-tuning set (Hard Positive paper)",
        summary=(
            "Every COCO train 2014 caption with the hard positives of *The Hard Positive Truth about "
            "Vision-Language Compositionality* (Kamath et al., ECCV 2024): a replace hard positive, and a "
            "swap hard positive where the caption allows one. The replace/swap hard negatives are made "
            "by hf_hardpos's own rules, which follow the CREPE/SugarCrepe procedure only as far as those "
            "rules go; they are not the hard negatives the paper trained with. Missing items are nulls, "
            "never the string \"None\"."
        ),
        builder="hf_hardpos.data.finetune.export_finetune",
        usage=USAGE.format(repo=repo_id_for_card),
        column_meanings=COLUMN_MEANINGS,
        defects=_defects_text,
        license_id="cc-by-4.0",
        license_text=LICENSE_TEXT,
        citation=cite(HARD_POSITIVES, COCO),
        tags=["compositionality", "hard-positives", "hard-negatives", "clip", "coco"],
    )
    return export_folder(
        output_dir,
        [config],
        facts,
        report,
        split=SPLIT,
        max_shard_size=max_shard_size,
        cache_dir=cache_dir,
        verify=verify,
        on_built=_count_swap_hard_positives,
    )
