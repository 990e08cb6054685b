"""SWAP benchmark builder: ARO's Visual Genome Attribution with the Hard Positive paper's c_p.

Reads ARO's ``visual_genome_attribution.json`` (c, c_n, bbox, the two attributes) and
``swapped_data/visual_genome_attribution.json`` of the hard_positives repository (same rows, c_p),
checks they align, and stores each row's image **cropped to its bbox**, as ARO scores it. The crop is
stored losslessly (PNG) by default so the pixels are exactly those ARO's ``Image.crop`` gives; the
source image id, its VG path and the bbox are kept so the crop can be redone from the full image.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import datasets

from .. import columns
from .generate import dataset_from_generator
from .sources import (
    ARO_ATTRIBUTION_FILE,
    ARO_ATTRIBUTION_URL,
    ARO_REPO,
    VG_PART_URLS,
    Sources,
    VisualGenomeImages,
    vg_part_of,
)
from .validation import PAPER_COUNTS, BuildReport, DataValidationError, load_aligned_pair

CONFIG = "default"
SPLIT = "test"
POSITIVE_FILE = "swapped_data/visual_genome_attribution.json"
ARO_FIELDS = (
    "image_id", "image_path", "bbox_x", "bbox_y", "bbox_w", "bbox_h", "true_caption", "false_caption", "attributes"
)
POSITIVE_FIELDS = ("image_id", "true_caption", "false_caption")
CROP_FORMATS = {"png": ("PNG", {}), "jpeg": ("JPEG", {"quality": 95})}


def swap_features(with_images: bool = True) -> datasets.Features:
    fields = {columns.IMAGE: datasets.Image()} if with_images else {}
    fields.update(
        {
            columns.IMAGE_ID: datasets.Value("string"),
            "image_path": datasets.Value("string"),
            "bbox_x": datasets.Value("float64"),
            "bbox_y": datasets.Value("float64"),
            "bbox_w": datasets.Value("float64"),
            "bbox_h": datasets.Value("float64"),
            columns.CAPTION: datasets.Value("string"),
            columns.HARD_NEGATIVE: datasets.Value("string"),
            columns.HARD_POSITIVE: datasets.Value("string"),
            "attributes": datasets.List(datasets.Value("string")),
            "upstream_index": datasets.Value("int64"),
        }
    )
    return datasets.Features(fields)


def aro_annotation_file(sources: Sources, aro_dir: str | Path | None) -> Path:
    """ARO's annotation, from a local ARO root folder or from ARO's Google Drive link."""
    if aro_dir is not None:
        path = Path(aro_dir) / ARO_ATTRIBUTION_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: --aro-dir must hold ARO's {ARO_ATTRIBUTION_FILE}")
        return sources.record(ARO_ATTRIBUTION_FILE, path, f"ARO's {ARO_ATTRIBUTION_FILE} (read from a local copy)")
    return sources.record(ARO_ATTRIBUTION_FILE, sources.download(ARO_ATTRIBUTION_URL), f"{ARO_ATTRIBUTION_URL} (ARO)")


def read_swap_rows(sources: Sources, aro_dir: str | Path | None = None) -> list[dict]:
    """The SWAP rows (no images) in upstream order, validated for alignment and bbox sanity."""
    original_path = aro_annotation_file(sources, aro_dir)
    positive_path = sources.upstream_file(POSITIVE_FILE)
    original, positive = load_aligned_pair(original_path, positive_path, ARO_FIELDS, POSITIVE_FIELDS)
    rows = []
    for index, (o, p) in enumerate(zip(original, positive)):
        bbox = {key: o[key] for key in ("bbox_x", "bbox_y", "bbox_w", "bbox_h")}
        if not all(isinstance(value, (int, float)) for value in bbox.values()) or o["bbox_w"] <= 0 or o["bbox_h"] <= 0:
            raise DataValidationError(f"{original_path}: row {index} has an invalid bbox {bbox}")
        if not isinstance(o["attributes"], list):
            raise DataValidationError(f"{original_path}: row {index} field attributes is not a list")
        rows.append(
            {
                columns.IMAGE_ID: str(o["image_id"]),
                "image_path": str(o["image_path"]),
                **{key: float(value) for key, value in bbox.items()},
                columns.CAPTION: o["true_caption"],
                columns.HARD_NEGATIVE: o["false_caption"],
                columns.HARD_POSITIVE: p["true_caption"],
                "attributes": [str(attribute) for attribute in o["attributes"]],
                "upstream_index": index,
            }
        )
    return rows


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


def _generate_rows(rows: Sequence[dict], images: dict | None, crop_format: str) -> Iterator[dict]:
    for row in rows:
        if images is None:
            yield row
            continue
        found = images.get(row[columns.IMAGE_ID])
        if found is None:  # skipped missing image (--skip-missing)
            continue
        path, relative = found
        name = f"{row[columns.IMAGE_ID]}_{row['upstream_index']}.{crop_format}"
        image = {"bytes": crop_to_bbox(path.read_bytes(), row, crop_format), "path": name}
        yield {columns.IMAGE: image, **row, "image_path": relative}


def build_swap(
    rows: Sequence[dict], images: dict | None, *, work_dir: str | Path, crop_format: str = "png"
) -> datasets.Dataset:
    """A Dataset of ``rows``; ``images`` maps image_id -> (path, VG-relative path), None for no images."""
    if crop_format not in CROP_FORMATS:
        raise ValueError(f"crop_format must be one of {sorted(CROP_FORMATS)}, got {crop_format!r}")
    return dataset_from_generator(
        _generate_rows,
        {"rows": list(rows), "images": images, "crop_format": crop_format},
        swap_features(with_images=images is not None),
        split=SPLIT,
        work_dir=work_dir,
    )


COLUMN_MEANINGS = {
    columns.IMAGE: "the Visual Genome image cropped to the bbox (ARO protocol); PNG (lossless) unless built "
    "with `--crop-format jpeg`",
    columns.IMAGE_ID: "Visual Genome id of the source image",
    "image_path": "the source image inside Visual Genome (or ARO's `images/`)",
    "bbox_x": "crop box left (pixels)",
    "bbox_y": "crop box top (pixels)",
    "bbox_w": "crop box width",
    "bbox_h": "crop box height",
    columns.CAPTION: "c: the true caption (ARO Visual Genome Attribution)",
    columns.HARD_NEGATIVE: "c_n: the attributes swapped between the two objects (meaning changes)",
    columns.HARD_POSITIVE: "c_p: the two phrases swapped around \"and\" (meaning kept)",
    "attributes": "the two attributes of the ARO row",
    "upstream_index": "row index in the upstream JSON files",
}

USAGE = """from datasets import load_dataset

