"""SWAP benchmark builder: ARO's Visual Genome Attribution with the Hard Positive paper's c_p.

Reads ARO's ``visual_genome_attribution.json`` (c, c_n, bbox, the two attributes) and
``swapped_data/visual_genome_attribution.json`` of the hard_positives repository (same rows, c_p),
checks they align, and stores each row's image **cropped to its bbox**, as ARO scores it. The crop is
stored losslessly (PNG) by default so the pixels are exactly those ARO's ``Image.crop`` gives; the
source image id, its VG path and the bbox are kept so the crop can be redone from the full image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets

from .. import columns
from ..citations import ARO, HARD_POSITIVES, cite
from .aro import BBOX_FEATURES, BBOX_FIELDS, BboxCrop, aro_file, locate_crop_sources, vg_rows
from .checks import load_aligned_pair
from .hub_folder import BuildOptions, BuildReport, CardFacts, ConfigBuild, export_folder, row_features
from .sources import ARO_REPO, Sources, VisualGenomeImages

CONFIG = "default"
SPLIT = "test"
PAPER_COUNT = 28_748  # ARO's VG-Attribution rows (docs/reference.md, The evaluation datasets)
ARO_ATTRIBUTION_FILE = "visual_genome_attribution.json"
POSITIVE_FILE = f"swapped_data/{ARO_ATTRIBUTION_FILE}"
ARO_FIELDS = ("image_id", "image_path", *BBOX_FIELDS, "true_caption", "false_caption", "attributes")
POSITIVE_FIELDS = ("image_id", "true_caption", "false_caption")


def swap_features() -> datasets.Features:
    """Row schema (the cropped image column is added when images are embedded)."""
    return row_features(
        (columns.IMAGE_ID, "image_path"),
        BBOX_FEATURES,
        columns.EVAL_CAPTION_COLUMNS,
        {"attributes": datasets.List(datasets.Value("string")), "upstream_index": "int64"},
    )


def read_swap_rows(sources: Sources, original_path: Path) -> list[dict]:
    """The SWAP rows (no images) in upstream order, validated for alignment and bbox sanity:
    ARO's VG-Attribution rows (``original_path``) with the hard positive of the aligned row."""
    positive_path = sources.upstream_file(POSITIVE_FILE)
    original, positive = load_aligned_pair(original_path, positive_path, ARO_FIELDS, POSITIVE_FIELDS)
    rows = vg_rows(original_path, original, "attributes")
    for row, p in zip(rows, positive):
        row[columns.HARD_POSITIVE] = p["true_caption"]
    return rows


COLUMN_MEANINGS = {
    columns.IMAGE: "the Visual Genome image cropped to ARO's bbox by this builder (ARO protocol); PNG "
    "(lossless) unless built with `--crop-format jpeg`",
    columns.IMAGE_ID: "Visual Genome id of the source image (ARO `image_id`)",
    "image_path": "where the source image was found inside Visual Genome (or ARO's `images/`)",
    "bbox_x": "crop box left in pixels (ARO `bbox_x`)",
    "bbox_y": "crop box top in pixels (ARO `bbox_y`)",
    "bbox_w": "crop box width (ARO `bbox_w`)",
    "bbox_h": "crop box height (ARO `bbox_h`)",
    columns.CAPTION: "c: the true caption (ARO Visual Genome Attribution `true_caption`)",
    columns.HARD_NEGATIVE: "c_n: ARO's `false_caption`, the attributes swapped between the two objects (meaning changes)",
    columns.HARD_POSITIVE: "c_p: hard_positives `swapped_data/` `true_caption`, the two phrases swapped around "
    "\"and\" (meaning kept)",
    "attributes": "the two attributes of the ARO row (ARO `attributes`)",
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

def export_swap(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    aro_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
    embed_images: bool = True,
    crop_format: str = "png",
    **settings: Any,
) -> BuildReport:
    """Build SWAP into ``output_dir`` as a Hub repository folder (config ``default``, split ``test``);
    ``settings``: the fields of :class:`BuildOptions`."""
    options = BuildOptions(**settings)
    encode = BboxCrop(crop_format)
    sources = Sources(upstream_dir, options.cache_dir)
    report = BuildReport(dataset="swap")
    original_path = aro_file(sources, ARO_ATTRIBUTION_FILE, aro_dir)
    rows = read_swap_rows(sources, original_path)
    report.record_sources(sources)
    images = None
    if embed_images:
        vg_images = VisualGenomeImages(images_dir, sources)
        images = locate_crop_sources(rows, vg_images, original_path, options, encode)
        report.sources["images"] = vg_images.description
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
        usage=USAGE.format(repo=options.repo_id_for_card or "hardpos/swap"),
        column_meanings=COLUMN_MEANINGS,
        defects=(
            "None flagged by this builder. Crops follow ARO exactly: a bbox reaching outside the image is "
            "padded with black by PIL, as in ARO's own loader."
        ),
        license_id="cc-by-4.0",
        license_text=LICENSE_TEXT,
        citation=cite(HARD_POSITIVES, ARO),
        tags=["compositionality", "hard-positives", "hard-negatives", "clip", "visual-genome", "aro"],
    )
    config = ConfigBuild(CONFIG, rows, swap_features(), expected_count=PAPER_COUNT, images=images)
    return export_folder(output_dir, [config], facts, report, split=SPLIT, options=options)
