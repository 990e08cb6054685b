"""SugarCrepe and SugarCrepe++ builders: COCO val2017 images with their upstream captions, in upstream order.

SugarCrepe (Hsieh et al. 2023) pairs each image with a caption c and a hard negative c_n;
SugarCrepe++ (Dumpala et al. 2024) adds a second, human-validated positive caption ``caption2`` — exactly
the hard positive c_p of the Hard Positive paper, so its rows use our eval schema (c, c_p, c_n) and
augmented accuracy and brittleness apply unchanged. Both read ``data/<subset>.json`` of their
repository (SugarCrepe: a dict keyed by row index; SC++: a list with an ``id``), keep every row in file
order and flag the defective ones instead of dropping them. Images are the COCO val2017 files named by
``filename``, embedded as their original JPEG bytes; SugarCrepe and SC++ share them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from .. import columns
from .build_report import BuildReport, count_flags
from .checks import DataValidationError, check_rows, load_json, load_json_list, selected
from .dataset_card import card_facts, flag_table
from .hub_folder import BuildOptions, ConfigBuild, export_folder, row_features
from .image_sources import ImageFolder, locate_images
from .sources import COCO_VAL2017_URL, SUGARCREPE_PP_REPO, SUGARCREPE_REPO, GitHubRepo, Sources

SPLIT = "test"
# Rows per subset in the papers (checked against the upstream files at the pinned commits, docs/reference.md, Other benchmarks).
SUGARCREPE_COUNTS = {
    "add_att": 692,
    "add_obj": 2_062,
    "replace_att": 788,
    "replace_obj": 1_652,
    "replace_rel": 1_406,
    "swap_att": 666,
    "swap_obj": 245,
}
SUGARCREPE_PP_COUNTS = {
    "replace_att": 788,
    "replace_obj": 1_652,
    "replace_rel": 1_406,
    "swap_att": 666,
    "swap_obj": 245,
}


def upstream_file(subset: str) -> str:
    return f"data/{subset}.json"


def _words(text: str) -> list[str]:
    return sorted(re.findall(r"[a-z0-9']+", text.lower()))


# --- SugarCrepe -------------------------------------------------------------------------------------


def read_sugarcrepe_subset(path: Path, subset: str) -> list[dict]:
    """The rows of one SugarCrepe file, in file order; ``upstream_key`` is the row's key there."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise DataValidationError(
            f"{path}: expected a JSON object keyed by row index, got {type(data).__name__}"
        )
    keys = list(data)
    bad_keys = [key for key in keys if not key.isdigit()]
    if bad_keys:
        raise DataValidationError(f"{path}: row key {bad_keys[0]!r} is not a row index")
    values = list(data.values())
    check_rows(path, values, ("filename", "caption", "negative_caption"), labels=keys)
    return [
        {
            columns.IMAGE_ID: row["filename"],
            columns.CAPTION: row["caption"],
            columns.HARD_NEGATIVE: row["negative_caption"],
            "subset": subset,
            "upstream_key": int(key),
            "negative_same_words": _words(row["negative_caption"]) == _words(row["caption"]),
        }
        for key, row in zip(keys, values)
    ]


def sugarcrepe_features() -> datasets.Features:
    return row_features(
        (columns.IMAGE_ID, columns.CAPTION, columns.HARD_NEGATIVE, "subset"),
        {"upstream_key": "int64", "negative_same_words": "bool"},
    )


SUGARCREPE_FLAGS = {"negative_same_words": "`negative_same_words` rows"}


def _sugarcrepe_defects(report: BuildReport) -> str:
    return "\n".join(
        [
            "No row is dropped or changed. Measured in this build: rows whose hard negative uses exactly the "
            "caption's words, only reordered (sugar-crepe issue #10 notes this for the swap subsets: a model "
            "that ignores word order cannot tell such a pair apart):",
            "",
            *flag_table(report, SUGARCREPE_FLAGS),
        ]
    )


# --- SugarCrepe++ -----------------------------------------------------------------------------------


SUGARCREPE_PP_FLAGS = {
    name: f"`{name}`" for name in ("negative_equals_caption", "hard_positive_equals_caption")
}


def read_sugarcrepe_pp_subset(path: Path, subset: str) -> list[dict]:
    """The rows of one SC++ file, in file order, with the two defect flags."""
    rows = load_json_list(path, ("id", "filename", "caption", "caption2", "negative_caption"))
    return [
        {
            columns.IMAGE_ID: row["filename"],
            columns.CAPTION: row["caption"],
            columns.HARD_POSITIVE: row["caption2"],
            columns.HARD_NEGATIVE: row["negative_caption"],
            "subset": subset,
            "upstream_id": int(row["id"]),
            "negative_equals_caption": row["negative_caption"].strip() == row["caption"].strip(),
            "hard_positive_equals_caption": row["caption2"].strip() == row["caption"].strip(),
        }
        for row in rows
    ]


