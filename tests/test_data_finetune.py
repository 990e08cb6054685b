"""COCO fine-tuning builder: captions + upstream hard positives + generated hard negatives, nulls not "None"."""

import json

import datasets
import pytest
from data_fixtures import COCO_CAPTIONS, COCO_IMAGES, column_sources, make_coco_sources

from hf_hardpos.data.finetune import attach_coco_images, export_finetune
from hf_hardpos.data.checks import DataValidationError, MissingImageError


def fake_replace(caption: str) -> str | None:
    return caption.replace("red", "blue") if "red" in caption else None


def fake_swap(caption: str) -> str | None:
    return " ".join(reversed(caption.split())) if " and " in caption else None


NEGATIVES = {"replace": fake_replace, "swap": fake_swap}


@pytest.fixture
def sources(tmp_path):
    upstream, coco = tmp_path / "hard_positives", tmp_path / "coco"
    make_coco_sources(upstream, coco, images_dir=coco / "train2014")
    return upstream, coco


def test_build_export_load_gives_the_same_rows(sources, tmp_path):
    upstream, coco = sources
    out = tmp_path / "out"
    report = export_finetune(
        out, upstream_dir=upstream, coco_annotations=coco / "annotations", negative_generators=NEGATIVES
    )
    assert report.counts == {"default": 4, "swap hard positives": 2}
    loaded = datasets.load_dataset(str(out), split="train")
    assert "image" not in loaded.column_names
    for row, (caption_id, image_id, caption, replace_hp, swap_hp) in zip(loaded, COCO_CAPTIONS):
        assert row["caption_id"] == caption_id and row["image_id"] == str(image_id)
        assert row["file_name"] == COCO_IMAGES[image_id] and row["caption"] == caption
        assert row["hard_positive_replace"] == replace_hp.strip()
        assert row["hard_positive_swap"] == (None if swap_hp == "None" else swap_hp.strip())
        assert row["hard_negative_replace"] == fake_replace(caption)
        assert row["hard_negative_swap"] == fake_swap(caption)
    assert "None" not in loaded["hard_positive_swap"]
    flags = json.loads((out / "build_report.json").read_text())["flags"]["default"]
    assert flags["hard_positive_replace equal to caption"] == 1  # the fixture's unchanged LLM output

    joined = attach_coco_images(loaded, coco / "train2014")
    assert joined[0]["image"].size == (16, 12)


def test_embedded_images_and_missing_image(sources, tmp_path):
    upstream, coco = sources
    common = dict(upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES)
    export_finetune(tmp_path / "out", coco_images_dir=coco / "train2014", **common)
    raw = datasets.load_dataset(str(tmp_path / "out"), split="train").cast_column("image", datasets.Image(decode=False))
    assert raw[0]["image"]["bytes"] == (coco / "train2014" / COCO_IMAGES[57870]).read_bytes()

    (coco / "train2014" / COCO_IMAGES[384029]).unlink()
    with pytest.raises(MissingImageError, match=COCO_IMAGES[384029]):
        export_finetune(tmp_path / "out", coco_images_dir=coco / "train2014", **common)
    report = export_finetune(tmp_path / "out", coco_images_dir=coco / "train2014", skip_missing=True, **common)
    assert report.counts["default"] == 2 and report.skipped_rows == {"default": 2}


def test_line_count_and_bad_line_errors(sources, tmp_path):
    upstream, coco = sources
    common = dict(upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES)
    swap_file = upstream / "hard_positives_ft" / "swap_hp.jsonl"
    lines = swap_file.read_text().splitlines(keepends=True)
    swap_file.write_text("".join(lines[:-1]))
    with pytest.raises(DataValidationError, match="has 3 lines but .* has 4 captions"):
        export_finetune(tmp_path / "out", **common)
    swap_file.write_text("".join(lines[:2]) + "{not json\n" + lines[3])
    with pytest.raises(DataValidationError, match="line 3 is not valid JSON"):
        export_finetune(tmp_path / "out", **common)
    with pytest.raises(ValueError, match="negative_generators lacks"):
        export_finetune(
            tmp_path / "out", upstream_dir=upstream, coco_annotations=coco, negative_generators={"replace": fake_replace}
        )


def test_default_generators_are_the_package_rules(sources, tmp_path):
    rules = pytest.importorskip("hf_hardpos.generation.rules")
    upstream, coco = sources
    export_finetune(tmp_path / "out", upstream_dir=upstream, coco_annotations=coco)
    loaded = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert loaded["hard_negative_swap"] == [rules.swap_hard_negative(c) for _, _, c, _, _ in COCO_CAPTIONS]
    produced = [n for n in loaded["hard_negative_replace"] if n is not None]
    assert produced and all(n not in [c for _, _, c, _, _ in COCO_CAPTIONS] for n in produced)


def test_script(sources, tmp_path):
    import runpy
    from pathlib import Path

    upstream, coco = sources
    main = runpy.run_path(str(Path(__file__).resolve().parents[1] / "dataset_scripts" / "finetune.py"))["main"]
    pytest.importorskip("hf_hardpos.generation.rules")
    out = tmp_path / "out"
    assert main(["--upstream-dir", str(upstream), "--coco-annotations", str(coco), "--output-dir", str(out)]) == 0
    assert datasets.load_dataset(str(out), split="train").num_rows == 4
    assert main(["--upstream-dir", str(upstream), "--coco-annotations", str(tmp_path), "--output-dir", str(out)]) == 2  # input error


def test_card_says_where_each_column_comes_from_and_whose_negatives_they_are(sources, tmp_path):
    """Issue 9 item 8: the rule-made hard negatives are not called the paper's; every column has a source."""
    upstream, coco = sources
    export_finetune(tmp_path / "out", upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES)
    readme = (tmp_path / "out" / "README.md").read_text()
    sources_by_column = column_sources(readme)
    assert set(sources_by_column) == set(datasets.load_dataset(str(tmp_path / "out"), split="train").column_names)
    assert all(sources_by_column.values())
    for name in ("hard_negative_replace", "hard_negative_swap"):
        assert "generated by this builder" in sources_by_column[name]
        assert "not the paper's own negatives" in sources_by_column[name]
    assert "replace_hp.jsonl" in sources_by_column["hard_positive_replace"]
    assert "they are not the hard negatives the paper trained with" in readme
    assert "the paper's hard negatives" not in readme.lower()
