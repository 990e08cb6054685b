"""`hardpos build own`: a CSV/JSONL table of image paths and captions becomes a folder `hardpos eval` scores."""

import csv
import json

import numpy as np
import pytest
from PIL import Image

from hf_hardpos.data.own import export_own
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.run import evaluate_model
from tests.support.data_sources import card_metadata


def _write_images(folder, count):
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        Image.fromarray(rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)).save(folder / f"{index}.png")


ROWS = [
    {
        "image": "img/0.png",
        "caption": "a red cube",
        "hard_negative": "a blue cube",
        "hard_positive": "a cube that is red",
        "config": "attributes",
    },
    {
        "image": "img/1.png",
        "caption": "a dog left of a cat",
        "hard_negative": "a cat left of a dog",
        "hard_positive": "a cat right of a dog",
        "config": "relations",
    },
    {
        "image": "img/0.png",
        "caption": "a small red cube",
        "hard_negative": "a large red cube",
        "hard_positive": "a red cube that is small",
        "config": "attributes",
    },
]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_table_becomes_a_folder_eval_scores(kind, tiny_clip_dir, tmp_path):
    _write_images(tmp_path / "img", 2)
    table = tmp_path / f"rows.{kind}"
    if kind == "csv":
        with open(table, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(ROWS[0]))
            writer.writeheader()
            writer.writerows(ROWS)
    else:
        table.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    out = tmp_path / "own"
    report = export_own(table, out)
    assert report.counts == {"attributes": 2, "relations": 1}
    configs = card_metadata((out / "README.md").read_text())["configs"]
    assert [config["config_name"] for config in configs] == ["attributes", "relations"]
    result = evaluate_model(str(tiny_clip_dir), str(out), progress=False, log=lambda m: None)
    assert (
        result.results["attributes"]["num_examples"] == 2 and result.results["relations"]["num_examples"] == 1
    )


def test_bad_rows_and_images_are_named(tmp_path):
    _write_images(tmp_path / "img", 1)
    table = tmp_path / "rows.jsonl"
    table.write_text(json.dumps(ROWS[0]) + "\n\n")
    with pytest.raises(UserInputError, match="line 2 is blank"):
        export_own(table, tmp_path / "out")
    table.write_text(json.dumps({**ROWS[0], "hard_positive": ""}) + "\n")
    with pytest.raises(UserInputError, match="line 1, field 'hard_positive'"):
        export_own(table, tmp_path / "out")
    (tmp_path / "img" / "1.png").write_bytes(b"not an image")
    table.write_text(json.dumps(ROWS[1]) + "\n")
    with pytest.raises(UserInputError, match="line 1: image .*1.png cannot be read"):
        export_own(table, tmp_path / "out")


@pytest.mark.parametrize("name", ["../outside.png", "/etc/hostname", "img/../../outside.png", "img/link.png"])
def test_image_paths_never_leave_the_image_folder(name, tmp_path):
    """An absolute path, a `..` or a symlink out of the image folder is refused with the table's line and field,
    before any file is read (a shared table must not embed other files of the machine)."""
    _write_images(tmp_path / "data" / "img", 1)
    _write_images(
        tmp_path, 1
    )  # a readable image outside the folder: refused for where it is, not for what it is
    (tmp_path / "outside.png").write_bytes((tmp_path / "0.png").read_bytes())
    (tmp_path / "data" / "img" / "link.png").symlink_to(tmp_path / "outside.png")
    table = tmp_path / "data" / "rows.jsonl"
    table.write_text(json.dumps({**ROWS[0], "image": name}) + "\n")
    with pytest.raises(UserInputError, match=r"line 1, field 'image'") as refused:
        export_own(table, tmp_path / "out")
    assert isinstance(refused.value, UserInputError) and not (tmp_path / "out").exists()


def _csv(path, header: str, *lines: str, encoding="utf-8"):
    path.write_text("\n".join([header, *lines]) + "\n", encoding=encoding)
    return path


