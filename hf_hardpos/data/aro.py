"""ARO builder (Yuksekgonul et al. 2023): VG-Relation, VG-Attribution, COCO-Order and Flickr30k-Order.

Sources as the ARO repository (github.com/mertyg/vision-language-models-are-bows, ``dataset_zoo/
aro_datasets.py``) publishes them:

- VG-Relation / VG-Attribution: ``visual_genome_{relation,attribution}.json`` (Google Drive), one row
  per test case with a true and a false caption and a bbox; images from ARO's ``vgr_vga_images.zip``
  (or Visual Genome), **cropped to the bbox** as ARO scores them. Also the source of SWAP (``swap.py``
  uses this module's crop).
- COCO-Order / Flickr30k-Order: ARO has no annotation file of its own. It takes the Karpathy test
  split (BLIP's ``coco_karpathy_test.json`` / ``flickr30k_test.json``) and, for every caption, makes
  four word-order perturbations at load time (shuffle nouns and adjectives; shuffle all but nouns and
  adjectives; shuffle within trigrams; shuffle trigrams) with an unseeded RNG, so no two ARO runs score
  the same negatives. This builder makes them once, with the same four operations and a RNG seeded per
  caption, and stores each row as ``caption`` (the true caption, normalised like ARO's ``pre_caption``)
  plus ``hard_negatives``, the list of the four perturbations in that order.

The noun/adjective shuffles need part-of-speech tags; ARO uses spaCy's ``en_core_web_sm`` (Penn tags)
and that is the default tagger here (``pip install spacy && python -m spacy download en_core_web_sm``),
also used for tokenising the trigram shuffles (ARO uses ``nltk.word_tokenize`` there). Any callable
``text -> [(token, Penn tag)]`` can be passed instead.
"""

from __future__ import annotations

import io
import math
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import datasets

from .. import columns
from ..errors import UserInputError
from .build_report import BuildReport
from .checks import DataValidationError, load_json_list, selected
from .dataset_card import card_facts, flag_table
from .hub_folder import BuildOptions, ConfigBuild, export_folder, row_features
from .image_sources import (
    ImageFolder,
    ImageSpec,
    UnsafePathError,
    VisualGenomeImages,
    locate_images,
    relative_name,
    vg_part_of,
)
from .sources import ARO_FILES, ARO_IMAGES_URL, Sources

SPLIT = "test"
CROP_FORMATS = {"png": ("PNG", {}), "jpeg": ("JPEG", {"quality": 95})}
BBOX_FIELDS = ("bbox_x", "bbox_y", "bbox_w", "bbox_h")
BBOX_FEATURES = dict.fromkeys(BBOX_FIELDS, "float64")

VG_CONFIGS = {
    # config: (ARO file, the per-row label field kept, rows in the ARO paper / docs/reference.md, Other benchmarks)
    "vg_relation": ("visual_genome_relation.json", "relation_name", 23_937),
    "vg_attribution": ("visual_genome_attribution.json", "attributes", 28_748),
}
KARPATHY_TEST_URLS = {
    "coco_karpathy_test.json": "https://storage.googleapis.com/sfr-vision-language-research/datasets/coco_karpathy_test.json",
    "flickr30k_test.json": "https://storage.googleapis.com/sfr-vision-language-research/datasets/flickr30k_test.json",
}
COCO_VAL2014_URL = "http://images.cocodataset.org/zips/val2014.zip"  # extracts to val2014/
ORDER_CONFIGS = {
    # config: Karpathy test file (its "image" paths are relative to the image root)
    "coco_order": "coco_karpathy_test.json",
    "flickr30k_order": "flickr30k_test.json",
}
ARO_CONFIGS = (*VG_CONFIGS, *ORDER_CONFIGS)
MAX_WORDS = 30  # ARO's max_words for the order sets

PosTagger = Callable[[str], list[tuple[str, str]]]


# --- ARO's bbox crop (VG-Relation, VG-Attribution and SWAP) -----------------------------------------


def aro_file(sources: Sources, name: str, aro_dir: str | Path | None) -> Path:
    """One of ARO's annotation files, from a local folder holding it or from ARO's download link."""
    url = ARO_FILES.get(name) or KARPATHY_TEST_URLS[name]
    return sources.local_or_download(name, aro_dir, url, "--aro-dir")


