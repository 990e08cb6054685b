"""VALSE builder (Parcalabescu et al., ACL 2022): one config per piece, every upstream row, flagged.

VALSE tests linguistic phenomena (existence, plurality, counting, spatial relations, actions,
coreference, and FOIL-it's nouns) with a caption and a *foil*: the caption with one phrase changed so
that it no longer fits the image. CE-CLIP (Zhang et al., CVPR 2024, Table 1) reports it for CLIP-style
models as the share of rows with s(caption|i) > s(foil|i).

Upstream (github.com/Heidelberg-NLP/VALSE, ``data/<piece>.json``, checked at commit 2152d90; the data
has not changed since a64f89e): each file is a JSON object ``id -> row`` with ``dataset,
original_split, linguistic_phenomena, image_file, caption, foil, classes, classes_foil,
mturk{caption, foil, other}`` and piece-specific fields whose types vary (``classes`` may be a string, a
number, a list or a boolean), so only the fields below are read. The files hold validated and
unvalidated rows alike: VALSE's README defines the *valid* rows as those where at least two of three
annotators chose the caption and not the foil (``mturk.caption >= 2``). Every row is kept here with
that vote (``mturk_caption``) and a ``valid`` flag; the evaluation keeps the valid rows, as VALSE and
CE-CLIP do. 24 upstream rows have caption == foil (flagged; the filter removes all of them).

Images are not in the VALSE repository: Visual7W (existence, counting: ``v7w_<id>.jpg``), COCO val2017
(plurals, relations), SWiG (actions: ``<verb>_<n>.jpg``), VisDial v1.0 (coreference: COCO train/val2014
and ``VisualDialog_val2018_*``) and COCO val2014 (foil-it). Put them in one folder by file name
(``--images-dir``); a missing image stops the build with the count and the first names, unless
``--skip-missing`` is given (then the card and ``build_report.json`` list what was left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets

from ... import columns
from ...benchmark_registry import PaperSource
from ...data.build_report import BuildReport, count_flags
from ...data.checks import DataValidationError, load_json, selected
from ...data.dataset_card import card_facts, flag_table
from ...data.hub_folder import BuildOptions, export_with_image_files, row_features
from ...data.image_sources import ImageFolder
from ...data.sources import FileDigest, GitHubRepo, Sources

CARD_TEXT = Path(__file__).with_name("card.yaml")  # the card's prose, kept as data beside the builder

SPLIT = "test"
# Each piece's file at the pinned commit: git blob id and sha256 (computed from the files of that commit),
# so a build of them can be shown to be VALSE's own data (`evaluation.paper_data`).
_VALSE_FILES = {
    "actant-swap": ("6ca5b8ea4031c953a8a2de4a5e06377a5a11ba17", "915294ac3ade7c4c067b1c6841d0db93b60cb8a61ac8e2fb6b125c2a1c0ca93a"),
    "action-replacement": ("7ba2fd2c2039b82755eef5c16283161063759124", "336ba134f29a3475d0508809067218909a6bd30f079c59309d19244eccb7917f"),
    "coreference-hard": ("7db2ec7b4b2a02723f4dd3c3e14c81f23e456cc8", "ef54d8d971d9e0f264e07de08d9915c6e3d6129a2f239888f2b938f5c2eb4139"),
    "coreference-standard": ("3dc00f694e14d52f3534e9180e0e2900e5a4d952", "dae1d9eb018acb54e29a1c4983f3563f86ec3b6beb4037a261564270b0473e95"),
    "counting-adversarial": ("72f5ac7a2c45a59a58c44f9d80cbc555324c3cb2", "0d23529308449c98b37a91048a865a5f377325eceb9accd73f2947bc512d12b0"),
    "counting-hard": ("80db438e1c27393a7d90217cfd52d4be96484154", "2cc83615653675fb50914ce2d8ab4041cce1278eed7ac0abf6f319dbce5c967a"),
    "counting-small-quant": ("8458f64b94d02275d2d270781000b79aab964b6c", "ca0645885b05738f6c6df2dffec70c669aaff64114017f33425821faab4bc374"),
    "existence": ("b3a65479f36ddc60f419c243a14da1fbfcba71db", "b20fca52eba86c544083d423345a2e28e60e601ef61c56c9ac1c73a95a3a6d18"),
    "foil-it": ("1f2f1c30631c52b98be3bd2383d40dbe855ba908", "6f6f0d7494271ed28f6e6f075c3ba36ba1bc45d00ecf7403920f060915130460"),
    "plurals": ("040fc8c011599574d38ca8ef46376bac5e4204a1", "43760db7fc8c6f2a21d3536d52f81539cb101f3370e8d2effb09de43d91486a3"),
    "relations": ("b3f0a30d41ecd3eec6e36a253ba4de00621eae41", "061fc557459c318ccd6734d07c21cfa5bf5ae87aa6b1110b8f5ec3d6b2911043"),
}  # fmt: skip
VALSE_REPO = GitHubRepo(
    "Heidelberg-NLP/VALSE",
    "2152d90d4aecd11f7f74cf03420abcb63efff9c5",
    {f"data/{piece}.json": FileDigest(*digests) for piece, digests in _VALSE_FILES.items()},
)
VALID_VOTES = 2  # VALSE README: a valid foil has mturk.caption >= 2 of 3 annotators

# piece -> (rows in the upstream file, rows with mturk.caption >= 2), read from the files at 2152d90.
VALSE_COUNTS: dict[str, tuple[int, int]] = {
    "existence": (534, 505),
    "plurals": (1000, 851),
    "counting-hard": (1000, 868),
    "counting-small-quant": (1000, 900),
    "counting-adversarial": (756, 691),
    "relations": (614, 535),
    "action-replacement": (779, 648),
    "actant-swap": (1042, 949),
    "coreference-standard": (916, 708),
    "coreference-hard": (141, 104),
    "foil-it": (1000, 943),
}
PIECES = tuple(VALSE_COUNTS)
# VALSE's figures count its valid rows (mturk.caption >= 2) per piece.
PAPER_SOURCE = PaperSource(VALSE_REPO, {piece: counts[1] for piece, counts in VALSE_COUNTS.items()})


def upstream_file(piece: str) -> str:
    return f"data/{piece}.json"


def _votes(row: dict, path: Path, key: str) -> int | None:
    mturk = row.get("mturk")
    if mturk is None:
        return None
    if (
        not isinstance(mturk, dict)
        or not isinstance(mturk.get("caption"), int)
        or isinstance(mturk.get("caption"), bool)
    ):
        raise DataValidationError(
            f"{path}: row {key!r}, field mturk.caption: expected an integer vote count, got {mturk!r}"
        )
    return mturk["caption"]


def read_valse_piece(path: Path, piece: str) -> list[dict]:
    """The rows of one VALSE file, in file order, with the annotators' vote and the two flags."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise DataValidationError(
            f"{path}: expected a JSON object keyed by row id, got {type(data).__name__}"
        )
    rows = []
    for key, row in data.items():
        if not isinstance(row, dict):
            raise DataValidationError(f"{path}: row {key!r} is a {type(row).__name__}, expected an object")
        for field in ("image_file", "caption", "foil"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                raise DataValidationError(
                    f"{path}: row {key!r}, field {field!r}: expected a non-empty string"
                )
        votes = _votes(row, path, key)
        rows.append(
            {
                columns.IMAGE_ID: row["image_file"],
                columns.CAPTION: row["caption"],
                columns.HARD_NEGATIVE: row["foil"],
                "subset": piece,
                "upstream_id": str(key),
                "source_dataset": str(row.get("dataset", "")),
                "mturk_caption": votes,
                "valid": votes is not None and votes >= VALID_VOTES,
                "caption_equals_foil": row["caption"].strip() == row["foil"].strip(),
            }
        )
    return rows


def valse_features() -> datasets.Features:
    return row_features(
        (columns.IMAGE_ID, columns.CAPTION, columns.HARD_NEGATIVE, "subset", "upstream_id", "source_dataset"),
        {"mturk_caption": "int64", "valid": "bool", "caption_equals_foil": "bool"},
    )


def _flags(rows: Sequence[dict]) -> dict[str, int]:
    return {
        **count_flags(rows, ("valid", "caption_equals_foil")),
        "caption_equals_foil_and_valid": sum(row["caption_equals_foil"] and row["valid"] for row in rows),
    }


FLAG_COLUMNS = {
    "valid": "`valid`",
    "caption_equals_foil": "`caption_equals_foil`",
    "caption_equals_foil_and_valid": "of those, `valid`",
}


def _defects(report: BuildReport) -> str:
    return "\n".join(
        [
            "No row is dropped or changed; the evaluation keeps the rows with `valid` (`mturk.caption >= 2`), "
            "as VALSE's README asks. Measured in this build:",
            "",
            *flag_table(report, FLAG_COLUMNS, with_rows=True),
        ]
    )


def export_valse(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path,
    images_dir: str | Path,
    pieces: Sequence[str] | None = None,
    **settings: Any,
) -> BuildReport:
    """Build ``hardpos/valse`` into ``output_dir``: one config per piece, split ``test``, file order.

    ``upstream_dir`` is a clone of the VALSE repository (``data/<piece>.json``); ``images_dir`` one
    folder holding every image by file name; ``settings`` the fields of :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    pieces = selected("VALSE piece(s)", pieces, PIECES)
    sources = Sources(upstream_dir, options.cache_dir, repo=VALSE_REPO)
    report = BuildReport(dataset="valse")
    rows_by_piece = {
        piece: read_valse_piece(sources.upstream_file(upstream_file(piece)), piece) for piece in pieces
    }
    report.record_sources(sources)
    return export_with_image_files(
        output_dir,
        rows_by_piece,
        folder=ImageFolder(images_dir, sources),
        features=valse_features(),
        expected_counts={piece: VALSE_COUNTS[piece][0] for piece in pieces},
        flags=_flags,
        facts=card_facts(CARD_TEXT, repo=options.repo_id_for_card or "hardpos/valse", defects=_defects),
        report=report,
        images_note="Visual7W, COCO, SWiG and VisDial images by file name",
        split=SPLIT,
        options=options,
    )
