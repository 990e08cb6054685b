"""COCO fine-tuning set builder: every COCO train2017 caption with its hard positives and negatives.

Inputs: COCO's ``captions_train2017.json`` (caption order = its ``annotations`` list; 591,753 captions,
the paper's count, docs/reference.md "COCO fine-tuning set") and the Hard Positive paper's
``hard_positives_ft/{replace,swap}_hp.jsonl`` (one JSON string per caption, same order; ``"None"`` where a
caption has no swap). Every line of those files is one caption: a blank line is a missing hard positive
(null), never skipped, so a stray line cannot shift the later lines onto other captions. Hard negatives
are generated per caption by functions passed in (default: the package's CREPE/SugarCrepe-style rules),
so other negative generators can be used without touching the builder. Images are referenced by COCO id
and file name; embedding the images is optional (``coco_images_dir``), and :func:`attach_coco_images`
joins a local COCO folder afterwards.

``coco_split="train2014"`` builds from ``captions_train2014.json`` instead (CE-CLIP fine-tunes on it, so
the ce-clip recipe names it). The paper's hard positives belong to train2017's captions, so a train2014
build has null hard positives.

With ``mlm_negatives`` (``hardpos build finetune --mlm-negatives FILE.jsonl``) a second config,
``ce_clip``, holds the same rows plus CE-CLIP's four typed hard negatives (relation / attribute /
action / object, :data:`hf_hardpos.columns.CE_CLIP_NEGATIVE_COLUMNS`), read from the output of
``hardpos generate --negative --method mlm --kind all`` run over the captions in annotation order.
That output is joined by caption index, so before anything is built its manifest (input sha256 and
row count) and every record's caption are checked against the captions file: a file made
from another caption list would otherwise pair every caption with another caption's negatives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import datasets

from .. import columns
from ..generation.swap_rule import PAPER_SWAP_ELIGIBLE
from .build_report import BuildReport
from .checks import DataValidationError, MissingSourceError
from .coco_captions import (
    DEFAULT_COCO_SPLIT,
    CocoSplit,
    coco_captions_file,
    get_coco_split,
    read_coco_captions,
)
from .coco_finetune_card import (
    SWAP_ELIGIBLE,
    ce_clip_quality_counts,
    finetune_card_facts,
    quality_counts,
)
from .coco_finetune_rows import (
    CE_CLIP_CONFIG,
    CONFIG,
    NEGATIVE_TYPES,
    HardNegativeFn,
    caption_rows,
    ce_clip_features,
    ce_clip_rows,
    default_negative_generators,
    finetune_features,
)
from .coco_hard_positives import (
    HardPositiveSource,
    check_line_count,
    load_hard_positives,
)
from .coco_typed_negatives import TypedNegatives, read_mlm_negatives
from .hub_folder import BuildOptions, ConfigBuild, export_folder
from .image_sources import ImageFolder, ImageSpec, UnsafePathError, path_under, resolve_images
from .sources import Sources

SPLIT = "train"
HP_FILES = {"replace": "hard_positives_ft/replace_hp.jsonl", "swap": "hard_positives_ft/swap_hp.jsonl"}
PAPER_SWAP_HARD_POSITIVES = PAPER_SWAP_ELIGIBLE  # captions with "and" and fewer than 15 words (swap_rule)


def attach_coco_images(dataset: datasets.Dataset, coco_images_dir: str | Path) -> datasets.Dataset:
    """Join a local COCO image folder (``train2017/``, or ``train2014/`` for a train2014 build): add an
    ``image`` column read lazily from ``file_name``.

    The images are decoded on access, not copied, so this is the cheap way to train from the set
    without embedding the 18 GB of train2017 images into it.
    """
    folder = Path(coco_images_dir)
    if dataset.num_rows and not (folder / dataset[0]["file_name"]).is_file():
        raise MissingSourceError(
            f"{folder / dataset[0]['file_name']} not found: is {folder} the COCO image folder of the set's split "
            "(train2017/, or train2014/ for a train2014 build)?"
        )

    def joined(row: dict, index: int) -> dict:
        try:  # a file name is data: it may not lead outside the image folder
            return {columns.IMAGE: str(path_under(folder, row["file_name"]))}
        except UnsafePathError as error:
            raise UnsafePathError(f"row {index} field file_name: {error}") from None

    with_paths = dataset.map(joined, with_indices=True, desc="Joining COCO images")
    return with_paths.cast_column(columns.IMAGE, datasets.Image())


def _count_swap_hard_positives(papers_files: bool, report: BuildReport) -> None:
    """Counts of the swap column; with the paper's released files, checked against the paper's 119,071."""
    report.counts["swap hard positives"] = report.flags[CONFIG][f"{columns.HARD_POSITIVE_SWAP} present"]
    report.counts[SWAP_ELIGIBLE] = report.flags[CONFIG][SWAP_ELIGIBLE]
    if papers_files:
        report.expected_counts["swap hard positives"] = PAPER_SWAP_HARD_POSITIVES
        report.expected_counts[SWAP_ELIGIBLE] = PAPER_SWAP_HARD_POSITIVES


def _hard_positive_sources(
    split: CocoSplit,
    sources: Sources,
    hard_positives: Sequence[str | Path] | None,
    annotations: Sequence[dict],
    captions_path: Path,
) -> dict[str, HardPositiveSource]:
    """Column -> source of the hard positives: the given files (checked against the captions now), else
    upstream's released files for a split they belong to (line counts checked now), else none."""
    if hard_positives:
        captions = [
            annotation["caption"].strip() for annotation in annotations
        ]  # as caption_rows writes them
        found = load_hard_positives(hard_positives, captions, captions_path)
        for column, source in found.items():
            name = f"{source.path.name} ({column})"
            sources.record(name, source.path, f"{source.describe()}, read from {source.path}")
            sources.local_variants.append(
                name
            )  # the rows are the user's: the paper's counts do not bind them
        return found
    if not split.hard_positives:
        return {}
    found = {}
    for column, relative in zip(columns.FINETUNE_POSITIVE_COLUMNS, HP_FILES.values()):
        path = sources.upstream_file(relative)
        check_line_count(path, captions_path, len(annotations))
        found[column] = HardPositiveSource(column, path)
    return found


