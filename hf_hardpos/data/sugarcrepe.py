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
from ..citations import COCO, SUGARCREPE, SUGARCREPE_PP, cite
from .checks import DataValidationError, check_rows, load_json, load_json_list, selected
from .hub_folder import BuildOptions, BuildReport, CardFacts, ConfigBuild, count_flags, export_folder, flag_table, row_features
from .sources import COCO_VAL2017_URL, SUGARCREPE_PP_REPO, SUGARCREPE_REPO, GitHubRepo, ImageFolder, Sources, locate_images

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
        raise DataValidationError(f"{path}: expected a JSON object keyed by row index, got {type(data).__name__}")
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


SUGARCREPE_COLUMNS = {
    columns.IMAGE: "the COCO val2017 image named by upstream `filename`, original JPEG bytes",
    columns.IMAGE_ID: "COCO val2017 file name (upstream `filename`)",
    columns.CAPTION: "c: the positive caption (upstream `caption`, a COCO caption)",
    columns.HARD_NEGATIVE: "c_n: the hard negative (upstream `negative_caption`)",
    "subset": "the upstream file (`data/<subset>.json`)",
    "upstream_key": "the row's key in the upstream file (row index; upstream `swap_obj` has no key 108)",
    "negative_same_words": "computed by this builder: c_n uses exactly the words of c, reordered "
    "(case and punctuation ignored)",
}


SUGARCREPE_FLAGS = {"negative_same_words": "`negative_same_words` rows"}


def _sugarcrepe_defects(report: BuildReport) -> str:
    return "\n".join([
        "No row is dropped or changed. Measured in this build: rows whose hard negative uses exactly the "
        "caption's words, only reordered (sugar-crepe issue #10 notes this for the swap subsets: a model "
        "that ignores word order cannot tell such a pair apart):",
        "",
        *flag_table(report, SUGARCREPE_FLAGS),
    ])


# --- SugarCrepe++ -----------------------------------------------------------------------------------


SUGARCREPE_PP_FLAGS = {name: f"`{name}`" for name in ("negative_equals_caption", "hard_positive_equals_caption")}


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


SUGARCREPE_PP_COLUMNS = {
    columns.IMAGE: "the COCO val2017 image named by upstream `filename`, original JPEG bytes",
    columns.IMAGE_ID: "COCO val2017 file name (upstream `filename`)",
    columns.CAPTION: "c: the first positive caption (upstream `caption`)",
    columns.HARD_POSITIVE: "c_p: the second positive caption (upstream `caption2`, a human-validated paraphrase)",
    columns.HARD_NEGATIVE: "c_n: the hard negative (upstream `negative_caption`)",
    "subset": "the upstream file (`data/<subset>.json`)",
    "upstream_id": "the row's `id` in the upstream file",
    "negative_equals_caption": "computed by this builder: c_n equals c (defect: no model can rank c above c_n)",
    "hard_positive_equals_caption": "computed by this builder: c_p equals c (defect: the row tests no paraphrase)",
}


def _sugarcrepe_pp_defects(report: BuildReport) -> str:
    return "\n".join([
        "Kept as upstream has them and flagged, so results stay comparable with the paper's and the "
        "defective rows can be filtered (whitespace at the ends ignored when comparing):",
        "",
        *flag_table(report, SUGARCREPE_PP_FLAGS),
        "",
        "With strict inequalities a row whose c_n equals c can never count as correct, and a row whose c_p "
        "equals c can never be brittle.",
    ])


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
    facts: Callable[[str], CardFacts]


COCO_LICENSE = "Images: COCO val2017 (annotations CC BY 4.0; images under the Flickr terms of use)."

USAGE_SUGARCREPE = """from datasets import load_dataset

swap_obj = load_dataset("{repo}", "swap_obj", split="test")
row = swap_obj[0]  # image, caption (c), hard_negative (c_n)
# SugarCrepe's metric: accuracy of s(c|i) > s(c_n|i) per subset (strict inequality)."""

USAGE_SUGARCREPE_PP = """from datasets import load_dataset

replace_att = load_dataset("{repo}", "replace_att", split="test")
row = replace_att[0]  # image, caption (c), hard_positive (c_p = caption2), hard_negative (c_n)
# Defective rows are flagged, not dropped; to drop them:
clean = replace_att.filter(lambda r: not r["negative_equals_caption"] and not r["hard_positive_equals_caption"])"""


