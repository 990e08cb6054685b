"""SWAP builder: ARO-shaped fixtures -> cropped images in a Hub folder -> load_dataset gives the same rows."""

import io
import json

import datasets
import pytest
from PIL import Image

from hf_hardpos.data.checks import (
    AlignmentError,
    DataValidationError,
    MissingImageError,
)
from hf_hardpos.data.swap import export_swap
from tests.support.data_sources import (
    SWAP_ROWS,
    make_swap_upstream,
    make_vg_images,
    write_json,
)
from tests.support.paths import REPO


@pytest.fixture
def sources(tmp_path):
    upstream, aro = tmp_path / "hard_positives", tmp_path / "aro"
    make_swap_upstream(upstream, aro)
    images = make_vg_images(tmp_path / "VG", {"2323": "VG_100K", "4545": "VG_100K_2"})
    return upstream, aro, tmp_path / "VG", images


@pytest.mark.parametrize("crop_format", ["png", "jpeg"])
def test_build_export_load_crops_to_the_bbox(sources, tmp_path, crop_format):
    upstream, aro, images_dir, image_files = sources
    out = tmp_path / "out"
    report = export_swap(
        out,
        upstream_dir=upstream,
        aro_dir=aro,
        images_dir=images_dir,
        crop_format=crop_format,
        progress=False,
    )
    assert report.counts == {"default": 3} and report.expected_counts == {"default": 28_748}
    loaded = datasets.load_dataset(str(out), split="test")  # single config: no name needed
    assert loaded.num_rows == len(SWAP_ROWS)
    for index, (row, (image_id, (x, y, w, h), c, c_n, attributes, c_p)) in enumerate(zip(loaded, SWAP_ROWS)):
        assert (row["image_id"], row["caption"], row["hard_negative"], row["hard_positive"]) == (
            image_id,
            c,
            c_n,
            c_p,
        )
        assert (row["bbox_x"], row["bbox_y"], row["bbox_w"], row["bbox_h"]) == (x, y, w, h)
        assert row["attributes"] == attributes and row["upstream_index"] == index
        assert row["image_path"] == f"{'VG_100K' if image_id == '2323' else 'VG_100K_2'}/{image_id}.jpg"
        assert row["image"].size == (w, h)
        with Image.open(image_files[image_id]) as source:
            expected = source.convert("RGB").crop((x, y, x + w, y + h))
        if crop_format == "png":  # lossless: exactly ARO's crop
            assert row["image"].convert("RGB").tobytes() == expected.tobytes()
    raw = loaded.cast_column("image", datasets.Image(decode=False))[0]["image"]
    assert Image.open(io.BytesIO(raw["bytes"])).format == crop_format.upper()


def test_flat_image_folder_like_aro_images(sources, tmp_path):
    upstream, aro, _, _ = sources
    make_vg_images(tmp_path / "flat", {"2323": None, "4545": None})
    export_swap(
        tmp_path / "out", upstream_dir=upstream, aro_dir=aro, images_dir=tmp_path / "flat", progress=False
    )
    loaded = datasets.load_dataset(str(tmp_path / "out"), "default", split="test")
    assert loaded["image_path"] == ["2323.jpg", "2323.jpg", "4545.jpg"]


def test_misaligned_invalid_and_missing(sources, tmp_path):
    upstream, aro, images_dir, image_files = sources
    positive_file = upstream / "swapped_data" / "visual_genome_attribution.json"
    positive = json.loads(positive_file.read_text())
    positive[1]["image_id"] = "9999"
    write_json(positive_file, positive)
    with pytest.raises(AlignmentError, match="row 1: image_id '2323' != '9999'"):
        export_swap(
            tmp_path / "out", upstream_dir=upstream, aro_dir=aro, images_dir=images_dir, progress=False
        )
    make_swap_upstream(upstream, aro)

    original_file = aro / "visual_genome_attribution.json"
    original = json.loads(original_file.read_text())
    original[2]["bbox_w"] = 0
    write_json(original_file, original)
    with pytest.raises(DataValidationError, match="row 2 has a bbox .* of zero size in pixels"):
        export_swap(
            tmp_path / "out", upstream_dir=upstream, aro_dir=aro, images_dir=images_dir, progress=False
        )
    make_swap_upstream(upstream, aro)

    image_files["4545"].unlink()
    with pytest.raises(MissingImageError, match="image_id 4545"):
        export_swap(
            tmp_path / "out", upstream_dir=upstream, aro_dir=aro, images_dir=images_dir, progress=False
        )
    report = export_swap(
        tmp_path / "out",
        upstream_dir=upstream,
        aro_dir=aro,
        images_dir=images_dir,
        skip_missing=True,
        progress=False,
    )
    assert report.skipped_missing_images == {"default": ["4545"]} and report.counts["default"] == 2


def test_script_without_images_and_push(sources, tmp_path, monkeypatch):
    import runpy

    import huggingface_hub

    calls = []

    class FakeHfApi:  # records what would be uploaded; tests never reach the Hub
        def __init__(self, token=None):
            calls.append(("token", token))

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", repo_id, kwargs))

        def upload_folder(self, **kwargs):
            calls.append(("upload_folder", kwargs))
            return "commit"

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    upstream, aro, _, _ = sources
    main = runpy.run_path(str(REPO / "dataset_scripts" / "swap.py"))["main"]
    out = tmp_path / "out"
    argv = ["--upstream-dir", str(upstream), "--aro-dir", str(aro), "--no-images", "--output-dir", str(out)]
    assert main([*argv, "--push-to-hub", "someorg/swap", "--private"]) == 0
    assert calls[1] == (
        "create_repo",
        "someorg/swap",
        {"repo_type": "dataset", "private": True, "exist_ok": True},
    )
    upload = calls[2][1]
    assert (upload["folder_path"], upload["repo_id"], upload["repo_type"]) == (
        str(out),
        "someorg/swap",
        "dataset",
    )
    assert calls[0] == (
        "token",
        None,
    )  # huggingface_hub resolves the token itself (HF_TOKEN or the stored login)
    assert upload["delete_patterns"] == ["data/**"]  # remote shards this build does not have are deleted
    assert 'load_dataset("someorg/swap"' in (out / "README.md").read_text()
    loaded = datasets.load_dataset(str(out), split="test")
    assert "image" not in loaded.column_names and loaded["hard_positive"][0] == SWAP_ROWS[0][-1]
    assert (
        main(["--upstream-dir", str(upstream), "--aro-dir", str(tmp_path), "--output-dir", str(out)]) == 2
    )  # input error
