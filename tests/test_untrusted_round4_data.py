"""Builders never delete what they did not write; an image that is no regular file is refused, not read
forever; a 16-bit or float greyscale image is read by its value range (`data.hub_folder.check_replaceable`,
`data.own`, `image_decoding.as_rgb`)."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from hf_hardpos.cli import main
from hf_hardpos.data.own import export_own
from hf_hardpos.errors import UserInputError
from hf_hardpos.image_opening import open_image

ROOT = Path(__file__).resolve().parents[1]
GRADIENT = np.tile(np.arange(0, 256, 6.5).astype(np.uint8), (6, 1))  # 0, 6, 13, ... (8-bit)


def _table(folder: Path, images: list[str]) -> Path:
    table = folder / "rows.jsonl"
    table.write_text(
        "".join(
            json.dumps(
                {
                    "image": name,
                    "caption": f"a red cube {i}",
                    "hard_negative": "a blue cube",
                    "hard_positive": "a cube that is red",
                }
            )
            + "\n"
            for i, name in enumerate(images)
        )
    )
    return table


def _png(path: Path, pixels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def test_build_own_never_deletes_a_file_it_did_not_write(tmp_path):
    _png(tmp_path / "img" / "a.png", GRADIENT)
    table = _table(tmp_path, ["img/a.png"])
    out = tmp_path / "X"
    notes = out / "data" / "mine" / "notes.txt"
    notes.parent.mkdir(parents=True)
    notes.write_text("mine")
    with pytest.raises(UserInputError, match="data/mine/notes.txt.*not written by hardpos build"):
        export_own(table, out, progress=False)
    assert notes.read_text() == "mine" and not (out / "README.md").exists()
    readme = tmp_path / "Y" / "README.md"
    readme.parent.mkdir()
    readme.write_text("my project")
    with pytest.raises(UserInputError, match="README.md"):
        export_own(table, readme.parent, progress=False)
    assert readme.read_text() == "my project"
    export_own(table, tmp_path / "Z", progress=False)  # a new folder, then rebuilt in place: ours to replace
    export_own(table, tmp_path / "Z", progress=False)
    assert (tmp_path / "Z" / "README.md").exists()


def test_build_own_into_a_project_folder_with_its_own_data_is_refused(tmp_path, monkeypatch, capsys):
    project = tmp_path / "project"
    _png(project / "img" / "a.png", GRADIENT)
    (project / "data").mkdir()
    (project / "data" / "train.csv").write_text("x\n1\n")
    _table(project, ["img/a.png"])
    monkeypatch.chdir(project)
    assert main(["build", "own", "--table", "rows.jsonl", "--output-dir", "."]) == 2
    assert (project / "data" / "train.csv").read_text() == "x\n1\n"
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error: ") == 1 and "data/train.csv" in err


def test_a_fifo_given_as_an_image_is_refused_not_read(tmp_path):
    _png(tmp_path / "img" / "a.png", GRADIENT)
    os.mkfifo(tmp_path / "img" / "pipe.png")
    _table(tmp_path, ["img/a.png", "img/pipe.png"])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hf_hardpos",
            "build",
            "own",
            "--table",
            str(tmp_path / "rows.jsonl"),
            "--output-dir",
            str(tmp_path / "out"),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in re.split(r"[\r\n]+", done.stderr) if "error: " in line]
    assert len(errors) == 1 and "pipe.png" in errors[0] and "not a regular file" in errors[0]


def test_a_16_bit_greyscale_png_is_built_and_read_as_its_8_bit_version(tmp_path):
    _png(tmp_path / "img" / "eight.png", GRADIENT)
    _png(tmp_path / "img" / "sixteen.png", GRADIENT.astype(np.uint16) * 257)
    assert Image.open(tmp_path / "img" / "sixteen.png").mode == "I;16"
    export_own(_table(tmp_path, ["img/eight.png", "img/sixteen.png"]), tmp_path / "out", progress=False)
    cells = [
        cell
        for f in sorted((tmp_path / "out" / "data").rglob("*.parquet"))
        for cell in pq.read_table(f).column("image").to_pylist()
    ]
    decoded = [np.asarray(open_image(cell)) for cell in cells]
    assert len(decoded) == 2 and np.array_equal(decoded[0], decoded[1])
    assert decoded[1][0, :4, 0].tolist() == [0, 6, 13, 19]


@pytest.mark.parametrize("mode", ["I", "F"])
def test_32_bit_integer_and_float_greyscale_images_are_scaled_by_their_range(mode):
    eight = open_image(Image.fromarray(GRADIENT))
    values = GRADIENT.astype(np.int32) * 257 if mode == "I" else GRADIENT.astype(np.float32) / 255
    image = Image.fromarray(values, mode=mode)
    buffer = io.BytesIO()
    image.save(buffer, "TIFF")
    assert np.array_equal(np.asarray(open_image(image)), np.asarray(eight))
    assert np.array_equal(
        np.asarray(open_image({"bytes": buffer.getvalue(), "path": None})), np.asarray(eight)
    )
