"""Hand-edited or damaged run folders: `compare` and `report` say what is wrong in one line naming the file
and the field (`reporting.runs` schema checks), never a traceback, never a NaN taken for a figure."""

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hf_hardpos.cli import main
from hf_hardpos.evaluation.run import evaluate_model
from tests.support.eval_data import make_eval_set, write_attributes_relations_folder, write_hub_folder


@pytest.fixture(scope="module")
def run_folder(tiny_clip_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    hub = write_hub_folder(
        root / "repo", {"attributes": make_eval_set(num_images=3, rows_per_image=2, seed=1)}
    )
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
            pq.write_table(
                table(pq.read_table(folder / "scores-attributes.parquet")),
                folder / "scores-attributes.parquet",
            )

    return edit


def _rows(change):  # the per-row scores with rows dropped or repeated, everything else as saved
    return _replace_scores(lambda t: pa.concat_tables(change(t)))


def _scores_nan(column: str, value: float):
    def nan(t):
        values = t.column(column).to_pylist()
        values[0] = value
        return t.set_column(t.column_names.index(column), column, pa.array(values))

    return _replace_scores(nan)


def _flipped_rate(
    metrics, folder
):  # a valid rate, but not the one the rows give (25.0 % where they say 75.0 %)
    row = metrics["results"]["attributes"]
    row["original_accuracy"] = 1 - row["original_accuracy"] if row["original_accuracy"] != 0.5 else 0.0
    row.pop("original_accuracy_ci_low"), row.pop("original_accuracy_ci_high")


EDITS = {
    "rate as text": (_set("results.attributes.brittleness", "0.25"), "results.attributes.brittleness"),
    "rate NaN": (_set("results.attributes.brittleness", float("nan")), "results.attributes.brittleness"),
    "rate inf": (
        _set("results.attributes.original_accuracy", float("inf")),
        "results.attributes.original_accuracy",
    ),
    "results a list": (_set("results", [1, 2]), "field results"),
    "run text": (_set("run", "x"), "field run"),
    "model a number": (_set("model", 5), "field model"),
    "config a path": (lambda m, f: m["results"].update({"../x": m["results"].pop("attributes")}), "../x"),
    "scores not parquet": (_replace_scores(None), "scores-attributes.parquet"),
    "scores column dropped": (_replace_scores(lambda t: t.drop_columns(["brittle"])), "'brittle'"),
    "scores column text": (
        _replace_scores(
            lambda t: t.set_column(t.column_names.index("brittle"), "brittle", pa.array(["yes"] * t.num_rows))
        ),
        "'brittle'",
    ),
    "rate 500 %": (_set("results.attributes.original_accuracy", 5.0), "results.attributes.original_accuracy"),
    "rows negative": (_set("results.attributes.num_examples", -24), "results.attributes.num_examples"),
    "rows missing": (
        lambda m, f: m["results"]["attributes"].pop("num_examples"),
        "results.attributes.num_examples",
    ),
    "rows fractional": (_set("results.attributes.num_examples", 6.5), "results.attributes.num_examples"),
    "interval above its value": (
        lambda m, f: m["results"]["attributes"].update(
            brittleness=0.0, brittleness_ci_low=0.5, brittleness_ci_high=0.9
        ),
        "results.attributes.brittleness_ci_low",
    ),
    "provenance rows text": (_set("provenance.attributes.rows", "many"), "provenance.attributes.rows"),
    "rate edited in range": (_flipped_rate, "original_accuracy"),
    "scores row dropped": (_rows(lambda t: [t.slice(0, t.num_rows - 1)]), "num_examples"),
    "scores row duplicated": (_rows(lambda t: [t, t.slice(0, 1)]), "num_examples"),
    "scores NaN": (_scores_nan("original_score", float("nan")), "'original_score'"),
    "scores inf": (_scores_nan("negative_score", float("inf")), "'negative_score'"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_an_edited_run_folder_is_one_line(run_folder, tmp_path, capsys, name):
    edit, field = EDITS[name]
    folder = _edited(run_folder, tmp_path, edit)
    for argv in (
        ["compare", str(folder), str(run_folder)],
        ["compare", str(folder)],
        ["report", str(folder), "--output", str(tmp_path / "r.html")],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.fixture(scope="module")
def replace_folder(tiny_clip_dir, tmp_path_factory):
    """A REPLACE-layout run: two configs, the pooled column and macro mean among its aggregates."""
    root = tmp_path_factory.mktemp("replace_runs")
    hub = write_attributes_relations_folder(root / "repo")
    evaluate_model(str(tiny_clip_dir), str(hub), output_dir=root / "run", progress=False, log=lambda m: None)
    return root / "run"


POOLED = "pooled(attributes,relations)"
AGGREGATE_EDITS = {
    "method missing": (
        lambda m, f: m["aggregates"][POOLED]["aggregation"].pop("method"),
        "aggregation.method",
    ),
    "configs missing": (
        lambda m, f: m["aggregates"][POOLED]["aggregation"].pop("configs"),
        "aggregation.configs",
    ),
    "configs unknown": (
        _set(f"aggregates.{POOLED}.aggregation.configs", ["attributes", "other"]),
        "aggregation.configs",
    ),
    "aggregation rows text": (_set(f"aggregates.{POOLED}.aggregation.rows", "many"), "aggregation.rows"),
    "pooled edited": (
        lambda m, f: m["aggregates"][POOLED].update(
            brittleness=0.0, brittleness_ci_low=0.0, brittleness_ci_high=0.1
        ),
        "brittleness",
    ),
    "nested too deeply": (None, "metrics.json"),
}


@pytest.mark.parametrize("name", list(AGGREGATE_EDITS))
def test_an_edited_aggregate_is_one_line(replace_folder, tmp_path, capsys, name):
    edit, field = AGGREGATE_EDITS[name]
    if edit is None:
        folder = tmp_path / "run"
        shutil.copytree(replace_folder, folder)
        (folder / "metrics.json").write_text('{"results": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    else:
        folder = _edited(replace_folder, tmp_path, edit)
    for argv in (["compare", str(folder)], ["report", str(folder), "--output", str(tmp_path / "r.html")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err and str(folder / "metrics.json") in err, err


@pytest.mark.parametrize(
    "sections, field",
    [
        ([], "expected a JSON object"),
        ({"toy": 5}, "toy"),
        (
            {"toy": {"task": "hard_positive", "results": {"all": {"brittleness": 3}}}},
            "toy.results.all.brittleness",
        ),
        ({"toy": {"task": "hard_positive", "results": "x"}}, "toy.results"),
        ({"toy": {"task": "hard_positive", "step": "3"}}, "toy.step"),
    ],
)
def test_malformed_trainer_eval_sections_are_one_line(tmp_path, capsys, sections, field):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"loss": 1.0, "step": 1}]}))
    (tmp_path / "hardpos_eval_sections.json").write_text(json.dumps(sections))
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hardpos_eval_sections.json" in err and field in err, err


@pytest.mark.parametrize(
    "text", ["{not json", "[1, 2]", '{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}"]
)
def test_a_malformed_trainer_state_is_one_line(tmp_path, capsys, text):
    (tmp_path / "trainer_state.json").write_text(text)
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "trainer_state.json" in err, err


def _rate_099(metrics, folder):
    metrics["results"]["attributes"].update(
        original_accuracy=0.99, original_accuracy_ci_low=0.9, original_accuracy_ci_high=1.0
    )


@pytest.mark.parametrize(
    "edit", [_rate_099, _scores_nan("original_score", float("nan"))], ids=["rate", "nan score"]
)
def test_a_resumed_run_never_carries_an_edited_figure_forward(tiny_clip_dir, replace_folder, tmp_path, edit):
    """The campaign's case: attributes' rate edited to 0.99 was kept on resume, beside a pooled column
    recomputed from the rows (0.25) and a macro mean of the edited rate (0.62)."""
    folder = _edited(replace_folder, tmp_path, edit)
    hub = replace_folder.parent / "repo"  # the data the run scored
    lines: list[str] = []
    evaluate_model(str(tiny_clip_dir), str(hub), output_dir=folder, progress=False, log=lines.append)
    resumed = json.loads((folder / "metrics.json").read_text())
    fresh = json.loads((replace_folder / "metrics.json").read_text())
    assert resumed["results"] == fresh["results"] and resumed["aggregates"] == fresh["aggregates"]
    assert pq.read_table(folder / "scores-attributes.parquet").equals(
        pq.read_table(replace_folder / "scores-attributes.parquet")
    )
    assert any(line.startswith("attributes: ") and "recomputing" in line for line in lines), lines
    assert any(line.startswith("relations: reusing") for line in lines), lines


def test_names_reach_the_terminal_and_markdown_inert(run_folder, tmp_path, capsys):
    """A model name with an escape sequence, a line break and a `<script>`: printed escaped by compare's text
    output, and one cell of one row (HTML as entities) in its markdown."""
    name = "evil\x1b[2J\x9b31m\nrow two <script>alert(1)</script>"
    folder = _edited(run_folder, tmp_path, _set("model", name))
    capsys.readouterr()
    assert main(["compare", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\x9b" not in text and r"evil\x1b[2J\x9b31m\nrow two" in text
    assert main(["compare", str(folder), "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "<script>" not in markdown and "\x1b" not in markdown
    named = [line for line in markdown.splitlines() if "evil" in line]
    assert any(line.startswith("| ") for line in named)  # the table's row, and the caption's lines naming it
    assert all("row two &lt;script&gt;alert(1)&lt;/script&gt;" in line for line in named)
    assert not any(line.startswith("row two") for line in markdown.splitlines() + text.splitlines())
