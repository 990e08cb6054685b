"""VL-CheckList builder (Zhao et al., 2022): one config per upstream annotation file, every row, flagged.

VL-CheckList probes objects (location, size), attributes (action, color, material, size, state) and
relations (action, spatial) with a positive and a negative caption per image. CE-CLIP (Zhang et al.,
CVPR 2024, Table 2) reports it for CLIP-style models.

Upstream (github.com/om-ai-lab/VL-CheckList, checked at commit 6f8d6a3; the data has not changed since
e42e1d6): ``corpus/v1/<Aspect>/<type>/[<sub>/]<source>.yaml`` names each file's annotations
(``ANNO_PATH``, relative to the repository), its image folder (``IMG_ROOT``) and its layout (``TYPE``,
always ``TUPLE_JSON``). The annotation file is a JSON list of ``[image_path, {"POS": [...], "NEG":
[...]}]``; the official image-text metric compares ``POS[0]`` with ``NEG[0]`` only, so those are the
``caption`` and ``hard_negative`` here (the other entries are kept in ``positives``/``negatives``).

Defects found in the upstream files, kept and flagged per row so a user can exclude them: rows that
repeat an earlier row of the same file exactly (``duplicate``), ``POS[0] == NEG[0]``
(``positive_equals_negative``) and negatives that lost their subject (``" frying pan"`` for "bicycle ON
sidewalk": ``negative_broken``, a negative with leading or trailing whitespace). The licence is not
an open one: the repository has no licence file and its ``setup.py`` says "free for non-commercial use".

Images come from Visual Genome (also for VAW), HAKE (HICO-DET, HCVRD, V-COCO, OpenImages, PIC) and
SWiG, laid out under ``--images-dir`` as the yaml files' ``IMG_ROOT`` folders say. The official code
drops rows whose image is missing without a word; this builder stops with the count and the first paths
unless ``--skip-missing`` is given (then the card and ``build_report.json`` list them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import yaml

from ... import columns
from ...data.build_report import BuildReport, count_flags
from ...data.checks import DataValidationError, load_json, selected
from ...data.dataset_card import card_facts, flag_table
from ...data.hub_folder import BuildOptions, export_with_image_files, row_features
from ...data.image_sources import ImageFolder
from ...data.sources import GitHubRepo, Sources

CARD_TEXT = Path(__file__).with_name("card.yaml")  # the card's prose, kept as data beside the builder

SPLIT = "test"
VL_CHECKLIST_REPO = GitHubRepo("om-ai-lab/VL-CheckList", "6f8d6a3")
CORPUS = "corpus/v1"


def config_name(yaml_path: Path, corpus_dir: Path) -> str:
    """``corpus/v1/Object/Location/center/vg_obj.yaml`` -> ``object_location_center_vg_obj``."""
    return "_".join(part.lower() for part in yaml_path.relative_to(corpus_dir).with_suffix("").parts)


def aspect_and_type(name: str) -> tuple[str, str]:
    """The (aspect, type) a config belongs to: ``object_location_center_vg_obj`` -> (object, location)."""
    aspect, kind = name.split("_")[:2]
    return aspect, kind


def discover_files(upstream_dir: Path) -> dict[str, Path]:
    """Config name -> its yaml file, for every yaml under ``corpus/v1`` (sorted, so the order is stable)."""
    corpus_dir = upstream_dir / CORPUS
    if not corpus_dir.is_dir():
        raise DataValidationError(
            f"{corpus_dir} not found: --upstream-dir must be a clone of github.com/{VL_CHECKLIST_REPO.name}"
        )
    found = {config_name(path, corpus_dir): path for path in sorted(corpus_dir.rglob("*.yaml"))}
    if not found:
        raise DataValidationError(f"{corpus_dir}: no .yaml files")
    return found


def read_yaml_entry(path: Path) -> tuple[str, str]:
    """(ANNO_PATH, IMG_ROOT) of one corpus file, refusing any other layout."""
    try:
        entry = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise DataValidationError(f"{path}: not valid YAML ({error})") from None
    if not isinstance(entry, dict):
        raise DataValidationError(f"{path}: expected a mapping with ANNO_PATH, IMG_ROOT and TYPE")
    for field in ("ANNO_PATH", "IMG_ROOT", "TYPE"):
        if not isinstance(entry.get(field), str):
            raise DataValidationError(f"{path}: field {field} missing or not a string")
    if entry["TYPE"] != "TUPLE_JSON":
        raise DataValidationError(f"{path}: TYPE {entry['TYPE']!r} is not supported (only TUPLE_JSON)")
    return entry["ANNO_PATH"], entry["IMG_ROOT"]


def read_annotation_file(path: Path, name: str, image_root: str) -> list[dict]:
    """The rows of one annotation file, in file order, with the three defect flags."""
    data = load_json(path)
    if not isinstance(data, list):
        raise DataValidationError(
            f"{path}: expected a JSON list of [image_path, {{POS, NEG}}], got {type(data).__name__}"
        )
    aspect, kind = aspect_and_type(name)
    rows, seen = [], set()
    for index, item in enumerate(data):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], dict)
        ):
            raise DataValidationError(
                f'{path}: row {index}: expected [image_path, {{"POS": [...], "NEG": [...]}}]'
            )
        image, texts = item
        for field in ("POS", "NEG"):
            value = texts.get(field)
            if not (isinstance(value, list) and value and all(isinstance(t, str) for t in value)):
                raise DataValidationError(
                    f"{path}: row {index}, field {field}: expected a non-empty list of strings"
                )
        positive, negative = texts["POS"][0], texts["NEG"][0]
        signature = (image, tuple(texts["POS"]), tuple(texts["NEG"]))
        rows.append(
            {
                columns.IMAGE_ID: f"{image_root.rstrip('/')}/{image}" if image_root.strip("/") else image,
                columns.CAPTION: positive,
                columns.HARD_NEGATIVE: negative,
                "positives": list(texts["POS"]),
                "negatives": list(texts["NEG"]),
                "subset": name,
                "aspect": aspect,
                "type": kind,
                "upstream_index": index,
                "duplicate": signature in seen,
                "positive_equals_negative": positive.strip() == negative.strip(),
                "negative_broken": negative != negative.strip(),
            }
        )
        seen.add(signature)
    return rows


FLAG_NAMES = ("duplicate", "positive_equals_negative", "negative_broken")


def vl_checklist_features() -> datasets.Features:
    texts = datasets.List(datasets.Value("string"))
    return row_features(
        (columns.IMAGE_ID, columns.CAPTION, columns.HARD_NEGATIVE),
        {"positives": texts, "negatives": texts},
        ("subset", "aspect", "type"),
        {"upstream_index": "int64", **dict.fromkeys(FLAG_NAMES, "bool")},
    )


def _flags(rows: Sequence[dict]) -> dict[str, int]:
    return count_flags(rows, FLAG_NAMES)


def _defects(report: BuildReport) -> str:
    table = flag_table(report, {flag: f"`{flag}`" for flag in FLAG_NAMES}, with_rows=True)
    return "\n".join(["No row is dropped or changed. Measured in this build:", "", *table])


def export_vl_checklist(
    output_dir: str | Path,
    *,
    upstream_dir: str | Path,
    images_dir: str | Path,
    files: Sequence[str] | None = None,
    **settings: Any,
) -> BuildReport:
    """Build ``hardpos/vl_checklist`` into ``output_dir``: one config per corpus file, split ``test``.

    ``upstream_dir`` is a clone of the VL-CheckList repository (``corpus/v1`` and the ``data/`` files
    its yaml files name); ``images_dir`` holds the images under the yaml files' ``IMG_ROOT`` folders.
    ``files`` picks configs by name (default: every corpus file whose annotations are present);
    ``settings`` are the fields of :class:`BuildOptions`.
    """
    options = BuildOptions(**settings)
    upstream_dir = Path(upstream_dir)
    available = discover_files(upstream_dir)
    names = selected("VL-CheckList file(s)", files, list(available))
    sources = Sources(upstream_dir, options.cache_dir, repo=VL_CHECKLIST_REPO)
    report = BuildReport(dataset="vl_checklist")
    rows_by_file = {}
    for name in names:
        annotation_path, image_root = read_yaml_entry(available[name])
        rows_by_file[name] = read_annotation_file(sources.upstream_file(annotation_path), name, image_root)
    report.sources.update(sources.provenance)
    return export_with_image_files(
        output_dir,
        rows_by_file,
        folder=ImageFolder(images_dir, sources),
        features=vl_checklist_features(),
        expected_counts={},
        flags=_flags,
        facts=card_facts(
            CARD_TEXT, repo=options.repo_id_for_card or "hardpos/vl_checklist", defects=_defects
        ),
        report=report,
        images_note="Visual Genome, HAKE and SWiG under each file's IMG_ROOT",
        split=SPLIT,
        options=options,
    )