def export_finetune(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path | None = None,
    coco_annotations: str | Path | None = None,
    coco_images_dir: str | Path | None = None,
    negative_generators: Mapping[str, HardNegativeFn] | None = None,
    seed: int = 0,
    mlm_negatives: Sequence[str | Path] | None = None,
    coco_split: str = DEFAULT_COCO_SPLIT,
    hard_positives: Sequence[str | Path] | None = None,
    **settings: Any,
) -> BuildReport:
    """Build the COCO HP+HN fine-tuning set into ``output_dir`` (config ``default``, split ``train``).

    ``coco_split``: ``"train2017"`` (the paper's 591,753 captions; the hard-positive files' lines follow
    ``captions_train2017.json``) or ``"train2014"`` (CE-CLIP's captions; no hard positives: the columns
    are null and the upstream files are not read).

    ``mlm_negatives``: outputs of ``hardpos generate --negative --method mlm`` (one ``--kind all`` file,
    or single-type files covering the four types) over these captions in annotation order; with them a
    second config, ``ce_clip``, holds the default config's columns plus CE-CLIP's four typed negatives
    (:data:`~hf_hardpos.columns.CE_CLIP_NEGATIVE_COLUMNS`). Embedded images are then stored in both configs.

    ``hard_positives``: your own hard-positive files instead of upstream's (`coco_hard_positives`):
    ``hardpos generate`` outputs over these captions in annotation order (one per column: a replace kind,
    swap) or files in upstream's ``{replace,swap}_hp.jsonl`` format; a column no file supplies is null,
    and upstream's files are not read.

    Every input is checked before the build (one hard-positive line per caption, each line valid,
    every typed-negative record generated from these captions, images present), so a bad file fails
    in seconds, not after generating 591k negatives. ``settings``: the fields of :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    repo_id = options.repo_id_for_card or "hardpos/coco"
    negative_generators = dict(negative_generators or default_negative_generators(seed))
    options = BuildOptions(**settings)
    negative_generators = dict(negative_generators or default_negative_generators(seed))
    missing_types = [name for name in NEGATIVE_TYPES if name not in negative_generators]
    if missing_types:
        raise DataValidationError(
            f"negative_generators lacks {missing_types}; expected keys {NEGATIVE_TYPES}"
        )
    sources = Sources(upstream_dir, options.cache_dir)
    report = BuildReport(dataset="finetune")
    split = get_coco_split(coco_split)
    captions_path = coco_captions_file(sources, coco_annotations, split.name)
    annotations, file_names = read_coco_captions(captions_path)
    positives = _hard_positive_sources(split, sources, hard_positives, annotations, captions_path)
    typed = _typed_negatives(mlm_negatives, annotations, captions_path, sources) if mlm_negatives else None
    report.record_sources(sources)
    used_images = {file_names[int(annotation["image_id"])] for annotation in annotations}
    images = None
    if coco_images_dir is not None:
        images = _embedded_images(coco_images_dir, sources, options, captions_path, file_names, used_images)
        report.sources["images"] = f"embedded from a local {split.name} folder"
    else:
        report.sources["images"] = "not embedded (join by file_name)"
    # Both configs hold every caption, with the same images.
    shared = dict(
        expected_count=split.captions,
        images=images,
        num_upstream_rows=len(annotations),
        image_keys=used_images,
    )
    caption_inputs = (captions_path, positives, negative_generators)
    configs = [
        ConfigBuild(
            CONFIG,
            rows=partial(caption_rows, *caption_inputs),
            features=finetune_features(),
            flags=quality_counts,
            **shared,
        )
    ]
    if typed is not None:
        configs.append(
            ConfigBuild(
                CE_CLIP_CONFIG,
                rows=partial(ce_clip_rows, *caption_inputs, typed.values),
                features=ce_clip_features(),
                flags=ce_clip_quality_counts,
                **shared,
            )
        )
    repo_id = options.repo_id_for_card or "hardpos/coco"
    facts = finetune_card_facts(
        split, positives, typed, own_hard_positives=bool(hard_positives), repo_id=repo_id
    )
    del annotations, file_names
    on_built = partial(_count_swap_hard_positives, split.hard_positives and not hard_positives)
    return export_folder(output_dir, configs, facts, report, split=SPLIT, options=options, on_built=on_built)


def _typed_negatives(
    paths: Sequence[str | Path], annotations: Sequence[dict], captions_path: Path, sources: Sources
) -> TypedNegatives:
    """The typed negatives of ``paths``, checked against the captions, each file recorded as a source."""
    captions = [annotation["caption"].strip() for annotation in annotations]  # as caption_rows writes them
    typed = read_mlm_negatives(paths, captions, captions_path)
    del captions
    for source in {source.path: source for source in typed.sources.values()}.values():
        sources.record(
            f"{source.path.name} ({CE_CLIP_CONFIG} typed negatives: {', '.join(source.types)})",
            source.path,
            f"`hardpos generate --negative --method mlm --kind {source.options.get('kind')}` output "
            f"({source.describe()}), read from {source.path}",
        )
    return typed


def _embedded_images(
    coco_images_dir: str | Path,
    sources: Sources,
    options: BuildOptions,
    captions_path: Path,
    file_names: Mapping[int, str],
    used_images: set[str],
) -> ImageSpec:
    """The COCO images the captions use, found in a local image folder (a missing one refused by name
    unless ``skip_missing``), to embed by ``file_name``."""
    folder = ImageFolder(coco_images_dir, sources, option="--coco-images-dir")
    wanted = dict.fromkeys(sorted(used_images))
    origins = {
        name: f"{captions_path}: image {image_id} field file_name" for image_id, name in file_names.items()
    }
    found, missing = resolve_images(
        folder, wanted, skip_missing=options.skip_missing, progress=options.progress, origins=origins
    )
    return ImageSpec(found, missing, key="file_name")
