"""What a new user meets first: errors that say what is wrong and what to run, `--help` with defaults, and
commands whose output path has a default."""

import json

import numpy as np
import pytest
from PIL import Image

from hf_hardpos.cli import main


def _error(capsys, *argv) -> str:
    capsys.readouterr()  # what fixtures printed
    assert main([*argv, "--no-progress"] if argv[0] == "eval" else list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("hardpos ")
    return lines[-1]


def test_a_missing_hub_model_says_what_to_run(capsys, tmp_path, monkeypatch):
    from tests.support.runs import write_replace_folder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = write_replace_folder(tmp_path / "replace")
    err = _error(capsys, "eval", "--model", "nobody-here/no-such-model", "--dataset", str(data))
    assert (
        "not a local folder and not in the Hugging Face cache" in err
        and "hf download nobody-here/no-such-model" in err
    )
    assert "context length" not in err


def test_a_folder_that_is_no_model_is_named(tiny_clip_dir, capsys, tmp_path):
    from tests.support.runs import write_replace_folder

    data = write_replace_folder(tmp_path / "replace")
    empty = tmp_path / "weights"
    empty.mkdir()
    err = _error(capsys, "eval", "--model", str(empty), "--dataset", str(data))
    assert "no config.json" in err and "hardpos convert" in err


@pytest.mark.parametrize("table", ["rows.csv", "data/rows.jsonl"])
def test_a_table_as_dataset_points_to_build_own(capsys, table):
    err = _error(capsys, "eval", "--model", "openai/clip-vit-base-patch32", "--dataset", table)
    assert f"hardpos build own --table {table}" in err


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--batch-size BATCH_SIZE (default: 64)" in text and "--split SPLIT (default: test)" in text
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: RUN/report.html)" in text and "(default: 1000)" in text


def test_build_own_writes_beside_the_table_by_default(tmp_path, capsys):
    images = tmp_path / "img"
    images.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(images / "0.png")
    table = tmp_path / "rows.jsonl"
    table.write_text(
        json.dumps(
            {
                "image": "img/0.png",
                "caption": "a red cube",
                "hard_negative": "a blue cube",
                "hard_positive": "a cube that is red",
            }
        )
        + "\n"
    )
    assert main(["build", "own", "--table", str(table), "--no-progress"]) == 0
    assert (tmp_path / "rows-hardpos" / "README.md").is_file()
    assert list((tmp_path / "rows-hardpos" / "data").rglob("*.parquet"))
