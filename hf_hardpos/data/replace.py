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
from .sources import VG_PART_URLS, Sources, VisualGenomeImages, vg_part_of
from .validation import PAPER_COUNTS, BuildReport, load_aligned_pair

REPLACE_SUBSETS = ("attributes", "relations")
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


COLUMN_MEANINGS = {
    columns.IMAGE: "the whole Visual Genome image, original JPEG bytes (not re-encoded)",
    columns.IMAGE_ID: "Visual Genome image id",
    "image_path": "path of the image inside Visual Genome (`VG_100K/` or `VG_100K_2/`)",
    columns.CAPTION: "c: the true caption (VL-CheckList)",
    columns.HARD_NEGATIVE: "c_n: hard negative, a replacement that changes the meaning",
    columns.HARD_POSITIVE: "c_p: hard positive, a replacement that keeps the meaning",
    "subset": "`attributes` or `relations`",
    "replaced_phrase": "the words of c that c_p changed (word-level diff)",
    "replacement": "the words c_p has instead (empty for a deletion)",
    "substring_artifact": "c_p was made by substring replacement inside a longer word (defect)",
    "is_duplicate": "this (image_id, c, c_n) triple already occurred earlier in the subset",
    "duplicate_of": "`upstream_index` of that earlier row, null if none",
    "upstream_index": "row index in the upstream JSON files",
}

USAGE = """from datasets import load_dataset

relations = load_dataset("{repo}", "relations", split="test")
row = relations[0]  # row["image"] is a PIL image; caption / hard_negative / hard_positive are c, c_n, c_p
# The paper's rows are all kept; to drop the upstream defects:
clean = relations.filter(lambda r: not r["substring_artifact"] and not r["is_duplicate"])
# The paper's REPLACE figure is the unweighted mean of the attributes and relations results."""

LICENSE_TEXT = (
    "Images: Visual Genome (CC BY 4.0). Captions and hard negatives: VL-CheckList via the hard_positives "
    "repository; hard positives: Kamath et al. 2024 (github.com/amitakamath/hard_positives). Check the "
    "upstream repositories for their terms before redistribution; this card's `cc-by-4.0` tag refers to "
    "the images."
)

VL_CHECKLIST_CITATION = """@article{zhao2022vlchecklist,
  title   = {VL-CheckList: Evaluating Pre-trained Vision-Language Models with Objects, Attributes and Relations},
  author  = {Zhao, Tiancheng and Zhang, Tianqi and Zhu, Mingwei and Shen, Haozhan and Lee, Kyusong
             and Lu, Xiaopeng and Yin, Jianwei},
  journal = {arXiv preprint arXiv:2207.00221},
  year    = {2022}
}"""


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
        "of a longer word (\"covered\" -> \"covecrimson\"). Duplicates repeat an earlier "
        "(image_id, c, c_n) triple; `duplicate_of` points at the first occurrence.",
    ]
    return "\n".join(lines)


def export_replace(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
    subsets: Sequence[str] = REPLACE_SUBSETS,
    skip_missing: bool = False,
    embed_images: bool = True,
    cache_dir: str | Path | None = None,
    max_shard_size: int | str = "500MB",
    union_config_name: str | None = None,
    repo_id_for_card: str = "hardpos/replace",
    verify: bool = True,
    progress: bool = True,
) -> BuildReport:
    """Build REPLACE into ``output_dir`` as a Hub repository folder and return the build report.

    One config per subset. ``union_config_name`` (e.g. ``"all"``) adds a config reading both subsets'
    shards (not stored twice); it is off by default because ``hardpos eval`` scores every declared
    config, and a pooled figure is not the paper's REPLACE number (the unweighted mean of the subsets).
    ``embed_images=False`` builds the rows without the image column (for checking the annotations
    without the Visual Genome images).
    """
    import tempfile

    from .card import HARD_POSITIVE_CITATION, CardFacts, render_card
    from .hub_export import union_config, verify_export, write_config_shards

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    sources = Sources(upstream_dir, cache_dir)
    report = BuildReport(dataset="replace")
    rows_by_subset = {subset: read_replace_subset(sources, subset) for subset in subsets}
    report.sources.update(sources.provenance)

    images = None
    if embed_images:
        vg_images = VisualGenomeImages(images_dir, sources)
        all_rows = [row for rows in rows_by_subset.values() for row in rows]
        images, missing = locate_images(all_rows, vg_images, skip_missing=skip_missing)
        report.sources["images"] = (
            "local Visual Genome folder (`VG_100K/`, `VG_100K_2/`)"
            if images_dir
            else ", ".join(f"{part}: {url}" for part, url in VG_PART_URLS.items())
        )
        if missing:
            missing_set = set(missing)
            for subset, rows in rows_by_subset.items():
                ids = sorted({row[columns.IMAGE_ID] for row in rows} & missing_set)
                if ids:
                    report.skipped_missing_images[subset] = ids
                    report.skipped_rows[subset] = sum(row[columns.IMAGE_ID] in missing_set for row in rows)

    exported = []
    with tempfile.TemporaryDirectory(prefix="hardpos-build-", dir=cache_dir) as work_dir:
        for subset in subsets:
            dataset = build_replace_subset(rows_by_subset[subset], images, work_dir=Path(work_dir) / subset)
            exported.append(
                write_config_shards(dataset, output_dir, subset, split=SPLIT, max_shard_size=max_shard_size)
            )
            report.counts[subset] = len(dataset)
            report.expected_counts[subset] = expected_count(subset)
            report.flags[subset] = {
                "substring_artifact": sum(row["substring_artifact"] for row in rows_by_subset[subset]),
                "is_duplicate": sum(row["is_duplicate"] for row in rows_by_subset[subset]),
            }
            del dataset
    if union_config_name and len(exported) > 1:
        exported.append(union_config(union_config_name, exported))
        report.expected_counts[union_config_name] = sum(expected_count(subset) for subset in subsets)
        report.counts[union_config_name] = exported[-1].num_rows

    facts = CardFacts(
        title="REPLACE: hard negatives and hard positives by word replacement",
        pretty_name="REPLACE (Hard Positive benchmark)",
        summary=(
            "The REPLACE benchmark of *The Hard Positive Truth about Vision-Language Compositionality* "
            "(Kamath et al., ECCV 2024): each Visual Genome image comes with its caption c, a hard "
            "negative c_n (VL-CheckList replacement that changes the meaning) and a hard positive c_p "
            "(a synonym replacement that keeps it). A model is correct when s(c|i) > s(c_n|i) (original "
            "accuracy) and also s(c_p|i) > s(c_n|i) (augmented accuracy); it is brittle when c_n falls "
            "between c and c_p. The paper reports the subsets separately and their unweighted mean."
        ),
        builder="hf_hardpos.data.replace.export_replace",
        usage=USAGE.format(repo=repo_id_for_card),
        column_meanings=COLUMN_MEANINGS,
        defects=_defects_text(rows_by_subset),
        license_id="cc-by-4.0",
        license_text=LICENSE_TEXT,
        citation=HARD_POSITIVE_CITATION + "\n\n" + VL_CHECKLIST_CITATION,
        expected_counts=report.expected_counts,
        tags=["compositionality", "hard-positives", "hard-negatives", "clip", "visual-genome"],
        task_categories=["zero-shot-image-classification"],
    )
    render_card(output_dir, exported, facts, report)
    report.save(output_dir / "build_report.json")
    if verify:
        for config in exported:
            verify_export(output_dir, config)
    for line in report.count_lines():
        print(line)
    return report