def sugarcrepe_pp_features() -> datasets.Features:
    return row_features(
        (columns.IMAGE_ID, columns.CAPTION, columns.HARD_POSITIVE, columns.HARD_NEGATIVE, "subset"),
        {"upstream_id": "int64", **dict.fromkeys(SUGARCREPE_PP_FLAGS, "bool")},
    )


def _sugarcrepe_pp_defects(report: BuildReport) -> str:
    return "\n".join(
        [
            "Kept as upstream has them and flagged, so results stay comparable with the paper's and the "
            "defective rows can be filtered (whitespace at the ends ignored when comparing):",
            "",
            *flag_table(report, SUGARCREPE_PP_FLAGS),
            "",
            "With strict inequalities a row whose c_n equals c can never count as correct, and a row whose c_p "
            "equals c can never be brittle.",
        ]
    )


# --- shared export ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CocoBenchmark:
    """What differs between the SugarCrepe-family builders; the export itself is shared."""

    name: str
    repo: GitHubRepo
    counts: Mapping[str, int]
    read: Callable[[Path, str], list[dict]]
    features: Callable[[], datasets.Features]
    flags: Sequence[str]  # the per-row flags the card counts
    defects: Callable[[BuildReport], str]  # the card's text about them, from the counts


SUGARCREPE_BENCHMARK = CocoBenchmark(
    "sugarcrepe",
    SUGARCREPE_REPO,
    SUGARCREPE_COUNTS,
    read_sugarcrepe_subset,
    sugarcrepe_features,
    tuple(SUGARCREPE_FLAGS),
    _sugarcrepe_defects,
)
SUGARCREPE_PP_BENCHMARK = CocoBenchmark(
    "sugarcrepe_pp",
    SUGARCREPE_PP_REPO,
    SUGARCREPE_PP_COUNTS,
    read_sugarcrepe_pp_subset,
    sugarcrepe_pp_features,
    tuple(SUGARCREPE_PP_FLAGS),
    _sugarcrepe_pp_defects,
)


def export_coco_benchmark(
    benchmark: CocoBenchmark,
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
    subsets: Sequence[str] | None = None,
    embed_images: bool = True,
    **settings: Any,
) -> BuildReport:
    """Build ``benchmark`` into ``output_dir``: one config per subset, split ``test``, rows in file order.

    ``upstream_dir`` is a local copy of the benchmark's repository (``data/<subset>.json``); without
    it the files are downloaded at the pinned commit. ``images_dir`` holds COCO val2017 by file name;
    without it ``val2017.zip`` is downloaded (about 1 GB, cached). ``settings``: the fields of
    :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    subsets = selected(f"{benchmark.name} subset(s)", subsets, list(benchmark.counts))
    sources = Sources(upstream_dir, options.cache_dir, repo=benchmark.repo)
    report = BuildReport(dataset=benchmark.name)
    paths = {subset: sources.upstream_file(upstream_file(subset)) for subset in subsets}
    rows_by_subset = {subset: benchmark.read(path, subset) for subset, path in paths.items()}
    report.record_sources(sources)
    images = None
    if embed_images:
        folder = ImageFolder(images_dir, sources, archive_url=COCO_VAL2017_URL, archive_folder="val2017")
        images = locate_images(
            folder,
            (row for rows in rows_by_subset.values() for row in rows),
            options,
            origin=lambda row: (
                f"{paths[row['subset']]}: row {row.get('upstream_key', row.get('upstream_id'))} field filename"
            ),
        )
        report.sources["images"] = f"COCO val2017: {folder.description}"
    configs = [
        ConfigBuild(
            subset,
            rows,
            benchmark.features(),
            benchmark.counts[subset],
            count_flags(rows, benchmark.flags),
            images,
        )
        for subset, rows in rows_by_subset.items()
    ]
    repo = options.repo_id_for_card or f"hardpos/{benchmark.name}"
    facts = card_facts(benchmark.name, repo=repo, defects=benchmark.defects)
    return export_folder(output_dir, configs, facts, report, split=SPLIT, options=options)


def export_sugarcrepe(output_dir: str | Path, **options) -> BuildReport:
    """Build ``hardpos/sugarcrepe`` (7 configs); options as :func:`export_coco_benchmark`."""
    return export_coco_benchmark(SUGARCREPE_BENCHMARK, output_dir, **options)


def export_sugarcrepe_pp(output_dir: str | Path, **options) -> BuildReport:
    """Build ``hardpos/sugarcrepe_pp`` (5 configs); options as :func:`export_coco_benchmark`."""
    return export_coco_benchmark(SUGARCREPE_PP_BENCHMARK, output_dir, **options)