def _sugarcrepe_facts(repo_id: str) -> CardFacts:
    return CardFacts(
        title="SugarCrepe: image-text compositionality with fluent hard negatives",
        pretty_name="SugarCrepe",
        summary=(
            "SugarCrepe (Hsieh et al., NeurIPS 2023 Datasets and Benchmarks): COCO val2017 images, each "
            "with a caption c and a hard negative c_n made by adding, replacing or swapping an object, "
            "attribute or relation, then filtered for fluency and against text-only shortcuts. Seven "
            "subsets, 7,511 rows. A model is correct on a row when s(c|i) > s(c_n|i) (strict)."
        ),
        builder="hf_hardpos.data.sugarcrepe.export_sugarcrepe",
        usage=USAGE_SUGARCREPE.format(repo=repo_id),
        column_meanings=SUGARCREPE_COLUMNS,
        defects=_sugarcrepe_defects,
        license_id="mit",
        license_text="Captions and hard negatives: SugarCrepe, MIT License (github.com/RAIVNLab/sugar-crepe). "
        + COCO_LICENSE,
        citation=cite(SUGARCREPE, COCO),
        tags=["compositionality", "hard-negatives", "clip", "coco", "sugarcrepe"],
    )


def _sugarcrepe_pp_facts(repo_id: str) -> CardFacts:
    return CardFacts(
        title="SugarCrepe++: two positive captions and a hard negative per image",
        pretty_name="SugarCrepe++",
        summary=(
            "SugarCrepe++ (Dumpala et al., NeurIPS 2024 Datasets and Benchmarks): the replace and swap "
            "subsets of SugarCrepe with a second positive caption, a human-validated paraphrase of the "
            "first. In the Hard Positive paper's terms each row is (c, c_p, c_n): SC++'s image-to-text "
            "metric ITT is augmented accuracy, s(c|i) > s(c_n|i) and s(c_p|i) > s(c_n|i) (strict), and "
            "brittleness applies unchanged. Five subsets, 4,757 rows."
        ),
        builder="hf_hardpos.data.sugarcrepe.export_sugarcrepe_pp",
        usage=USAGE_SUGARCREPE_PP.format(repo=repo_id),
        column_meanings=SUGARCREPE_PP_COLUMNS,
        defects=_sugarcrepe_pp_defects,
        license_id="cc-by-4.0",
        license_text="Captions: SugarCrepe++ (github.com/Sri-Harsha/scpp), whose LICENSE file is MIT and whose "
        "README states CC BY 4.0 for the dataset (the card's tag follows the README); built on SugarCrepe "
        "(MIT). " + COCO_LICENSE,
        citation=cite(SUGARCREPE_PP, SUGARCREPE, COCO),
        tags=["compositionality", "hard-positives", "hard-negatives", "clip", "coco", "sugarcrepe"],
    )


SUGARCREPE_BENCHMARK = CocoBenchmark(
    "sugarcrepe",
    SUGARCREPE_REPO,
    SUGARCREPE_COUNTS,
    read_sugarcrepe_subset,
    sugarcrepe_features,
    tuple(SUGARCREPE_FLAGS),
    _sugarcrepe_facts,
)
SUGARCREPE_PP_BENCHMARK = CocoBenchmark(
    "sugarcrepe_pp",
    SUGARCREPE_PP_REPO,
    SUGARCREPE_PP_COUNTS,
    read_sugarcrepe_pp_subset,
    sugarcrepe_pp_features,
    tuple(SUGARCREPE_PP_FLAGS),
    _sugarcrepe_pp_facts,
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
            origin=lambda row: f"{paths[row['subset']]}: row {row.get('upstream_key', row.get('upstream_id'))} field filename",
        )
        report.sources["images"] = f"COCO val2017: {folder.description}"
    configs = [
        ConfigBuild(subset, rows, benchmark.features(), benchmark.counts[subset], count_flags(rows, benchmark.flags), images)
        for subset, rows in rows_by_subset.items()
    ]
    facts = benchmark.facts(options.repo_id_for_card or f"hardpos/{benchmark.name}")
    return export_folder(output_dir, configs, facts, report, split=SPLIT, options=options)


def export_sugarcrepe(output_dir: str | Path, **options) -> BuildReport:
    """Build ``hardpos/sugarcrepe`` (7 configs); options as :func:`export_coco_benchmark`."""
    return export_coco_benchmark(SUGARCREPE_BENCHMARK, output_dir, **options)


def export_sugarcrepe_pp(output_dir: str | Path, **options) -> BuildReport:
    """Build ``hardpos/sugarcrepe_pp`` (5 configs); options as :func:`export_coco_benchmark`."""
    return export_coco_benchmark(SUGARCREPE_PP_BENCHMARK, output_dir, **options)
