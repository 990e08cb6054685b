"""REPLACE benchmark builder: the Hard Positive paper's c, c_n and c_p, on VG images.

Reads each subset's two files of the hard_positives repository (`sources.original_file`: c and c_n, the
captions and hard negatives of the benchmark REPLACE was drawn from, credited on its card;
`sources.positive_file`: c_p), checks they align row by row, adds the replaced phrase and the quality
flags, and embeds each row's Visual Genome image as its original JPEG bytes. The rows are the paper's
rows exactly (10,575 attributes + 16,868 relations); defects are flagged, never dropped (only
``--skip-missing`` drops rows, those whose image is missing, and the card then says how many).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import datasets

from .. import columns
from .build_report import BuildReport, count_flags
from .checks import load_aligned_pair, selected
from .dataset_card import card_facts
from .hub_folder import BuildOptions, ConfigBuild, export_folder, row_features
from .image_sources import VisualGenomeImages, locate_images, vg_part_of
from .sources import Sources, original_file, positive_file

SPLIT = "test"
UPSTREAM_FIELDS = ("image_id", "true_caption", "false_caption", "image_path")
# Rows per subset in the paper (checked against the upstream files, docs/reference.md, The evaluation datasets).
PAPER_COUNTS = {"attributes": 10_575, "relations": 16_868}


# --- which phrase a hard positive replaced -----------------------------------------------------------
# Upstream gives c and c_p but not the substitution that turned one into the other; users filtering or
# grouping by substitution ("white -> ivory", "behind -> to the rear of") need it. The word-level diff
# recovers it without a hand-kept table.


def phrase_diff(caption: str, hard_positive: str) -> tuple[str, str]:
    """Return ``(replaced_phrase, replacement)``: the words of ``caption`` that differ from ``hard_positive``.

    Words are whitespace tokens; the common leading and trailing words are stripped and what is left on
    each side is joined by single spaces. A deletion ("on top of" -> "on") gives an empty replacement;
    identical captions give ``("", "")``.
    """
    source, target = caption.split(), hard_positive.split()
    prefix = 0
    while prefix < min(len(source), len(target)) and source[prefix] == target[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(source), len(target)) - prefix
        and source[len(source) - 1 - suffix] == target[len(target) - 1 - suffix]
    ):
        suffix += 1
    return (
        " ".join(source[prefix : len(source) - suffix]),
        " ".join(target[prefix : len(target) - suffix]),
    )


# --- quality flags for the known upstream defects (docs/reference.md, The evaluation datasets) -------------------------------------------
# The rows are kept exactly as the paper used them; the flags only let users filter:
# - substring artefacts: a few hard positives were made by plain substring replacement, so a word that
#   merely contains the replaced word was rewritten too ("white whiteboard" -> "ivory ivoryboard").
# - repeated rows: a row that repeats an earlier (image_id, c, c_n) triple.


def substitution_table(pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The set of (replaced phrase, replacement) pairs observed in a subset.

    The benchmark's own substitutions ("red" -> "crimson") are the ones whose careless substring
    application produced the artefacts, so the table the data itself exhibits is exactly what
    :func:`is_substring_artifact` needs; no external list has to be kept in sync.
    """
    return {(source, target) for source, target in pairs if source}


def _has_partial_word_occurrence(text: str, phrase: str) -> bool:
    """True if ``phrase`` occurs in ``text`` at least once *not* delimited by word boundaries."""
    whole = {m.start() for m in re.finditer(rf"(?<!\w){re.escape(phrase)}(?!\w)", text)}
    return any(m.start() not in whole for m in re.finditer(re.escape(phrase), text))


def is_substring_artifact(caption: str, hard_positive: str, table: Iterable[tuple[str, str]]) -> bool:
    """True if ``hard_positive`` is ``caption`` with a table substitution applied inside a longer word.

    The test reproduces the upstream mistake: some ``(source, target)`` of the table, applied with
    ``str.replace`` to the whole caption, gives exactly ``hard_positive`` while at least one occurrence
    of ``source`` sat inside another word. Whole-word substitutions, even repeated ones
    ("in building in" -> "within building within"), are not flagged: they keep the meaning.
    """
    for source, target in table:
        if source in caption and caption.replace(source, target) == hard_positive:
            if _has_partial_word_occurrence(caption, source):
                return True
    return False


def first_occurrences(keys: Sequence[tuple]) -> list[int | None]:
    """For each key, the index of its first earlier occurrence, or ``None`` if it is the first."""
    first: dict[tuple, int] = {}
    duplicate_of: list[int | None] = []
    for index, key in enumerate(keys):
        if key in first:
            duplicate_of.append(first[key])
        else:
            first[key] = index
            duplicate_of.append(None)
    return duplicate_of


