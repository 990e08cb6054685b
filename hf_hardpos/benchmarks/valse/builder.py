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
from ...data.build_report import BuildReport, count_flags
from ...data.checks import DataValidationError, load_json, selected
from ...data.dataset_card import card_facts, flag_table
from ...data.hub_folder import BuildOptions, export_with_image_files, row_features
from ...data.image_sources import ImageFolder
from ...data.sources import GitHubRepo, Sources

CARD_TEXT = Path(__file__).with_name("card.yaml")  # the card's prose, kept as data beside the builder

SPLIT = "test"
VALSE_REPO = GitHubRepo("Heidelberg-NLP/VALSE", "2152d90")
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


def upstream_file(piece: str) -> str:
    return f"data/{piece}.json"


def _votes(row: dict, path: Path, key: str) -> int | None:
    mturk = row.get("mturk")
    if mturk is None:
        return None
    if not isinstance(mturk, dict) or not isinstance(mturk.get("caption"), int) or isinstance(mturk.get("caption"), bool):
        raise DataValidationError(f"{path}: row {key!r}, field mturk.caption: expected an integer vote count, got {mturk!r}")
    return mturk["caption"]


def read_valse_piece(path: Path, piece: str) -> list[dict]:
    """The rows of one VALSE file, in file order, with the annotators' vote and the two flags."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise DataValidationError(f"{path}: expected a JSON object keyed by row id, got {type(data).__name__}")
    rows = []
    for key, row in data.items():
        if not isinstance(row, dict):
            raise DataValidationError(f"{path}: row {key!r} is a {type(row).__name__}, expected an object")
        for field in ("image_file", "caption", "foil"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                raise DataValidationError(f"{path}: row {key!r}, field {field!r}: expected a non-empty string")
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
    return "\n".join([
        "No row is dropped or changed; the evaluation keeps the rows with `valid` (`mturk.caption >= 2`), "
        "as VALSE's README asks. Measured in this build:",
        "",
        *flag_table(report, FLAG_COLUMNS, with_rows=True),
    ])


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
    rows_by_piece = {piece: read_valse_piece(sources.upstream_file(upstream_file(piece)), piece) for piece in pieces}
    report.sources.update(sources.provenance)
    return export_with_image_files(
        output_dir, rows_by_piece, folder=ImageFolder(images_dir, sources), features=valse_features(),
        expected_counts={piece: VALSE_COUNTS[piece][0] for piece in pieces}, flags=_flags,
        facts=card_facts(CARD_TEXT, repo=options.repo_id_for_card or "hardpos/valse", defects=_defects), report=report,
        images_note="Visual7W, COCO, SWiG and VisDial images by file name", split=SPLIT, options=options,
    )
