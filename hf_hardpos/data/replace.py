"""REPLACE benchmark builder: VL-CheckList captions with the Hard Positive paper's c_p, on VG images.

Reads ``data/vl_checklist_<subset>.json`` (c, c_n) and ``swapped_data/vl_checklist_<subset>.json``
(c_p) of the hard_positives repository, checks they align row by row, adds the replaced phrase and the
quality flags, and embeds each row's Visual Genome image as its original JPEG bytes. The rows are the
paper's rows exactly (10,575 attributes + 16,868 relations); defects are flagged, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import datasets

from .. import columns
from .defects import first_occurrences, is_substring_artifact, substitution_table
from .generate import dataset_from_generator
from .phrase_diff import phrase_diff
from .sources import Sources, VisualGenomeImages, vg_part_of
from .validation import PAPER_COUNTS, check_aligned, load_json_list

REPLACE_SUBSETS = ("attributes", "relations")
UNION_CONFIG = "all"
SPLIT = "test"
UPSTREAM_FIELDS = ("image_id", "true_caption", "false_caption", "image_path")


def original_file(subset: str) -> str:
    return f"data/vl_checklist_{subset}.json"


def positive_file(subset: str) -> str:
    return f"swapped_data/vl_checklist_{subset}.json"


def replace_features(with_images: bool = True) -> datasets.Features:
    """Row schema: the shared eval columns, then provenance and the quality flags."""
    fields = {columns.IMAGE: datasets.Image()} if with_images else {}
    fields.update(
        {
            columns.IMAGE_ID: datasets.Value("string"),
            "image_path": datasets.Value("string"),
            columns.CAPTION: datasets.Value("string"),
            columns.HARD_NEGATIVE: datasets.Value("string"),
            columns.HARD_POSITIVE: datasets.Value("string"),
            "subset": datasets.Value("string"),
            "replaced_phrase": datasets.Value("string"),
            "replacement": datasets.Value("string"),
            "substring_artifact": datasets.Value("bool"),
            "is_duplicate": datasets.Value("bool"),
            "duplicate_of": datasets.Value("int64"),
            "upstream_index": datasets.Value("int64"),
        }
    )
    return datasets.Features(fields)


def read_replace_subset(sources: Sources, subset: str) -> list[dict]:
    """The annotated rows of one subset (no images), in upstream order, validated for alignment."""
    if subset not in REPLACE_SUBSETS:
        raise ValueError(f"unknown REPLACE subset {subset!r}; expected one of {REPLACE_SUBSETS}")
    original_path = sources.upstream_file(original_file(subset))
    positive_path = sources.upstream_file(positive_file(subset))
    original = load_json_list(original_path, UPSTREAM_FIELDS)
    positive = load_json_list(positive_path, UPSTREAM_FIELDS)
    check_aligned(
        original,
        positive,
        keys=("image_id", "false_caption"),
        original_name=str(original_path),
        positive_name=str(positive_path),
    )
    diffs = [phrase_diff(o["true_caption"], p["true_caption"]) for o, p in zip(original, positive)]
    table = substitution_table(diffs)
    duplicate_of = first_occurrences(
        [(str(o["image_id"]), o["true_caption"], o["false_caption"]) for o in original]
    )
    rows = []
    for index, (o, p) in enumerate(zip(original, positive)):
        image_id = str(o["image_id"])
        part = vg_part_of(o["image_path"])
        rows.append(
            {
                columns.IMAGE_ID: image_id,
                "image_path": f"{part}/{image_id}.jpg" if part else Path(o["image_path"]).name,
                columns.CAPTION: o["true_caption"],
                columns.HARD_NEGATIVE: o["false_caption"],
                columns.HARD_POSITIVE: p["true_caption"],
                "subset": subset,
                "replaced_phrase": diffs[index][0],
                "replacement": diffs[index][1],
                "substring_artifact": is_substring_artifact(o["true_caption"], p["true_caption"], table),
                "is_duplicate": duplicate_of[index] is not None,
                "duplicate_of": duplicate_of[index],
                "upstream_index": index,
            }
        )
    return rows


def _generate_rows(rows: Sequence[dict], images: dict | None) -> Iterator[dict]:
    """Yield rows, reading each image's bytes only when its row is written (streaming)."""
    for row in rows:
        if images is None:
            yield row
            continue
        found = images.get(row[columns.IMAGE_ID])
        if found is None:  # skipped missing image (--skip-missing)
            continue
        path, relative = found
        yield {columns.IMAGE: {"bytes": path.read_bytes(), "path": relative}, **row}


def build_replace_subset(
    rows: Sequence[dict],
    images: dict | None,
    *,
    work_dir: str | Path,
) -> datasets.Dataset:
    """A Dataset of one subset's ``rows``; ``images`` maps image_id -> (path, relative path), or None
    to build without the image column."""
    return dataset_from_generator(
        _generate_rows,
        {"rows": list(rows), "images": images},
        replace_features(with_images=images is not None),
        split=SPLIT,
        work_dir=work_dir,
    )


def locate_images(
    rows: Sequence[dict], vg_images: VisualGenomeImages, *, skip_missing: bool
) -> tuple[dict, list[str]]:
    """Resolve the distinct images of ``rows`` (part hint from image_path) before building."""
    wanted = {}
    for row in rows:
        wanted.setdefault(row[columns.IMAGE_ID], vg_part_of(row["image_path"]))
    return vg_images.resolve_all(wanted, skip_missing=skip_missing)


def expected_count(subset: str) -> int:
    return PAPER_COUNTS[f"replace/{subset}"]
