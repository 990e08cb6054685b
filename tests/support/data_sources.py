"""Small upstream-shaped inputs for the dataset builder tests: JSON files laid out like the
hard_positives / ARO / COCO sources, and generated JPEGs in Visual Genome's folder layout."""

from __future__ import annotations

import io
import json
from pathlib import Path

import yaml
from PIL import Image

from tests.support.paths import UPSTREAM_FIXTURES

# (subset, image_id, VG part, c, c_n, c_p)
REPLACE_ROWS = {
    "attributes": [
        ("2401814", "VG_100K_2", "walking elephant", "jumping elephant", "strolling elephant"),
        ("2401814", "VG_100K_2", "walking elephant", "sitting elephant", "strolling elephant"),
        ("712954", "VG_100K", "red car", "blue car", "crimson car"),
        (
            "712955",
            "VG_100K",
            "plant covered in green leaf",
            "plant covered in brown leaf",
            "plant covecrimson in green leaf",
        ),
        ("712956", "VG_100K", "white dog", "black dog", "ivory dog"),
        ("712956", "VG_100K", "white whiteboard", "black whiteboard", "ivory ivoryboard"),
        (
            "2401814",
            "VG_100K_2",
            "walking elephant",
            "jumping elephant",
            "strolling elephant",
        ),  # repeat of row 0
    ],
    "relations": [
        (
            "3968",
            "VG_100K_2",
            "chair in conference room",
            "chair out of conference room",
            "chair within conference room",
        ),
        (
            "712954",
            "VG_100K",
            "window in building in scene",
            "window out of building in scene",
            "window within building within scene",
        ),
        ("1159368", "VG_100K", "cup on top of table", "cup under table", "cup on table"),
        (
            "3968",
            "VG_100K_2",
            "chair in conference room",
            "chair out of conference room",
            "chair within conference room",
        ),  # repeat of row 0
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
            original.append(
                {"image_id": image_id, "true_caption": c, "false_caption": c_n, "image_path": path}
            )
            positive.append(
                {"image_id": image_id, "true_caption": c_p, "false_caption": c_n, "image_path": path}
            )
        write_json(root / "data" / f"vl_checklist_{subset}.json", original)
        write_json(root / "swapped_data" / f"vl_checklist_{subset}.json", positive)
    return root


def make_vg_images(
    root: Path, images: dict[str, str | None], size: tuple[int, int] = (16, 12)
) -> dict[str, Path]:
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
    return {
        image_id: part
        for subset_rows in (rows or REPLACE_ROWS).values()
        for image_id, part, *_ in subset_rows
    }


# SWAP: ARO rows (image_id, bbox, c, c_n, attributes) and c_p
SWAP_ROWS = [
    (
        "2323",
        (2, 1, 8, 6),
        "the white dog and the black cat",
        "the black dog and the white cat",
        ["white", "black"],
        "the black cat and the white dog",
    ),
    (
        "2323",
        (0, 0, 16, 12),
        "the red car and the blue bus",
        "the blue car and the red bus",
        ["red", "blue"],
        "the blue bus and the red car",
    ),
    (
        "4545",
        (5, 3, 7, 9),
        "the tall man and the short tree",
        "the short man and the tall tree",
        ["tall", "short"],
        "the short tree and the tall man",
    ),
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
# File names as in train2017 (the default split); train2014 prefixes them with COCO_train2014_.
COCO_IMAGES = {57870: "000000057870.jpg", 384029: "000000384029.jpg"}
COCO_CAPTIONS = [
    # (annotation id, image id, caption, replace hp line, swap hp line)
    (1, 57870, "A man holding a red umbrella.", " A man grasping a red umbrella.", "None"),
    (2, 57870, "A dog and a cat on a sofa", "A dog and a cat on a couch", "A cat and a dog on a sofa"),
    (3, 384029, "Two plates of food on a table", "Two dishes of food on a table", "None"),
    (
        4,
        384029,
        "A bowl of rice and broccoli",
        "A bowl of rice and broccoli",
        "A bowl of broccoli and rice\n",
    ),
]


def coco_image_names(split: str = "train2017") -> dict[int, str]:
    return {i: name if split == "train2017" else f"COCO_{split}_{name}" for i, name in COCO_IMAGES.items()}


def make_coco_sources(
    upstream: Path, coco_dir: Path, captions=None, images_dir: Path | None = None, split: str = "train2017"
) -> None:
    """`annotations/captions_<split>.json` (shaped like COCO's), upstream-shaped hard-positive JSONL (one
    JSON string per caption, "None" where no swap exists) and, optionally, the images."""
    captions = captions or COCO_CAPTIONS
    names = coco_image_names(split)
    write_json(
        coco_dir / "annotations" / f"captions_{split}.json",
        {
            "images": [{"id": image_id, "file_name": name} for image_id, name in names.items()],
            "annotations": [{"id": a, "image_id": i, "caption": c} for a, i, c, _, _ in captions],
        },
    )
    folder = upstream / "hard_positives_ft"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "replace_hp.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for *_, r, _ in captions), encoding="utf-8"
    )
    (folder / "swap_hp.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for *_, s in captions), encoding="utf-8"
    )
    if images_dir is not None:
        images_dir.mkdir(parents=True, exist_ok=True)
        for number, name in enumerate(names.values()):
            (images_dir / name).write_bytes(jpeg_bytes((number * 90, 30, 60)))


# SugarCrepe / SugarCrepe++: the real upstream files (tests/fixtures/upstream, gzip) and COCO placeholders.


def unpack_upstream(name: str, root: Path) -> Path:
    """Decompress ``fixtures/upstream/<name>/data/*.json.gz`` into ``root/data/*.json`` (the repo layout)."""
    import gzip

    (root / "data").mkdir(parents=True, exist_ok=True)
    for packed in sorted((UPSTREAM_FIXTURES / name / "data").glob("*.json.gz")):
        (root / "data" / packed.name[: -len(".gz")]).write_bytes(gzip.decompress(packed.read_bytes()))
    return root


def make_coco_placeholders(folder: Path, file_names) -> dict[str, bytes]:
    """A tiny JPEG per COCO file name, carrying the name as its JPEG comment, so the bytes differ per
    image and a row's embedded image can be matched to its upstream ``filename``."""
    folder.mkdir(parents=True, exist_ok=True)
    pixels = Image.new("RGB", (4, 4), (120, 60, 30))
    written = {}
    for name in sorted(set(file_names)):
        buffer = io.BytesIO()
        pixels.save(buffer, format="JPEG", comment=name.encode())
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(buffer.getvalue())
        written[name] = buffer.getvalue()
    return written


# ARO: VG-Relation / VG-Attribution rows shaped like ARO's files, and Karpathy-style test files. ARO's own
# files are on Google Drive and BLIP's bucket, which cannot be reached here.
ARO_RELATION_ROWS = [
    # (image_id, bbox, true caption, false caption, relation)
    ("2323", (1, 1, 10, 8), "the dog is on the table", "the table is on the dog", "on"),
    ("4545", (0, 2, 9, 9), "the man is wearing the hat", "the hat is wearing the man", "wearing"),
]
ARO_ATTRIBUTION_ROWS = [
    (
        "2323",
        (2, 0, 8, 8),
        "the white dog and the black cat",
        "the black dog and the white cat",
        ["white", "black"],
    ),
]
KARPATHY_COCO = [
    {
        "image": "val2014/COCO_val2014_000000391895.jpg",
        "caption": [
            "A man with a red helmet on a small moped on a dirt road.",
            "Man riding a motor bike on a dirt road on the countryside.",
        ],
    },
    {
        "image": "val2014/COCO_val2014_000000522418.jpg",
        "caption": ["A woman wearing a net on her head cutting a cake."],
    },
]
KARPATHY_FLICKR = [
    {
        "image": "flickr30k-images/1007129816.jpg",
        "caption": ["The man with pierced ears is wearing glasses and an orange hat."],
    },
]
NOUNS = {
    "man",
    "helmet",
    "moped",
    "road",
    "bike",
    "countryside",
    "woman",
    "net",
    "head",
    "cake",
    "ears",
    "glasses",
    "hat",
}
ADJECTIVES = {"red", "small", "dirt", "orange", "pierced"}


def toy_tagger(text: str) -> list[tuple[str, str]]:
    """A dictionary tagger with Penn tags for the fixtures' words (the real default is spaCy's)."""
    import re

    tokens = re.findall(r"\w+|[^\w\s]", text)
    return [(t, "NN" if t.lower() in NOUNS else "JJ" if t.lower() in ADJECTIVES else "X") for t in tokens]


def make_aro_sources(aro_dir: Path) -> None:
    def vg_rows(rows, label):
        return [
            {
                "image_id": i,
                "image_path": f"{i}.jpg",
                "bbox_x": b[0],
                "bbox_y": b[1],
                "bbox_w": b[2],
                "bbox_h": b[3],
                "true_caption": c,
                "false_caption": n,
                label: value,
            }
            for i, b, c, n, value in rows
        ]

    write_json(aro_dir / "visual_genome_relation.json", vg_rows(ARO_RELATION_ROWS, "relation_name"))
    write_json(aro_dir / "visual_genome_attribution.json", vg_rows(ARO_ATTRIBUTION_ROWS, "attributes"))
    write_json(aro_dir / "coco_karpathy_test.json", KARPATHY_COCO)
    write_json(aro_dir / "flickr30k_test.json", KARPATHY_FLICKR)


def fake_downloads(monkeypatch, raw: str, upstream: Path, archives: dict[str, Path]) -> list[str]:
    """Serve a pinned repository's raw URLs (prefix ``raw``) from ``upstream`` and each archive URL from
    its extracted folder, through the builders' download manager (tests never touch the network);
    returns the URLs requested, in order."""
    from hf_hardpos.data import sources

    requested: list[str] = []

    class FakeDownloadManager:
        def download(self, url):
            requested.append(url)
            assert url.startswith(raw), url
            return str(upstream / url[len(raw) :])

        def download_and_extract(self, url):
            requested.append(url)
            return str(archives[url])

    monkeypatch.setattr(sources.Sources, "dl_manager", property(lambda self: FakeDownloadManager()))
    return requested


def card_section(readme: str, heading: str) -> str:
    """The text of the card's ``## heading`` section."""
    return readme.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def card_table(readme: str, heading: str) -> dict[str, dict[str, str]]:
    """The first table of a card section: first cell -> {header: cell}, backticks stripped."""
    lines = [line for line in card_section(readme, heading).splitlines() if line.startswith("|")]
    header, _rule, *rows = ([cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines)
    header = [cell.replace("`", "") for cell in header]
    return {cells[0].strip("`"): dict(zip(header[1:], cells[1:])) for cells in rows}


def card_numbers(readme: str, heading: str) -> dict[str, dict[str, int]]:
    """A card table whose cells are counts ("1,652"; "-" and text left out), as integers."""
    return {
        row: {
            name: int(cell.replace(",", ""))
            for name, cell in cells.items()
            if cell.replace(",", "").isdigit()
        }
        for row, cells in card_table(readme, heading).items()
    }


def card_sources(readme: str) -> dict[str, str]:
    """The card's Provenance list: input name -> where it came from (with its sha256)."""
    items = [line[2:] for line in card_section(readme, "Provenance").splitlines() if line.startswith("- ")]
    return dict(item.split(": ", 1) for item in items)


def card_metadata(readme: str) -> dict:
    """The card's YAML header."""
    return yaml.safe_load(readme.split("---\n", 2)[1])


def column_sources(readme: str) -> dict[str, str]:
    """The card's Columns table: column name -> its "source and meaning" cell."""
    return {name: cells["source and meaning"] for name, cells in card_table(readme, "Columns").items()}
