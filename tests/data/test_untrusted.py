"""Annotation files are untrusted input: an image path taken from one never leaves its image folder.

For every builder, a row naming a file outside the image root (``../<file>``, an absolute path, or a
symlink that resolves outside) is refused before anything is written: exit 2 with one line naming the
file, the row and the field, and the outside file's bytes appear nowhere in the output folder.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from PIL import Image

from hf_hardpos.cli import main as hardpos
from hf_hardpos.data.image_sources import UnsafePathError, path_under
from tests.support.data_sources import (
    COCO_IMAGES,
    KARPATHY_COCO,
    make_aro_sources,
    make_coco_placeholders,
    make_coco_sources,
    make_replace_upstream,
    make_swap_upstream,
    make_vg_images,
    replace_images,
    toy_tagger,
    write_json,
)

MARKER = b"PRIVATE-MARKER-7f3a9c"


def secret_image(path):
    """A valid JPEG carrying MARKER in its comment: it would pass every image check if it were read."""
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buffer, format="JPEG", comment=MARKER)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return path


def assert_refused(capsys, rc, out_dir, *expected):
    """Exit 2, one stderr line naming what ``expected`` lists, no traceback, MARKER nowhere in out_dir."""
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in lines[0], (text, lines[0])
    if out_dir.exists():
        for path in out_dir.rglob("*"):
            assert not path.is_file() or MARKER not in path.read_bytes(), path
    return lines[0]


def sugarcrepe_set(root, filenames):
    """A SugarCrepe-format ``data/swap_obj.json`` (a dict keyed by row index)."""
    rows = {
        str(i): {"filename": name, "caption": f"a cat {i}", "negative_caption": f"{i} cat a"}
        for i, name in enumerate(filenames)
    }
    write_json(root / "data" / "swap_obj.json", rows)
    return root


def bad_names(tmp_path, images_dir):
    """The three ways out of ``images_dir``: ``..``, an absolute path, a symlink to outside."""
    secret = secret_image(tmp_path / "secret.jpg")
    link = images_dir / "link.jpg"
    images_dir.mkdir(parents=True, exist_ok=True)
    link.symlink_to(secret)
    return {"dotdot": "../secret.jpg", "absolute": str(secret), "symlink": "link.jpg"}


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_sugarcrepe_second_row_outside_the_image_root(tmp_path, capsys, how):
    images_dir = tmp_path / "val2017"
    make_coco_placeholders(images_dir, ["a.jpg", "b.jpg"])
    name = bad_names(tmp_path, images_dir)[how]
    root = sugarcrepe_set(tmp_path / "sc", ["a.jpg", name, "b.jpg"])
    out = tmp_path / "out"
    rc = hardpos(
        [
            "build",
            "sugarcrepe",
            "--upstream-dir",
            str(root),
            "--images-dir",
            str(images_dir),
            "--subsets",
            "swap_obj",
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    line = assert_refused(capsys, rc, out, "swap_obj.json", "row 1", "field filename")
    assert not (out / "README.md").exists() and not (out / "data").exists()
    assert re.search(r"absolute|'\.\.'|symlink", line)


def test_sugarcrepe_pp_row_outside_the_image_root(tmp_path, capsys):
    images_dir = tmp_path / "val2017"
    make_coco_placeholders(images_dir, ["a.jpg"])
    secret_image(tmp_path / "secret.jpg")
    rows = [
        {"id": i, "filename": name, "caption": "c", "caption2": "c2", "negative_caption": "n"}
        for i, name in enumerate(["a.jpg", "../secret.jpg"])
    ]
    write_json(tmp_path / "scpp" / "data" / "swap_obj.json", rows)
    out = tmp_path / "out"
    rc = hardpos(
        [
            "build",
            "sugarcrepe_pp",
            "--upstream-dir",
            str(tmp_path / "scpp"),
            "--images-dir",
            str(images_dir),
            "--subsets",
            "swap_obj",
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert_refused(capsys, rc, out, "swap_obj.json", "row 1", "field filename")


def test_replace_image_id_outside_the_image_root(tmp_path, capsys):
    rows = {
        "attributes": [
            ("712954", "VG_100K", "red car", "blue car", "crimson car"),
            ("../secret", "VG_100K", "white dog", "black dog", "ivory dog"),
        ],
        "relations": [("712954", "VG_100K", "cup on table", "cup under table", "cup atop table")],
    }
    upstream = make_replace_upstream(tmp_path / "hp", rows)
    make_vg_images(tmp_path / "VG", {"712954": "VG_100K"})
    secret_image(
        tmp_path / "VG" / "secret.jpg"
    )  # VG/VG_100K/../secret.jpg: a real file, outside the part folder
    out = tmp_path / "out"
    rc = hardpos(
        [
            "build",
            "replace",
            "--upstream-dir",
            str(upstream),
            "--images-dir",
            str(tmp_path / "VG"),
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert_refused(capsys, rc, out, "vl_checklist_attributes.json", "row 1", "field image_id")


def test_swap_image_path_outside_the_image_root(tmp_path, capsys):
    upstream, aro = tmp_path / "hp", tmp_path / "aro"
    make_swap_upstream(upstream, aro)
    make_vg_images(tmp_path / "VG", {"2323": "VG_100K", "4545": "VG_100K_2"})
    rows = json.loads((aro / "visual_genome_attribution.json").read_text())
    rows[1]["image_path"] = "../../secret.jpg"
    write_json(aro / "visual_genome_attribution.json", rows)
    secret_image(tmp_path / "secret.jpg")
    out = tmp_path / "out"
    rc = hardpos(
        [
            "build",
            "swap",
            "--upstream-dir",
            str(upstream),
            "--aro-dir",
            str(aro),
            "--images-dir",
            str(tmp_path / "VG"),
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert_refused(capsys, rc, out, "visual_genome_attribution.json", "row 1", "field image_path")


def test_aro_vg_and_order_paths_outside_the_image_root(tmp_path, capsys):
    make_aro_sources(tmp_path / "aro")
    make_vg_images(tmp_path / "aro" / "images", {"2323": None, "4545": None})
    secret = secret_image(tmp_path / "secret.jpg")
    relation = json.loads((tmp_path / "aro" / "visual_genome_relation.json").read_text())
    relation[1]["image_path"] = str(secret)
    write_json(tmp_path / "aro" / "visual_genome_relation.json", relation)
    out = tmp_path / "out"
    common = ["build", "aro", "--aro-dir", str(tmp_path / "aro"), "--output-dir", str(out), "--no-progress"]
    rc = hardpos([*common, "--images-dir", str(tmp_path / "aro" / "images"), "--configs", "vg_relation"])
    assert_refused(capsys, rc, out, "visual_genome_relation.json", "row 1", "field image_path")

    make_coco_placeholders(tmp_path / "coco", [e["image"] for e in KARPATHY_COCO])
    karpathy = json.loads((tmp_path / "aro" / "coco_karpathy_test.json").read_text())
    karpathy[1]["image"] = "val2014/../../secret.jpg"
    write_json(tmp_path / "aro" / "coco_karpathy_test.json", karpathy)
    from hf_hardpos.data.aro import export_aro

    with pytest.raises(UnsafePathError, match=r"coco_karpathy_test\.json: entry 1 field image: .*'\.\.'"):
        export_aro(
            out,
            aro_dir=tmp_path / "aro",
            coco_images_dir=tmp_path / "coco",
            configs=["coco_order"],
            tagger=toy_tagger,
            progress=False,
        )
    assert not (out / "README.md").exists()


def test_finetune_file_name_outside_the_image_root(tmp_path, capsys):
    upstream, coco = tmp_path / "hp", tmp_path / "coco"
    make_coco_sources(upstream, coco, images_dir=coco / "train2014")
    captions = json.loads((coco / "annotations" / "captions_train2017.json").read_text())
    captions["images"][1]["file_name"] = "../../secret.jpg"
    write_json(coco / "annotations" / "captions_train2017.json", captions)
    secret_image(tmp_path / "secret.jpg")
    out = tmp_path / "out"
    rc = hardpos(
        [
            "build",
            "finetune",
            "--upstream-dir",
            str(upstream),
            "--coco-annotations",
            str(coco),
            "--coco-images-dir",
            str(coco / "train2014"),
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    image_id = list(COCO_IMAGES)[1]
    assert_refused(capsys, rc, out, "captions_train2017.json", f"image {image_id}", "field file_name")


def test_path_under_keeps_symlinks_inside_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "x.jpg").write_bytes(b"x")
    (root / "inside.jpg").symlink_to(root / "sub" / "x.jpg")
    assert path_under(root, "inside.jpg") == root / "inside.jpg"
    assert path_under(root, "sub/x.jpg") == root / "sub" / "x.jpg"
    (tmp_path / "secret.jpg").write_bytes(MARKER)
    (root / "out").symlink_to(tmp_path)
    for name in ("out/secret.jpg", "..", "sub/../../x", "C:\\x.jpg", "sub\\..\\..\\x", "/etc/hostname", ""):
        with pytest.raises(UnsafePathError):
            path_under(root, name)


def test_replace_fixture_builds_from_untouched_rows(tmp_path):
    """The refusal is about the path, not the builder: the same fixture with a plain id builds."""
    from hf_hardpos.data.replace import export_replace

    upstream = make_replace_upstream(tmp_path / "hp")
    make_vg_images(tmp_path / "VG", replace_images())
    report = export_replace(
        tmp_path / "out", upstream_dir=upstream, images_dir=tmp_path / "VG", progress=False
    )
    assert report.counts == {"attributes": 7, "relations": 4}


def test_attach_coco_images_keeps_file_names_inside_the_folder(tmp_path):
    """The training-time join reads images by file name: one leading outside the folder is refused."""
    import datasets

    from hf_hardpos.data.coco_finetune import attach_coco_images

    folder = tmp_path / "train2017"
    make_coco_placeholders(folder, ["a.jpg"])
    secret_image(tmp_path / "secret.jpg")
    rows = datasets.Dataset.from_dict({"file_name": ["a.jpg", "../secret.jpg"]})
    with pytest.raises(UnsafePathError, match=r"row 1 field file_name: '\.\./secret\.jpg' contains '\.\.'"):
        attach_coco_images(rows, folder)
    assert attach_coco_images(rows.select([0]), folder)[0]["image"].size == (4, 4)
