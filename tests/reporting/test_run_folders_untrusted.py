"""Hand-edited or damaged run folders: `compare` and `report` say what is wrong in one line naming the file
and the field (`reporting.runs` schema checks), never a traceback, never a NaN taken for a figure."""

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hf_hardpos.cli import main
from hf_hardpos.evaluation.run import evaluate_model
from tests.support.eval_data import make_eval_set, write_hub_folder


@pytest.fixture(scope="module")
def run_folder(tiny_clip_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    hub = write_hub_folder(root / "repo", {"attributes": make_eval_set(num_images=3, rows_per_image=2, seed=1)})
    evaluate_model(str(tiny_clip_dir), str(hub), output_dir=root / "run", progress=False, log=lambda m: None)
    return root / "run"


def _edited(run_folder, tmp_path, edit):
    copy = tmp_path / "run"
    shutil.copytree(run_folder, copy)
    metrics = json.loads((copy / "metrics.json").read_text())
    edit(metrics, copy)
    (copy / "metrics.json").write_text(json.dumps(metrics))
    return copy


def _set(path: str, value):
    def edit(metrics, folder):
        *parents, last = path.split(".")
        target = metrics
        for key in parents:
            target = target[key]
        target[last] = value
    return edit


def _replace_scores(table):
    def edit(metrics, folder):
        if table is None:
            (folder / "scores-attributes.parquet").write_text("not parquet")
        else:
            pq.write_table(table(pq.read_table(folder / "scores-attributes.parquet")), folder / "scores-attributes.parquet")
    return edit


EDITS = {
    "rate as text": (_set("results.attributes.brittleness", "0.25"), "results.attributes.brittleness"),
    "rate NaN": (_set("results.attributes.brittleness", float("nan")), "results.attributes.brittleness"),
    "rate inf": (_set("results.attributes.original_accuracy", float("inf")), "results.attributes.original_accuracy"),
    "results a list": (_set("results", [1, 2]), "field results"),
    "run text": (_set("run", "x"), "field run"),
    "model a number": (_set("model", 5), "field model"),
    "config a path": (lambda m, f: m["results"].update({"../x": m["results"].pop("attributes")}), "../x"),
    "scores not parquet": (_replace_scores(None), "scores-attributes.parquet"),
    "scores column dropped": (_replace_scores(lambda t: t.drop_columns(["brittle"])), "'brittle'"),
    "scores column text": (_replace_scores(lambda t: t.set_column(
        t.column_names.index("brittle"), "brittle", pa.array(["yes"] * t.num_rows))), "'brittle'"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_an_edited_run_folder_is_one_line(run_folder, tmp_path, capsys, name):
    edit, field = EDITS[name]
    folder = _edited(run_folder, tmp_path, edit)
    for argv in (["compare", str(folder), str(run_folder)], ["report", str(folder), "--output", str(tmp_path / "r.html")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err, err


@pytest.mark.parametrize("history, field", [
    ("x", "log_history"), ([1], "log_history[0]"), ([{"loss": 1.0}], "log_history[0].step"),
    ([{"loss": 1.0, "step": "3"}], "log_history[0].step"),
])
def test_a_malformed_log_history_is_one_line(tmp_path, capsys, history, field):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "trainer_state.json" in err and field in err


def test_report_fetches_the_hub_dataset_a_run_names_only_when_asked(run_folder, tmp_path, monkeypatch):
    import datasets

    def hub_named(metrics, folder):
        metrics["provenance"]["attributes"]["dataset"] = {"hub_id": "someone/anything", "revision": "0" * 40}

    folder = _edited(run_folder, tmp_path, hub_named)
    fetched = []

    def load_dataset(name, *args, **kwargs):
        fetched.append(name)
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    assert main(["report", str(folder), "--output", str(tmp_path / "r.html")]) == 0
    assert fetched == [] and "--fetch-data" in (tmp_path / "r.html").read_text()
    assert main(["report", str(folder), "--output", str(tmp_path / "r.html"), "--fetch-data"]) == 0
    assert fetched == ["someone/anything"]
