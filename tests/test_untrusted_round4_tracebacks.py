"""Inputs that gave a traceback now give one line naming the file and the field (exit 2 on the command line)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_hardpos.cli import main
from hf_hardpos.data.checks import DataValidationError
from hf_hardpos.data.coco_captions import read_coco_captions
from hf_hardpos.data.coco_hard_positives import count_hard_positives
from hf_hardpos.data.own import export_own
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.suite import load_suite
from hf_hardpos.generation.caption_file import read_captions
from tests.support.eval_data import make_eval_set, write_hub_folder

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return write_hub_folder(
        tmp_path_factory.mktemp("hub"), {"attributes": make_eval_set(num_images=2, rows_per_image=1)}
    )


def _one_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in re.split(r"[\r\n]+", stderr) if "error: " in line]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_pickled_bin_in_an_eval_model_folder_is_one_line_and_never_unpickled(tmp_path, tiny_clip_dir, hub):
    import torch
    from safetensors.torch import load_file

    folder = tmp_path / "model"
    shutil.copytree(tiny_clip_dir, folder)
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "ran"
    state["extra"] = _Runs(str(marker))
    torch.save(state, folder / "pytorch_model.bin")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hf_hardpos",
            "eval",
            "--model",
            str(folder),
            "--dataset",
            str(hub),
            "--output",
            str(tmp_path / "out"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and ".bin" in _one_error(done.stderr)
    assert not marker.exists()


class _Runs:
    """Unpickling this calls `open(path, "w")`: a marker of code run by the loader."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pixel_cache_bound_too_large_for_bytes_is_one_line(tmp_path, tiny_clip_dir, hub, capsys):
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_clip_dir),
                "--dataset",
                str(hub),
                "--output",
                str(tmp_path / "o"),
                "--pixel-cache",
                str(tmp_path / "px"),
                "--pixel-cache-max-gb",
                "1e308",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "--pixel-cache-max-gb" in _one_error(capsys.readouterr().err)


def test_a_hard_positive_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "hp.jsonl"
    path.write_bytes(b'"a cube"\n"caf\xe9"\n')
    with pytest.raises(DataValidationError, match=r"hp.jsonl: line 2 is not UTF-8"):
        count_hard_positives(path)


def test_half_a_surrogate_pair_in_a_jsonl_caption_is_one_line_and_leaves_no_output(tmp_path):
    captions = tmp_path / "captions.jsonl"
    captions.write_text('{"caption": "a red cube"}\n{"caption": "a \\ud800 cube"}\n')
    with pytest.raises(UserInputError, match=r"captions.jsonl line 2: field 'caption'.*surrogate"):
        read_captions(captions)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hf_hardpos",
            "generate",
            "--method",
            "rules",
            "--kind",
            "replace",
            "--input",
            str(captions),
            "--output",
            str(tmp_path / "gen" / "out.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "surrogate" in _one_error(done.stderr)
    assert not (tmp_path / "gen").exists()
    (tmp_path / "img").mkdir()
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "img" / "a.png")
    table = tmp_path / "rows.jsonl"
    table.write_text(
        '{"image": "img/a.png", "caption": "a \\ud800", "hard_negative": "b", "hard_positive": "c"}\n'
    )
    with pytest.raises(UserInputError, match=r"line 1, field 'caption'.*surrogate"):
        export_own(table, tmp_path / "built", progress=False)
    assert not (tmp_path / "built").exists()


COCO_SHAPES = [
    {"images": {"id": 1}, "annotations": []},
    {"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": "many"},
    {"images": [1, 2], "annotations": []},
    {"images": [{"id": "x", "file_name": "a.jpg"}], "annotations": []},
    {"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [[1, 1, "a cube"]]},
    {
        "images": [{"id": 1, "file_name": "a.jpg"}],
        "annotations": [{"id": 1, "image_id": [1], "caption": "c"}],
    },
    {"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"id": 1, "image_id": 1, "caption": 5}]},
]


@pytest.mark.parametrize("data", COCO_SHAPES)
def test_coco_captions_of_the_wrong_shape_are_one_line(tmp_path, data):
    path = tmp_path / "captions_train2017.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataValidationError) as err:
        read_coco_captions(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["metrics.json", ".hardpos.lock"])
def test_model_folder_names_that_are_the_output_folders_own_files_are_refused(
    tmp_path, tiny_clip_dir, hub, name, capsys
):
    model = tmp_path / name
    shutil.copytree(tiny_clip_dir, model)
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--model",
                str(model),
                "--model",
                str(tiny_clip_dir),
                "--dataset",
                str(hub),
                "--output",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    assert name in _one_error(capsys.readouterr().err)
    assert not (out / name).exists()


@pytest.mark.parametrize("name", [".hardpos.lock.holder", "x" * 300, "-rf", ".hidden"])
def test_suite_entry_names_are_refused_up_front(tmp_path, name):
    path = tmp_path / "suite.yaml"
    path.write_text(f"datasets:\n  - {{name: {json.dumps(name)}, dataset: d}}\n")
    with pytest.raises(UserInputError) as err:
        load_suite(str(path))
    assert "\n" not in str(err.value)
