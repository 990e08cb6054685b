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
from .aro import BBOX_FEATURES, BBOX_FIELDS, BboxCrop, aro_file, locate_crop_sources, vg_rows
from .build_report import BuildReport
from .checks import load_aligned_pair
from .dataset_card import card_facts
from .hub_folder import BuildOptions, ConfigBuild, export_folder, row_features
from .image_sources import VisualGenomeImages
from .sources import Sources

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
    facts = card_facts("swap", repo=options.repo_id_for_card or "hardpos/swap")
    config = ConfigBuild(CONFIG, rows, swap_features(), expected_count=PAPER_COUNT, images=images)
    return export_folder(output_dir, [config], facts, report, split=SPLIT, options=options)
