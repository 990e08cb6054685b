"""Small upstream-shaped inputs for the dataset builder tests: JSON files laid out like the
hard_positives / ARO / COCO sources, and generated JPEGs in Visual Genome's folder layout."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image

# (subset, image_id, VG part, c, c_n, c_p)
REPLACE_ROWS = {
    "attributes": [
        ("2401814", "VG_100K_2", "walking elephant", "jumping elephant", "strolling elephant"),
        ("2401814", "VG_100K_2", "walking elephant", "sitting elephant", "strolling elephant"),
        ("712954", "VG_100K", "red car", "blue car", "crimson car"),
        ("712955", "VG_100K", "plant covered in green leaf", "plant covered in brown leaf",
         "plant covecrimson in green leaf"),
        ("712956", "VG_100K", "white dog", "black dog", "ivory dog"),
        ("712956", "VG_100K", "white whiteboard", "black whiteboard", "ivory ivoryboard"),
        ("2401814", "VG_100K_2", "walking elephant", "jumping elephant", "strolling elephant"),  # repeat of row 0
    ],
    "relations": [
        ("3968", "VG_100K_2", "chair in conference room", "chair out of conference room",
         "chair within conference room"),
        ("712954", "VG_100K", "window in building in scene", "window out of building in scene",
         "window within building within scene"),
        ("1159368", "VG_100K", "cup on top of table", "cup under table", "cup on table"),
        ("3968", "VG_100K_2", "chair in conference room", "chair out of conference room",
         "chair within conference room"),  # repeat of row 0
    ],
}
EXPECTED_ARTIFACTS = {"attributes": [3, 5], "relations": []}
EXPECTED_DUPLICATE_OF = {"attributes": {6: 0}, "relations": {3: 0}}


def jpeg_bytes(color: tuple[int, int, int], size: tuple[int, int] = (16, 12)) -> bytes:
    """A small JPEG with a gradient, so crops of different boxes differ."""
    image = Image.new("RGB", size, color)
    for x in range(size[0]):
        for y in range(size[1]):
            image.putpixel((x, y), ((color[0] + 13 * x) % 256, (color[1] + 17 * y) % 256, color[2]))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def make_replace_upstream(root: Path, rows: dict | None = None) -> Path:
    """``root/data/vl_checklist_<subset>.json`` and ``root/swapped_data/...`` in the upstream format."""
    for subset, subset_rows in (rows or REPLACE_ROWS).items():
        original, positive = [], []
        for image_id, part, c, c_n, c_p in subset_rows:
            path = f"data/{part}/{image_id}.jpg"
            original.append({"image_id": image_id, "true_caption": c, "false_caption": c_n, "image_path": path})
            positive.append({"image_id": image_id, "true_caption": c_p, "false_caption": c_n, "image_path": path})
        write_json(root / "data" / f"vl_checklist_{subset}.json", original)
        write_json(root / "swapped_data" / f"vl_checklist_{subset}.json", positive)
    return root


def make_vg_images(root: Path, images: dict[str, str | None], size: tuple[int, int] = (16, 12)) -> dict[str, Path]:
    """One JPEG per ``image_id -> part`` (``None``: flat folder); returns the written paths."""
    written = {}
    for number, (image_id, part) in enumerate(sorted(images.items())):
        folder = root / part if part else root
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{image_id}.jpg"
        path.write_bytes(jpeg_bytes((40 * number % 256, 90, 200), size))
        written[image_id] = path
    return written


def replace_images(rows: dict | None = None) -> dict[str, str]:
    return {image_id: part for subset_rows in (rows or REPLACE_ROWS).values() for image_id, part, *_ in subset_rows}


# SWAP: ARO rows (image_id, bbox, c, c_n, attributes) and c_p
SWAP_ROWS = [
    ("2323", (2, 1, 8, 6), "the white dog and the black cat", "the black dog and the white cat",
     ["white", "black"], "the black cat and the white dog"),
    ("2323", (0, 0, 16, 12), "the red car and the blue bus", "the blue car and the red bus",
     ["red", "blue"], "the blue bus and the red car"),
    ("4545", (5, 3, 7, 9), "the tall man and the short tree", "the short man and the tall tree",
     ["tall", "short"], "the short tree and the tall man"),
]


def make_swap_upstream(upstream: Path, aro_dir: Path, rows=None) -> None:
    """ARO's ``visual_genome_attribution.json`` in ``aro_dir`` and the swapped file in ``upstream``."""
    original, positive = [], []
    for image_id, (x, y, w, h), c, c_n, attributes, c_p in rows or SWAP_ROWS:
        common = {"image_id": image_id, "image_path": f"{image_id}.jpg"}
        common.update({"bbox_x": x, "bbox_y": y, "bbox_w": w, "bbox_h": h})
        original.append({**common, "true_caption": c, "false_caption": c_n, "attributes": attributes})
        positive.append({**common, "true_caption": c_p, "false_caption": c_n, "attributes": attributes})
    write_json(aro_dir / "visual_genome_attribution.json", original)
    write_json(upstream / "swapped_data" / "visual_genome_attribution.json", positive)


# COCO: images and captions in annotation order, with upstream hard-positive lines (JSON strings).
COCO_IMAGES = {57870: "COCO_train2014_000000057870.jpg", 384029: "COCO_train2014_000000384029.jpg"}
COCO_CAPTIONS = [
    # (annotation id, image id, caption, replace hp line, swap hp line)
    (1, 57870, "A man holding a red umbrella.", " A man grasping a red umbrella.", "None"),
    (2, 57870, "A dog and a cat on a sofa", "A dog and a cat on a couch", "A cat and a dog on a sofa"),
    (3, 384029, "Two plates of food on a table", "Two dishes of food on a table", "None"),
    (4, 384029, "A bowl of rice and broccoli", "A bowl of rice and broccoli", "A bowl of broccoli and rice\n"),
]


def make_coco_sources(upstream: Path, coco_dir: Path, captions=None, images_dir: Path | None = None) -> None:
    captions = captions or COCO_CAPTIONS
    write_json(
        coco_dir / "annotations" / "captions_train2014.json",
        {
            "images": [{"id": image_id, "file_name": name} for image_id, name in COCO_IMAGES.items()],
            "annotations": [{"id": a, "image_id": i, "caption": c} for a, i, c, _, _ in captions],
        },
    )
    folder = upstream / "hard_positives_ft"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "replace_hp.jsonl").write_text("".join(json.dumps(r) + "\n" for *_, r, _ in captions), encoding="utf-8")
    (folder / "swap_hp.jsonl").write_text("".join(json.dumps(s) + "\n" for *_, s in captions), encoding="utf-8")
    if images_dir is not None:
        images_dir.mkdir(parents=True, exist_ok=True)
        for number, name in enumerate(COCO_IMAGES.values()):
            (images_dir / name).write_bytes(jpeg_bytes((number * 90, 30, 60)))