def crop_box(row: dict) -> tuple[int, int, int, int]:
    """The pixel box PIL's ``Image.crop`` uses for the row's bbox (it rounds each coordinate)."""
    x, y, w, h = (row[key] for key in BBOX_FIELDS)
    return round(x), round(y), round(x + w), round(y + h)


def checked_bbox(path: Path, index: int, row: dict) -> dict[str, float]:
    """The row's bbox as floats; an error naming file, row and field unless every value is a finite
    number and the box keeps a positive size once rounded to pixels as the crop rounds it."""
    bbox = {key: row[key] for key in BBOX_FIELDS}
    for key, value in bbox.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataValidationError(f"{path}: row {index} field {key} is {value!r}, not a finite number")
    left, top, right, bottom = crop_box(bbox)
    if right <= left or bottom <= top:
        raise DataValidationError(
            f"{path}: row {index} has a bbox {bbox} of zero size in pixels (crop box {(left, top, right, bottom)})"
        )
    return {key: float(value) for key, value in bbox.items()}


def check_boxes_inside(rows: list[dict], images: dict, source_file: Path) -> int:
    """Refuse a box that misses its image entirely (its crop would be all black); return how many
    boxes reach partly outside (ARO's loader pads those with black, and so does this builder)."""
    from PIL import Image

    sizes: dict[str, tuple[int, int]] = {}
    partly_outside = 0
    for row in rows:
        hit = images.get(row[columns.IMAGE_ID])
        if hit is None:
            continue
        if row[columns.IMAGE_ID] not in sizes:
            with Image.open(hit[0]) as image:
                sizes[row[columns.IMAGE_ID]] = image.size
        width, height = sizes[row[columns.IMAGE_ID]]
        left, top, right, bottom = crop_box(row)
        if right <= 0 or bottom <= 0 or left >= width or top >= height:
            raise DataValidationError(
                f"{source_file}: row {row['upstream_index']} has a bbox {(left, top, right, bottom)} outside its "
                f"{width}x{height} image {hit[0]}"
            )
        partly_outside += left < 0 or top < 0 or right > width or bottom > height
    return partly_outside


def crop_to_bbox(image_bytes: bytes, row: dict, crop_format: str = "png") -> bytes:
    """ARO's crop: decode, convert to RGB, ``crop((x, y, x + w, y + h))``; encode as ``crop_format``."""
    from PIL import Image

    fmt, options = CROP_FORMATS[crop_format]
    with Image.open(io.BytesIO(image_bytes)) as image:
        box = (row["bbox_x"], row["bbox_y"], row["bbox_x"] + row["bbox_w"], row["bbox_y"] + row["bbox_h"])
        crop = image.convert("RGB").crop(box)
    buffer = io.BytesIO()
    crop.save(buffer, format=fmt, **options)
    return buffer.getvalue()


class BboxCrop:
    """Image encoder for :class:`~hf_hardpos.data.image_sources.ImageSpec`: the row's bbox crop."""

    def __init__(self, crop_format: str = "png"):
        if crop_format not in CROP_FORMATS:
            raise UserInputError(f"--crop-format {crop_format!r}: expected one of {sorted(CROP_FORMATS)}")
        self.crop_format = crop_format

    def __call__(self, path: Path, stored_path: str, row: dict) -> dict:
        name = f"{row[columns.IMAGE_ID]}_{row['upstream_index']}.{self.crop_format}"
        return {"bytes": crop_to_bbox(path.read_bytes(), row, self.crop_format), "path": name}


