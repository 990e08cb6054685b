"""Several models in one `hardpos eval` run (`evaluation.multi_model`) and shared decoded pixels (`pixel_store`).

Each model's outputs must equal those of a run of that model alone; models with the same image
processor decode each image once; a pixel folder serves a later run and respects its bound.
"""

import json

import pyarrow.parquet as pq
import pytest
import torch
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.cli import main
from hf_hardpos.evaluation.multi_model import evaluate_models, expand_models, folder_names, model_list
from hf_hardpos.pixel_store import PixelStore, SharedPixelScorer
from hf_hardpos.scoring import ITMScorer
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import make_eval_set, write_hub_folder
from tests.support.paths import REPO

CONFIGS = ("attributes", "relations")


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory):
    """Two configs sharing no images, laid out as a Hub dataset repo (parquet + README configs)."""
    sets = {
        config: make_eval_set(num_images=4 + seed, rows_per_image=2, seed=seed)
        for seed, config in enumerate(CONFIGS)
    }
    return write_hub_folder(tmp_path_factory.mktemp("replace_repo"), sets)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Three tiny CLIPs: two share their image processor (32 px), the third resizes to 16 px."""
    root = tmp_path_factory.mktemp("models")
    return [
        build_tiny_clip(root / "a", seed=1),
        build_tiny_clip(root / "b", seed=2),
        build_tiny_clip(root / "c", seed=3, image_size=16),
    ]


def _eval(*args) -> int:
    return main(["eval", *args, "--batch-size", "3", "--no-progress"])


def _same_outputs(alone, together) -> None:
    """metrics.json (results, provenance with its keys, aggregates) and per-row scores equal."""
    a, b = (
        json.loads((alone / "metrics.json").read_text()),
        json.loads((together / "metrics.json").read_text()),
    )
    for part in ("results", "aggregates", "provenance", "model", "dataset"):
        assert a[part] == b[part], part
    assert a["run"]["key"] == b["run"]["key"] and a["run"]["settings"] == b["run"]["settings"]
    for config in CONFIGS:
        assert pq.read_table(alone / f"scores-{config}.parquet").equals(
            pq.read_table(together / f"scores-{config}.parquet")
        )


def test_several_models_equal_separate_runs_and_resume_per_model(
    models, hub_folder, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "sweep"
    assert (
        _eval(
            *(x for m in models for x in ("--model", str(m))),
            "--dataset",
            str(hub_folder),
            "--output",
            str(out),
        )
        == 0
    )
    # What the run says it spent is what `benchmarks/eval_floor.py` reads beside the whole-run times.
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from eval_floor import after_first_model, own_clock

    printed = capsys.readouterr().out
    clock = own_clock(printed)
    assert clock["later_models_s"] > 0 and clock["table_s"] >= 0
    # Its lines as `timed_lines` gives them, one arriving each second: the time after the first model is
    # counted from the line saying model `a` is done.
    lines = [(float(i), line) for i, line in enumerate(printed.splitlines(keepends=True))]
    done_a = next(i for i, (_, line) in enumerate(lines) if line.startswith("[a] done in "))
    assert done_a > 0 and after_first_model(len(lines), lines, len(models)) == len(lines) - done_a
    assert sorted(p.name for p in out.iterdir()) == ["a", "b", "c"]
    for model in models:
        alone = tmp_path / f"alone-{model.name}"
        assert _eval("--model", str(model), "--dataset", str(hub_folder), "--output", str(alone)) == 0
        _same_outputs(alone, out / model.name)
    # A second sweep with one more model reuses what the first saved, model by model.
    saved = {m.name: (out / m.name / "scores-attributes.parquet").stat().st_mtime_ns for m in models}
    extra = build_tiny_clip(tmp_path / "d", seed=4)
    assert (
        _eval(
            *(x for m in [*models, extra] for x in ("--model", str(m))),
            "--dataset",
            str(hub_folder),
            "--output",
            str(out),
        )
        == 0
    )
    assert {m.name: (out / m.name / "scores-attributes.parquet").stat().st_mtime_ns for m in models} == saved
    assert json.loads((out / "d" / "metrics.json").read_text())["results"].keys() == set(CONFIGS)


def _scorer(folder, cls=ITMScorer, **kwargs):
    model, processor = CLIPModel.from_pretrained(folder), CLIPProcessor.from_pretrained(folder)
    return cls(model, processor, batch_size=3, progress=False, **kwargs)


def test_models_with_one_image_processor_decode_each_image_once(models):
    dataset = make_eval_set(num_images=5, rows_per_image=2, seed=7)
    store = PixelStore()
    for index, folder in enumerate(models):
        shared = _scorer(folder, SharedPixelScorer, pixels=store).embed_images(dataset)
        alone = _scorer(folder).embed_images(dataset)
        assert torch.equal(shared[0], alone[0]) and (shared[1] == alone[1]).all()
        if index == 1:  # b shares a's processor: every image came from memory
            assert (store.stats.decoded, store.stats.from_memory) == (5, 5)
    assert (store.stats.decoded, store.stats.from_memory) == (10, 5)  # c's 16 px pixels are another group


def test_pixel_folder_serves_a_later_run_within_its_bound(models, tmp_path):
    dataset = make_eval_set(num_images=6, rows_per_image=1, seed=3)
    first = PixelStore(tmp_path / "pixels")
    expected = _scorer(models[0], SharedPixelScorer, pixels=first).embed_images(dataset)[0]
    files, used = first.disk_usage()
    assert (files, first.stats.written) == (6, 6) and used > 0
    later = PixelStore(tmp_path / "pixels")  # a new run: nothing in memory, everything on disk
    assert torch.equal(
        _scorer(models[1], SharedPixelScorer, pixels=later).embed_images(dataset)[0],
        _scorer(models[1]).embed_images(dataset)[0],
    )
    assert (later.stats.decoded, later.stats.from_disk) == (0, 6)
    reread = PixelStore(tmp_path / "pixels")
    assert torch.equal(
        _scorer(models[0], SharedPixelScorer, pixels=reread).embed_images(dataset)[0], expected
    )

    bound = used // 6 * 2 + 100  # room for two images' files
    small = PixelStore(tmp_path / "small", max_disk_bytes=bound)
    _scorer(models[0], SharedPixelScorer, pixels=small).embed_images(dataset)
    assert small.disk_usage()[1] <= bound
    assert (small.stats.written, small.stats.not_written_full) == (2, 4)


def test_folder_names_tell_models_apart():
    names = folder_names(["/x/a/model", "/y/b/model", "openai/clip-vit-base-patch32", "tiny"])
    assert names == {
        "/x/a/model": "a__model",
        "/y/b/model": "b__model",
        "openai/clip-vit-base-patch32": "clip-vit-base-patch32",
        "tiny": "tiny",
    }
    assert len(set(folder_names(["m", "./m"]).values())) == 2


def test_each_model_records_the_seconds_it_took_and_a_failure_none(tmp_path):
    """A sweep says what each model cost (`ModelOutcome.seconds`, also logged); a failed model has no figure."""
    import time

    def run_one(model, folder, log):
        time.sleep(0.05 if model == "slow" else 0)
        if model == "broken":
            raise ValueError("no such weights")
        return {"model": model}

    lines = []
    run = evaluate_models(["slow", "broken", "quick"], run_one, tmp_path, log=lines.append)
    seconds = {name: outcome.seconds for name, outcome in run.outcomes.items()}
    assert seconds["slow"] >= 0.05 > seconds["quick"] >= 0
    assert seconds["broken"] is None and run.failed == ["broken"]
    assert [line.startswith("[slow] done in") for line in lines].count(True) == 1


def test_model_lists_expand_to_zoo_rows():
    from hf_hardpos.conversion.presets import PRETRAINED_PRESETS, ROUTE_NONE

    table8, left = model_list("table8")
    assert table8 == [p.model for p in PRETRAINED_PRESETS.values() if p.route != ROUTE_NONE]
    assert len(left) == sum(p.route == ROUTE_NONE for p in PRETRAINED_PRESETS.values())
    table1, _ = model_list("table1")
    assert table1 == ["openai/clip-vit-base-patch32"]
    assert expand_models(["x", "openai/clip-vit-base-patch32"], ["table1"], log=lambda m: None) == [
        "x",
        "openai/clip-vit-base-patch32",
    ]


def test_refusals(models, hub_folder, tmp_path):
    many = [x for m in models[:2] for x in ("--model", str(m))]
    assert _eval(*many, "--dataset", str(hub_folder)) == 2  # no --output
    assert _eval("--dataset", str(hub_folder), "--output", str(tmp_path / "o")) == 2  # no model at all
    assert (
        _eval(*many, "--dataset", str(hub_folder), "--output", str(tmp_path / "o"), "--activation", "both")
        == 2
    )
    assert _eval("--model", str(models[0]), "--dataset", str(hub_folder), "--pixel-cache-max-gb", "1") == 2
    assert (
        _eval(
            "--model",
            str(models[0]),
            "--dataset",
            str(hub_folder),
            "--pixel-cache",
            str(tmp_path / "p"),
            "--pixel-cache-max-gb",
            "0",
        )
        == 2
    )


def test_several_models_on_a_suite_equal_separate_runs(models, hub_folder, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"datasets:\n  - {{name: rep, dataset: {hub_folder}}}\n")
    out = tmp_path / "sweep"
    assert (
        _eval(
            "--model", str(models[0]), "--model", str(models[2]), "--suite", str(suite), "--output", str(out)
        )
        == 0
    )
    for model in (models[0], models[2]):
        alone = tmp_path / f"alone-{model.name}"
        assert _eval("--model", str(model), "--suite", str(suite), "--output", str(alone)) == 0
        a, b = (json.loads((f / "metrics.json").read_text()) for f in (alone, out / model.name))
        assert a["datasets"]["rep"]["results"] == b["datasets"]["rep"]["results"]
        _same_outputs(alone / "rep", out / model.name / "rep")