swap = load_dataset("{repo}", split="test")  # the single config is `default`
row = swap[0]  # row["image"] is already cropped to (bbox_x, bbox_y, bbox_x + bbox_w, bbox_y + bbox_h)"""

LICENSE_TEXT = (
    "Images: Visual Genome (CC BY 4.0). c and c_n: ARO's Visual Genome Attribution "
    f"(github.com/{ARO_REPO}); c_p: Kamath et al. 2024 (github.com/amitakamath/hard_positives). Check the "
    "upstream repositories for their terms before redistribution; this card's `cc-by-4.0` tag refers to "
    "the images."
)

ARO_CITATION = """@inproceedings{yuksekgonul2023when,
  title     = {When and Why Vision-Language Models Behave like Bags-Of-Words, and What to Do About It?},
  author    = {Yuksekgonul, Mert and Bianchi, Federico and Kalluri, Pratyusha and Jurafsky, Dan and Zou, James},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2023}
}"""


def export_swap(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    aro_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
    skip_missing: bool = False,
    embed_images: bool = True,
    crop_format: str = "png",
    cache_dir: str | Path | None = None,
    max_shard_size: int | str = "500MB",
    repo_id_for_card: str = "hardpos/swap",
    verify: bool = True,
    progress: bool = True,
) -> BuildReport:
    """Build SWAP into ``output_dir`` as a Hub repository folder (config ``default``, split ``test``)."""
    from .card import HARD_POSITIVE_CITATION, CardFacts, render_card
    from .hub_export import verify_export, write_config_shards

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    sources = Sources(upstream_dir, cache_dir)
    report = BuildReport(dataset="swap")
    rows = read_swap_rows(sources, aro_dir)
    report.sources.update(sources.provenance)

    images = None
    if embed_images:
        vg_images = VisualGenomeImages(images_dir, sources)
        wanted = {}
        for row in rows:
            wanted.setdefault(row[columns.IMAGE_ID], (vg_part_of(row["image_path"]), Path(row["image_path"]).name))
        images, missing = vg_images.resolve_all(wanted, skip_missing=skip_missing, progress=progress)
        report.sources["images"] = (
            "local Visual Genome folder" if images_dir else ", ".join(f"{p}: {u}" for p, u in VG_PART_URLS.items())
        )
        if missing:
            missing_set = set(missing)
            report.skipped_missing_images[CONFIG] = missing
            report.skipped_rows[CONFIG] = sum(row[columns.IMAGE_ID] in missing_set for row in rows)

    with tempfile.TemporaryDirectory(prefix="hardpos-build-", dir=cache_dir) as work_dir:
        dataset = build_swap(rows, images, work_dir=work_dir, crop_format=crop_format)
        exported = write_config_shards(dataset, output_dir, CONFIG, split=SPLIT, max_shard_size=max_shard_size)
        report.counts[CONFIG] = len(dataset)
        del dataset
    report.expected_counts[CONFIG] = PAPER_COUNTS["swap"]

    facts = CardFacts(
        title="SWAP: hard negatives and hard positives by swapping",
        pretty_name="SWAP (Hard Positive benchmark)",
        summary=(
            "The SWAP benchmark of *The Hard Positive Truth about Vision-Language Compositionality* "
            "(Kamath et al., ECCV 2024), on ARO's Visual Genome Attribution: each image crop comes with "
            "its caption c (\"the white dog and the black cat\"), the ARO hard negative c_n (attributes "
            "swapped, meaning changed) and a hard positive c_p (the two phrases swapped around \"and\", "
            "meaning kept)."
        ),
        builder="hf_hardpos.data.swap.export_swap",
        usage=USAGE.format(repo=repo_id_for_card),
        column_meanings=COLUMN_MEANINGS,
        defects=(
            "None flagged by this builder. Crops follow ARO exactly: a bbox reaching outside the image is "
            "padded with black by PIL, as in ARO's own loader."
        ),
        license_id="cc-by-4.0",
        license_text=LICENSE_TEXT,
        citation=HARD_POSITIVE_CITATION + "\n\n" + ARO_CITATION,
        expected_counts=report.expected_counts,
        tags=["compositionality", "hard-positives", "hard-negatives", "clip", "visual-genome", "aro"],
        task_categories=["zero-shot-image-classification"],
    )
    render_card(output_dir, [exported], facts, report)
    report.save(output_dir / "build_report.json")
    if verify:
        verify_export(output_dir, exported)
    for line in report.count_lines():
        print(line)
    return report