# --- the builder ---------------------------------------------------------------------------------------


def replace_features() -> datasets.Features:
    """Row schema (the image column is added when images are embedded): the shared eval columns,
    then provenance and the quality flags."""
    return row_features(
        (
            columns.IMAGE_ID,
            "image_path",
            *columns.EVAL_CAPTION_COLUMNS,
            "subset",
            "replaced_phrase",
            "replacement",
        ),
        {
            "substring_artifact": "bool",
            "is_duplicate": "bool",
            "duplicate_of": "int64",
            "upstream_index": "int64",
        },
    )


def read_replace_subset(sources: Sources, subset: str) -> list[dict]:
    """The annotated rows of one subset (no images), in upstream order, validated for alignment."""
    original_path = sources.upstream_file(original_file(subset))
    positive_path = sources.upstream_file(positive_file(subset))
    original, positive = load_aligned_pair(original_path, positive_path, UPSTREAM_FIELDS, UPSTREAM_FIELDS)
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


def _defects_text(rows_by_subset: dict[str, list[dict]]) -> str:
    lines = [
        "Kept as upstream has them (the paper's rows), flagged so they can be filtered:",
        "",
        "| subset | `substring_artifact` rows | `is_duplicate` rows |",
        "|---|---:|---:|",
    ]
    examples = []
    for subset, rows in rows_by_subset.items():
        artifacts = [row for row in rows if row["substring_artifact"]]
        duplicates = sum(row["is_duplicate"] for row in rows)
        lines.append(f"| {subset} | {len(artifacts):,} | {duplicates:,} |")
        seen = set()
        for row in artifacts:
            pair = (row[columns.CAPTION], row[columns.HARD_POSITIVE])
            if pair not in seen:
                seen.add(pair)
                examples.append(f'- {subset}: "{pair[0]}" -> "{pair[1]}"')
    if examples:
        lines += ["", "Distinct substring artefacts found in this build:", "", *examples]
    lines += [
        "",
        "A substring artefact is detected when applying one of the subset's own substitutions "
        "(e.g. red -> crimson) with plain string replacement reproduces c_p while touching the inside "
        'of a longer word ("covered" -> "covecrimson"). Duplicates repeat an earlier '
        "(image_id, c, c_n) triple; `duplicate_of` points at the first occurrence.",
    ]
    return "\n".join(lines)


def export_replace(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
    subsets: Sequence[str] | None = None,
    embed_images: bool = True,
    union_config_name: str | None = None,
    **settings: Any,
) -> BuildReport:
    """Build REPLACE into ``output_dir`` as a Hub repository folder and return the build report.

    One config per subset (default: both). ``union_config_name`` (e.g. ``"all"``) adds a config
    reading both subsets' shards (not stored twice); it is off by default because ``hardpos eval``
    scores every declared config and already reports the pooled figure, the paper's REPLACE column
    (``hf_hardpos.evaluation.aggregation``), from the two subsets: a union config would score every
    row a second time.
    ``embed_images=False`` builds the rows without the image column (for checking the annotations
    without the Visual Genome images). ``settings``: the fields of :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    subsets = selected("REPLACE subset(s)", subsets, columns.REPLACE_SUBSETS)
    sources = Sources(upstream_dir, options.cache_dir)
    report = BuildReport(dataset="replace")
    rows_by_subset = {subset: read_replace_subset(sources, subset) for subset in subsets}
    report.record_sources(sources)

    images = None
    if embed_images:
        vg_images = VisualGenomeImages(images_dir, sources)
        images = locate_images(
            vg_images,
            (row for rows in rows_by_subset.values() for row in rows),
            options,
            origin=lambda row: f"{original_file(row['subset'])}: row {row['upstream_index']} field image_id",
            hint=lambda row: vg_part_of(row["image_path"]),
        )
        report.sources["images"] = vg_images.description

    configs = [
        ConfigBuild(
            subset,
            rows,
            replace_features(),
            PAPER_COUNTS[subset],
            count_flags(rows, ("substring_artifact", "is_duplicate")),
            images,
        )
        for subset, rows in rows_by_subset.items()
    ]
    facts = card_facts(
        "replace", repo=options.repo_id_for_card or "hardpos/replace", defects=_defects_text(rows_by_subset)
    )
    return export_folder(
        output_dir, configs, facts, report, split=SPLIT, options=options, union_config_name=union_config_name
    )