def locate_crop_sources(
    rows: list[dict],
    vg_images: VisualGenomeImages,
    source_file: Path,
    options: BuildOptions,
    encode: BboxCrop,
) -> ImageSpec:
    """Find each row's source VG image and rewrite its ``image_path`` to where it was found."""
    for row in rows:
        try:  # every row's path, not only the first of each image id: the later ones are input too
            relative_name(row["image_path"])
        except UnsafePathError as error:
            raise UnsafePathError(
                f"{source_file}: row {row['upstream_index']} field image_path: {error}"
            ) from None
    images = locate_images(
        vg_images,
        rows,
        options,
        origin=lambda row: f"{source_file}: row {row['upstream_index']} field image_path",
        hint=lambda row: (vg_part_of(row["image_path"]), row["image_path"]),
        encode=encode,
    )
    outside = check_boxes_inside(rows, images.found, source_file)
    if outside:
        print(
            f"{source_file}: {outside} bbox(es) reach partly outside their image; padded with black as ARO does"
        )
    for row in rows:
        if row[columns.IMAGE_ID] in images.found:
            row["image_path"] = images.found[row[columns.IMAGE_ID]][1]
    return images


def read_vg_config(path: Path, label: str) -> list[dict]:
    """VG-Relation / VG-Attribution rows in file order; ``image_id`` falls back to the file stem."""
    return vg_rows(
        path,
        load_json_list(path, ("image_path", *BBOX_FIELDS, "true_caption", "false_caption", label)),
        label,
    )


def vg_rows(path: Path, rows: Sequence[dict], label: str) -> list[dict]:
    """ARO's VG rows (read from ``path``) as dataset rows: bbox checked, ``label`` kept (``attributes``
    as a list of strings)."""
    out = []
    for index, row in enumerate(rows):
        value = row[label]
        if label == "attributes" and not isinstance(value, list):
            raise DataValidationError(f"{path}: row {index} field attributes is not a list")
        out.append(
            {
                columns.IMAGE_ID: str(row.get("image_id", Path(str(row["image_path"])).stem)),
                "image_path": str(row["image_path"]),
                **checked_bbox(path, index, row),
                columns.CAPTION: row["true_caption"],
                columns.HARD_NEGATIVE: row["false_caption"],
                label: [str(item) for item in value] if label == "attributes" else str(value),
                "upstream_index": index,
            }
        )
    return out


def vg_features(label: str) -> datasets.Features:
    label_feature = datasets.List(datasets.Value("string")) if label == "attributes" else "string"
    return row_features(
        (columns.IMAGE_ID, "image_path"),
        BBOX_FEATURES,
        (columns.CAPTION, columns.HARD_NEGATIVE),
        {label: label_feature, "upstream_index": "int64"},
    )


# --- the order perturbations (COCO-Order, Flickr30k-Order) --------------------------------------------

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
ADJECTIVE_TAGS = frozenset({"JJ", "JJR", "JJS"})


def pre_caption(caption: str, max_words: int = MAX_WORDS) -> str:
    """ARO's (BLIP's) caption normalisation: lower case, ``.!"()*#:;~`` to spaces, single spaces,
    at most ``max_words`` words."""
    caption = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    caption = re.sub(r"\s{2,}", " ", caption).rstrip("\n").strip(" ")
    return " ".join(caption.split(" ")[:max_words])


def _shuffle_positions(tokens: list[str], positions: Sequence[int], rng: random.Random) -> None:
    values = [tokens[i] for i in positions]
    rng.shuffle(values)
    for i, value in zip(positions, values):
        tokens[i] = value


def shuffle_nouns_and_adjectives(tagged: Sequence[tuple[str, str]], rng: random.Random) -> str:
    """Nouns change places among nouns and adjectives among adjectives; the rest stays."""
    tokens = [token for token, _ in tagged]
    _shuffle_positions(tokens, [i for i, (_, tag) in enumerate(tagged) if tag in NOUN_TAGS], rng)
    _shuffle_positions(tokens, [i for i, (_, tag) in enumerate(tagged) if tag in ADJECTIVE_TAGS], rng)
    return " ".join(tokens)


def shuffle_all_but_nouns_and_adjectives(tagged: Sequence[tuple[str, str]], rng: random.Random) -> str:
    """Every word that is not a noun or adjective changes place among those words."""
    tokens = [token for token, _ in tagged]
    kept = NOUN_TAGS | ADJECTIVE_TAGS
    _shuffle_positions(tokens, [i for i, (_, tag) in enumerate(tagged) if tag not in kept], rng)
    return " ".join(tokens)


def _trigrams(tokens: Sequence[str]) -> list[list[str]]:
    return [list(tokens[i : i + 3]) for i in range(0, len(tokens), 3)]


