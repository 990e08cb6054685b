"""An eval set's image cells that name a file instead of holding its bytes: a path outside the dataset
folder is refused (row and field named; the report shows no image of it), and one inside is hashed into the
dataset's digest, so a rerun after that image changed scores again (`evaluation.eval_data.image_files_referenced`)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.eval_data import load_local_split
from hf_hardpos.evaluation.run import evaluate_model
from tests.support.eval_data import make_eval_set, write_hub_folder


def _folder_naming(tmp_path, image_file) -> tuple:
    """A declared Hub-style folder whose first row's image cell is `{"bytes": null, "path": image_file}`,
    written with pyarrow (`Dataset.to_parquet` would embed the file's bytes)."""
    folder = write_hub_folder(
        tmp_path / "data", {"attributes": make_eval_set(num_images=2, rows_per_image=2)}
    )
    shard = folder / "data" / "attributes" / "test-00000-of-00001.parquet"
    table = pq.read_table(shard)
    cells = table.column("image").to_pylist()
    cells[0] = {"bytes": None, "path": str(image_file)}
    table = table.set_column(
        table.schema.get_field_index("image"), "image", pa.array(cells, type=table.schema.field("image").type)
    )
    pq.write_table(table, shard)
    return folder


def _png(path, value: int) -> None:
    Image.fromarray(np.full((20, 24, 3), value, dtype=np.uint8)).save(path)


def test_an_image_path_outside_the_dataset_folder_is_refused(tmp_path, tiny_clip_dir, capsys):
    outside = tmp_path / "secret.png"
    _png(outside, 200)
    folder = _folder_naming(tmp_path, outside)
    with pytest.raises(UserInputError, match=r"row 0, field 'image'.*outside the dataset folder"):
        load_local_split(folder, "attributes", "test")
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_clip_dir),
                "--dataset",
                str(folder),
                "--output",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "secret.png" in capsys.readouterr().err
    dotdot = _folder_naming(tmp_path / "b", "data/../../secret.png")
    with pytest.raises(UserInputError, match="row 0"):
        load_local_split(dotdot, "attributes", "test")


def test_an_image_inside_the_folder_is_part_of_the_digest_and_a_change_is_scored_again(
    tmp_path, tiny_clip_dir
):
    folder = tmp_path / "data"
    folder.mkdir()
    inside = folder / "images" / "a.png"
    inside.parent.mkdir()
    _png(inside, 10)
    _folder_naming(tmp_path, inside.resolve())
    _, before = load_local_split(folder, "attributes", "test")
    logs: list[str] = []
    evaluate_model(
        str(tiny_clip_dir),
        str(folder),
        ["attributes"],
        output_dir=tmp_path / "out",
        progress=False,
        log=logs.append,
    )
    _png(inside, 250)
    _, after = load_local_split(folder, "attributes", "test")
    assert before["sha256"] != after["sha256"]
    logs.clear()
    evaluate_model(
        str(tiny_clip_dir),
        str(folder),
        ["attributes"],
        output_dir=tmp_path / "out",
        progress=False,
        log=logs.append,
    )
    assert not any("reusing" in line for line in logs), logs
    logs.clear()
    evaluate_model(
        str(tiny_clip_dir),
        str(folder),
        ["attributes"],
        output_dir=tmp_path / "out",
        progress=False,
        log=logs.append,
    )
    assert any("reusing" in line for line in logs), logs  # unchanged: reused, so the check above can fail