HEADER = "image,caption,hard_negative,hard_positive,config"


def test_a_csv_saved_by_excel_with_a_byte_order_mark_reads(tmp_path):
    _write_images(tmp_path / "img", 1)
    table = _csv(
        tmp_path / "rows.csv",
        HEADER,
        "img/0.png,a red cube,a blue cube,a cube that is red,attributes",
        encoding="utf-8-sig",
    )
    assert table.read_bytes().startswith(b"\xef\xbb\xbf")
    export_own(table, tmp_path / "out")
    import pyarrow.parquet as pq

    shards = sorted((tmp_path / "out" / "data" / "attributes").glob("*.parquet"))
    rows = [row for shard in shards for row in pq.read_table(shard).to_pylist()]
    assert [row["caption"] for row in rows] == ["a red cube"]


@pytest.mark.parametrize(
    "header, line, encoding, expected",
    [
        (
            HEADER + ",caption",
            "img/0.png,a,b,c,attributes,d",
            "utf-8",
            r"line 1 names column\(s\) \['caption'\] more than once",
        ),
        (HEADER, "img/0.png,a,b,c,attributes,extra", "utf-8", "line 2 has 6 cells, the header names 5"),
        (HEADER, "img/0.png,café au lait,b,c,attributes", "latin-1", "is not UTF-8"),
        (HEADER, "img/0.png,a,b,c,../../x", "utf-8", "line 2, field 'config'"),
        (HEADER, "img/0.png,a,b,c,a b", "utf-8", "line 2, field 'config'"),
        (
            HEADER.replace("caption", "captoin"),
            "img/0.png,a,b,c,attributes",
            "utf-8",
            r"line 1 \(the header\) has unknown field\(s\) \['captoin'\]",
        ),
        (
            "image,caption,hard_negative,config",
            "img/0.png,a,b,attributes",
            "utf-8",
            r"line 1 \(the header\) has no field 'hard_positive'",
        ),
    ],
)
def test_malformed_tables_are_one_line(tmp_path, header, line, encoding, expected):
    _write_images(tmp_path / "img", 1)
    table = _csv(tmp_path / "rows.csv", header, line, encoding=encoding)
    with pytest.raises(UserInputError, match=expected) as refused:
        export_own(table, tmp_path / "out")
    assert "\n" not in str(refused.value) and not (tmp_path / "out").exists()


def test_an_image_over_pils_pixel_limit_is_one_line(tmp_path, monkeypatch):
    """PIL refuses images over twice `MAX_IMAGE_PIXELS` (a decompression bomb) with its own error type."""
    _write_images(tmp_path / "img", 1)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 50)  # the 12 x 10 test image is over twice this
    table = _csv(tmp_path / "rows.csv", HEADER, "img/0.png,a,b,c,attributes")
    with pytest.raises(UserInputError, match="line 2: image .*0.png cannot be read"):
        export_own(table, tmp_path / "out")


def test_a_build_never_replaces_its_own_inputs(tmp_path):
    """`OUT/data/` is replaced by the build: images kept there (or a table named OUT/README.md) are refused."""
    _write_images(tmp_path / "data" / "img", 1)
    table = _csv(tmp_path / "rows.csv", HEADER, "data/img/0.png,a,b,c,attributes")
    with pytest.raises(UserInputError, match="which this build replaces"):
        export_own(table, tmp_path)
    assert (tmp_path / "data" / "img" / "0.png").is_file() and not (tmp_path / "README.md").exists()
    export_own(table, tmp_path / "out")  # elsewhere: fine


def test_a_jsonl_row_naming_a_field_twice_is_refused(tmp_path):
    _write_images(tmp_path / "img", 1)
    table = tmp_path / "rows.jsonl"
    table.write_text(json.dumps(ROWS[0])[:-1] + ', "caption": "another"}\n')
    with pytest.raises(UserInputError, match=r"line 1 names field\(s\) \['caption'\] more than once"):
        export_own(table, tmp_path / "out")