def shuffle_within_trigrams(tagged: Sequence[tuple[str, str]], rng: random.Random) -> str:
    """Consecutive word triples keep their place; the words inside each are shuffled."""
    trigrams = _trigrams([token for token, _ in tagged])
    for trigram in trigrams:
        rng.shuffle(trigram)
    return " ".join(" ".join(trigram) for trigram in trigrams)


def shuffle_trigrams(tagged: Sequence[tuple[str, str]], rng: random.Random) -> str:
    """Consecutive word triples keep their inside order; the triples are shuffled."""
    trigrams = _trigrams([token for token, _ in tagged])
    rng.shuffle(trigrams)
    return " ".join(" ".join(trigram) for trigram in trigrams)


# ARO's order (dataset_zoo/aro_datasets.py: perturb_functions); hard_negatives[i] is PERTURBATIONS[i].
PERTURBATIONS = (
    ("shuffle_nouns_and_adj", shuffle_nouns_and_adjectives),
    ("shuffle_allbut_nouns_and_adj", shuffle_all_but_nouns_and_adjectives),
    ("shuffle_within_trigrams", shuffle_within_trigrams),
    ("shuffle_trigrams", shuffle_trigrams),
)


def spacy_tagger() -> PosTagger:
    """ARO's tagger: spaCy ``en_core_web_sm``, Penn Treebank tags (``token.tag_``)."""
    try:
        import spacy

        nlp = spacy.load("en_core_web_sm")
    except (ImportError, OSError) as error:
        raise UserInputError(
            "coco_order / flickr30k_order need a part-of-speech tagger (ARO uses spaCy en_core_web_sm): "
            "pip install spacy && python -m spacy download en_core_web_sm, or build only "
            "--configs vg_relation vg_attribution"
        ) from error
    return lambda text: [(token.text, token.tag_) for token in nlp(text)]


def order_rows(path: Path, tagger: PosTagger, seed: int) -> list[dict]:
    """One row per Karpathy test caption: the normalised caption and its four perturbations."""
    from tqdm.auto import tqdm

    entries = load_json_list(path, ("image", "caption"))
    rows = []
    for index, entry in enumerate(tqdm(entries, desc=f"Perturbing {path.name}")):
        captions = entry["caption"] if isinstance(entry["caption"], list) else [entry["caption"]]
        for number, raw in enumerate(captions):
            if not isinstance(raw, str) or not raw.strip():
                raise DataValidationError(f"{path}: entry {index} caption {number} is empty or not text")
            rng = random.Random(f"{seed}\x00{raw}")
            tagged = tagger(raw)
            caption = pre_caption(raw)
            negatives = [pre_caption(perturb(tagged, rng)) for _, perturb in PERTURBATIONS]
            rows.append(
                {
                    columns.IMAGE_ID: str(entry["image"]),
                    columns.CAPTION: caption,
                    "hard_negatives": negatives,
                    "original_caption": raw,
                    "caption_index": number,
                    "upstream_index": index,
                    "unchanged_negatives": sum(negative == caption for negative in negatives),
                }
            )
    return rows


def order_features() -> datasets.Features:
    return row_features(
        (columns.IMAGE_ID, columns.CAPTION),
        {"hard_negatives": datasets.List(datasets.Value("string")), "original_caption": "string"},
        dict.fromkeys(("caption_index", "upstream_index", "unchanged_negatives"), "int64"),
    )


# --- card ---------------------------------------------------------------------------------------------

UNCHANGED = "rows with an unchanged negative"  # the one flag, counted on the order configs only


def _defects_text(report: BuildReport) -> str:
    if not report.flags:  # no order config in this build
        return "No row is dropped or changed."
    return "\n".join(
        [
            "No row is dropped or changed.",
            "",
            "Order configs, measured in this build: a perturbation can leave a caption as it was (one noun, "
            "or fewer than two movable words). Such a negative ties with the caption; under a strict "
            "inequality the row cannot count as correct (ARO's argmax counts a tie as correct).",
            "",
            *flag_table(report, {UNCHANGED: UNCHANGED}),
        ]
    )


