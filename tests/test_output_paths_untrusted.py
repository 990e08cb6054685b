"""Every output path derived from a name stays under `--output` and is one name's alone; no command
writes over one of its own inputs (`output_folder`, `evaluation.suite`, `evaluation.multi_model`)."""

import json

import pyarrow.parquet as pq
import pytest

from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.multi_model import folder_names
from hf_hardpos.evaluation.suite import SuiteEntry, load_suite, run_suite
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import make_eval_set, write_hub_folder


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return write_hub_folder(
        tmp_path_factory.mktemp("repo"), {"attributes": make_eval_set(num_images=3, rows_per_image=2, seed=2)}
    )


def _suite(tmp_path, body: str):
    path = tmp_path / "suite.yaml"
    path.write_text(body)
    return path


@pytest.mark.parametrize("name", ["..", ".", "...", "", "metrics.json", "METRICS.JSON"])
def test_suite_entry_names_that_are_no_folder_of_their_own_are_refused(tmp_path, name):
    path = _suite(tmp_path, f"datasets:\n  - {{name: {json.dumps(name)}, dataset: d}}\n")
    with pytest.raises(UserInputError) as err:
        load_suite(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_suite_entries_sharing_a_folder_are_refused(tmp_path):
    for pair in (("x/y", "x y"), ("Rep", "rep")):
        path = _suite(
            tmp_path, "datasets:\n" + "".join(f"  - {{name: {json.dumps(n)}, dataset: d}}\n" for n in pair)
        )
        with pytest.raises(UserInputError, match="would share the folder"):
            load_suite(str(path))


def test_run_suite_refuses_a_dotdot_entry_before_writing_anything(tmp_path, tiny_clip_dir, hub):
    out = tmp_path / "deep" / "out"
    with pytest.raises(UserInputError, match="cannot name a folder"):
        run_suite(
            str(tiny_clip_dir),
            [SuiteEntry("..", str(hub))],
            output_dir=out,
            progress=False,
            log=lambda m: None,
        )
    assert not (tmp_path / "deep").exists()


def test_a_dotdot_suite_entry_on_the_command_line_is_one_line(tmp_path, tiny_clip_dir, hub, capsys):
    path = _suite(tmp_path, f"datasets:\n  - {{name: '..', dataset: {hub}}}\n")
    assert (
        main(["eval", "--model", str(tiny_clip_dir), "--suite", str(path), "--output", str(tmp_path / "o")])
        == 2
    )
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_suite_fields_of_the_wrong_type_are_refused_and_one_config_is_one_name(tmp_path):
    assert load_suite(str(_suite(tmp_path, "datasets:\n  - {dataset: d, configs: default}\n")))[
        0
    ].configs == ["default"]
    for field in (
        "configs: [../x]",
        "configs: [a, 3]",
        "text_only: 'yes'",
        "split: 3",
        "name: [a]",
        "dataset: 5",
        "task: {a: 1}",
    ):
        path = _suite(tmp_path, f"datasets:\n  - {{dataset: d, {field}}}\n")
        with pytest.raises(UserInputError) as err:
            load_suite(str(path))
        assert str(path) in str(err.value) and "datasets[0]" in str(err.value)


def test_folder_names_stay_inside_and_apart(tmp_path, monkeypatch):
    for name in ("m", "m-1", "sub/model"):
        (tmp_path / name).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "sub")
    names = folder_names(["../m", "../m/.", "../m-1", "..", ".", "...", "M"])
    assert len({n.casefold() for n in names.values()}) == len(names)
    assert all(n.strip(".") and "/" not in n for n in names.values())
    assert names["../m"] == "m" and names["../m-1"] == "m-1" and names[".."] == tmp_path.name


def test_m_dot_m_and_m_1_keep_their_own_results(tmp_path, hub, monkeypatch):
    build_tiny_clip(tmp_path / "m", seed=1)
    build_tiny_clip(tmp_path / "m-1", seed=2)
    monkeypatch.chdir(tmp_path)
    common = ["--dataset", str(hub), "--batch-size", "4", "--no-progress"]
    assert main(["eval", "--model", "m-1", "--output", "alone", *common]) == 0
    assert main(["eval", "--model", "m", "--model", "./m", "--model", "m-1", "--output", "out", *common]) == 0
    folders = {
        p.name: json.loads((p / "metrics.json").read_text())["model"]
        for p in (tmp_path / "out").iterdir()
        if p.is_dir()
    }
    assert folders == {"m": "m", "m-2": "./m", "m-1": "m-1"}
    alone = pq.read_table(tmp_path / "alone" / "scores-attributes.parquet")
    assert pq.read_table(tmp_path / "out" / "m-1" / "scores-attributes.parquet").equals(alone)
    assert not pq.read_table(tmp_path / "out" / "m" / "scores-attributes.parquet").equals(alone)


def test_report_and_compare_never_write_over_their_inputs(tmp_path, tiny_clip_dir, hub, capsys):
    run = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_clip_dir),
                "--dataset",
                str(hub),
                "--output",
                str(run),
                "--no-progress",
            ]
        )
        == 0
    )
    before = (run / "metrics.json").read_bytes()
    capsys.readouterr()
    for argv in (
        ["report", str(run), "--output", str(run / "metrics.json")],
        ["report", str(run), "--output", str(run)],
        ["compare", str(run), "--format", "json", "--output", str(run / "scores-attributes.parquet")],
    ):
        assert main(argv) == 2, argv
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert (run / "metrics.json").read_bytes() == before
    assert (
        main(["compare", str(run), "--format", "csv", "--output", str(run / "table.csv")]) == 0
    )  # a new file
