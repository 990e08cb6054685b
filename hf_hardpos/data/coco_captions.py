"""COCO's caption splits as the fine-tuning set reads them: where each split's captions file comes
from (a local file or folder, or COCO's annotations archive of that year), what it must hold, and its
annotations in file order, the order every row, hard-positive line and typed negative of
:mod:`.coco_finetune` follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UserInputError
from .checks import DataValidationError, MissingSourceError, load_json
from .sources import COCO_ANNOTATIONS_URL, COCO_CAPTIONS_FILE, Sources

PAPER_CAPTIONS = (
    591_753  # COCO train2017 captions, the paper's count (docs/reference.md, COCO fine-tuning set)
)


@dataclass(frozen=True)
class CocoSplit:
    """One COCO caption split the builder reads: where its captions file comes from and what it holds."""

    name: str
    annotations_url: str
    captions_file: str  # path inside the annotations archive
    captions: int | None  # the caption count the paper trained on (None: no published count binds it)
    hard_positives: bool  # whether the paper's hard_positives_ft files are aligned with its captions


COCO_SPLITS = {
    "train2017": CocoSplit(
        "train2017",
        "http://images.cocodataset.org/annotations/annotations_trainval2017.zip",
        "annotations/captions_train2017.json",
        PAPER_CAPTIONS,
        True,
    ),
    "train2014": CocoSplit("train2014", COCO_ANNOTATIONS_URL, COCO_CAPTIONS_FILE, None, False),
}
DEFAULT_COCO_SPLIT = "train2017"


def get_coco_split(name: str) -> CocoSplit:
    """The :class:`CocoSplit` called ``name``; a clear error for any other name."""
    if name not in COCO_SPLITS:
        raise UserInputError(f"unknown COCO split {name!r}; choose one of {sorted(COCO_SPLITS)}")
    return COCO_SPLITS[name]


def coco_captions_file(
    sources: Sources, coco_annotations: str | Path | None, split: str = DEFAULT_COCO_SPLIT
) -> Path:
    """The split's captions file (``captions_train2017.json`` by default) from a file, a folder holding it
    (or ``annotations/`` with it), or COCO's annotations archive of that year (downloaded once)."""
    spec = get_coco_split(split)
    name = Path(spec.captions_file).name
    if coco_annotations is None:
        path = sources.download_and_extract(spec.annotations_url) / spec.captions_file
        return sources.record(name, path, f"{spec.annotations_url} ({spec.captions_file})")
    path = Path(coco_annotations)
    candidates = [path] if path.is_file() else [path / name, path / spec.captions_file]
    for candidate in candidates:
        if candidate.is_file():
            other = [
                s.name for s in COCO_SPLITS.values() if Path(s.captions_file).name == candidate.name != name
            ]
            if other:
                raise DataValidationError(
                    f"{candidate}: a COCO {split} build reads {name}, not {candidate.name}; pass --coco-split "
                    f"{other[0]} to build from that split"
                )
            return sources.record(name, candidate, f"COCO {spec.captions_file} (read from a local copy)")
    looked = ", ".join(map(str, candidates))
    raise MissingSourceError(f"{name} not found at {path} (looked for {looked})")


def read_coco_captions(path: Path) -> tuple[list[dict], dict[int, str]]:
    """COCO caption annotations in file order and the image id -> file name map."""
    data = load_json(path)
    if not isinstance(data, dict) or "annotations" not in data or "images" not in data:
        raise DataValidationError(f"{path}: expected a COCO captions file with 'images' and 'annotations'")
    for key in ("images", "annotations"):
        if not isinstance(data[key], list):
            raise DataValidationError(
                f"{path}: field {key!r} is a {type(data[key]).__name__}, expected a list"
            )
    file_names = {}
    for index, image in enumerate(data["images"]):
        where = f"{path}: images[{index}]"
        if (
            not isinstance(image, dict)
            or not _whole(image.get("id"))
            or not isinstance(image.get("file_name"), str)
        ):
            raise DataValidationError(
                f"{where}: expected an object with an integer 'id' and a text 'file_name'"
            )
        file_names[int(image["id"])] = image["file_name"]
    for index, annotation in enumerate(data["annotations"]):
        if not isinstance(annotation, dict):
            raise DataValidationError(
                f"{path}: annotation {index} is a {type(annotation).__name__}, expected an object"
            )
        missing = [key for key in ("id", "image_id", "caption") if key not in annotation]
        if missing:
            raise DataValidationError(f"{path}: annotation {index} lacks field(s) {', '.join(missing)}")
        for key, ok in (("id", _whole), ("image_id", _whole), ("caption", lambda v: isinstance(v, str))):
            if not ok(annotation[key]):
                raise DataValidationError(
                    f"{path}: annotation {index}, field {key!r}: {str(annotation[key])[:40]!r} "
                    f"is not {'text' if key == 'caption' else 'an integer'}"
                )
        if int(annotation["image_id"]) not in file_names:
            raise DataValidationError(
                f"{path}: annotation {index} refers to unknown image_id {annotation['image_id']}"
            )
    return data["annotations"], file_names


def _whole(value) -> bool:
    """An integer id (COCO's ids are JSON integers; a string of digits is accepted as upstream files vary)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit())