def export_aro(
    output_dir: str | Path,
    *,
    aro_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
    coco_images_dir: str | Path | None = None,
    flickr_images_dir: str | Path | None = None,
    configs: Sequence[str] | None = None,
    tagger: PosTagger | None = None,
    seed: int = 0,
    crop_format: str = "png",
    embed_images: bool = True,
    **settings: Any,
) -> BuildReport:
    """Build ``hardpos/aro`` into ``output_dir``: one config per ARO dataset (default: all four), split ``test``.

    ``aro_dir`` holds ARO's annotation files (``visual_genome_*.json``, and for the order sets the
    Karpathy ``coco_karpathy_test.json`` / ``flickr30k_test.json``); without it they are downloaded
    from ARO's and BLIP's links. ``images_dir``: ARO's ``images/`` or Visual Genome (default: ARO's
    ``vgr_vga_images.zip``); ``coco_images_dir``: a folder holding ``val2014/`` (default: COCO's
    val2014.zip); ``flickr_images_dir``: a folder holding ``flickr30k-images/`` (Flickr30k needs a
    sign-up, so it is never downloaded). ``settings``: the fields of :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    configs = selected("ARO config(s)", configs, ARO_CONFIGS)
    encode = BboxCrop(crop_format)
    sources = Sources(None, options.cache_dir)
    report = BuildReport(dataset="aro")
    # Cheap checks first: the image folders of the order sets, then the tagger, then the work.
    order_folders = {}
    if embed_images:
        for name in configs:
            if name in ORDER_CONFIGS:
                order_folders[name] = _order_images(name, coco_images_dir, flickr_images_dir, sources)
    if tagger is None and any(name in ORDER_CONFIGS for name in configs):
        tagger = spacy_tagger()
        report.sources["part-of-speech tags"] = "spaCy en_core_web_sm (ARO's tagger)"
    builds = []
    vg_images = None
    for name in configs:
        if name in VG_CONFIGS:
            file_name, label, expected = VG_CONFIGS[name]
            path = aro_file(sources, file_name, aro_dir)
            rows = read_vg_config(path, label)
            images = None
            if embed_images:
                if vg_images is None:
                    vg_images = _vg_images(images_dir, sources)
                    report.sources["VG images"] = vg_images.description
                images = locate_crop_sources(rows, vg_images, path, options, encode)
            builds.append(ConfigBuild(name, rows, vg_features(label), expected, images=images))
            continue
        path = aro_file(sources, ORDER_CONFIGS[name], aro_dir)
        rows = order_rows(path, tagger, seed)
        images = None
        if embed_images:
            folder = order_folders[name]
            report.sources[f"{name} images"] = folder.description
            images = locate_images(
                folder,
                rows,
                options,
                origin=lambda row, path=path: f"{path}: entry {row['upstream_index']} field image",
            )
        flags = {UNCHANGED: sum(row["unchanged_negatives"] > 0 for row in rows)}
        builds.append(ConfigBuild(name, rows, order_features(), None, flags, images))
    report.record_sources(sources)
    facts = card_facts(
        "aro", repo=options.repo_id_for_card or "hardpos/aro", defects=_defects_text, seed=seed
    )
    return export_folder(output_dir, builds, facts, report, split=SPLIT, options=options)


def _vg_images(images_dir: str | Path | None, sources: Sources) -> VisualGenomeImages:
    """A local VG/ARO image folder, or ARO's ``vgr_vga_images.zip`` (it extracts to ``images/``)."""
    if images_dir is None:
        images_dir = sources.download_and_extract(ARO_IMAGES_URL) / "images"
    return VisualGenomeImages(images_dir, sources)


def _order_images(name: str, coco_dir, flickr_dir, sources: Sources) -> ImageFolder:
    if name == "coco_order":
        return ImageFolder(coco_dir, sources, archive_url=COCO_VAL2014_URL, option="--coco-images-dir")
    if flickr_dir is None:
        raise UserInputError(
            "flickr30k_order needs --flickr-images-dir (a folder holding flickr30k-images/): Flickr30k is "
            "distributed after a sign-up, so it cannot be downloaded; or pass --no-images"
        )
    return ImageFolder(flickr_dir, sources, option="--flickr-images-dir")
