"""`hardpos eval --model FILE.pt`: a checkpoint is converted once, scored like any HF model, and named by its sha256.

Uses the tiny open_clip fixtures of tests/conversion/test_conversion.py (a DDP training checkpoint of a QuickGELU
config and its 528-token BPE) on generated hard-positive sets.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from datasets import Dataset

from hf_hardpos.cli import main
from hf_hardpos.conversion import resolve_model
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite
from hf_hardpos.provenance import sha256_file
from tests.support.caption_selection import make_selection_set
from tests.support.eval_data import write_attributes_relations_folder
from tests.support.paths import OPEN_CLIP_FIXTURES, QUICKGELU_JSON

CHECKPOINT = OPEN_CLIP_FIXTURES / "quickgelu_ddp.pt"
CHECKPOINT_SHA256 = sha256_file(CHECKPOINT, progress=False)


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    """A private conversion cache, so every test starts unconverted and never touches the user's."""
    folder = tmp_path / "converted"
    monkeypatch.setenv("HARDPOS_CONVERTED_CACHE", str(folder))
    return folder


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory) -> Path:
    return write_attributes_relations_folder(tmp_path_factory.mktemp("replace"))


def _eval(*argv: str) -> int:
    return main(["eval", *argv, "--batch-size", "4", "--no-progress"])


def _checkpoint_args(tokenizer: Path, activation: str | None = None) -> list[str]:
    args = [
        "--model",
        str(CHECKPOINT),
        "--open-clip-config",
        str(QUICKGELU_JSON),
        "--tokenizer",
        str(tokenizer),
    ]
    return args + (["--activation", activation] if activation else [])


def _scores(folder: Path, config: str) -> dict[str, np.ndarray]:
    table = Dataset.from_parquet(str(folder / f"scores-{config}.parquet"))
    return {k: np.asarray(table[k]) for k in ("original_score", "negative_score", "positive_score")}


def test_checkpoint_scores_equal_the_converted_folder_and_provenance_names_it(
    tiny_tokenizer, hub_folder, cache, tmp_path, capsys
):
    out = tmp_path / "eval"
    assert (
        _eval(*_checkpoint_args(tiny_tokenizer, "gelu"), "--dataset", str(hub_folder), "--output", str(out))
        == 0
    )
    printed = capsys.readouterr().out
    assert f"sha256 {CHECKPOINT_SHA256[:12]}, hidden_act=gelu" in printed

    saved = json.loads((out / "metrics.json").read_text())
    assert saved["model"] == str(CHECKPOINT)
    origin = saved["run"]["model_identity"]["converted_from"]
    assert origin["checkpoint_sha256"] == CHECKPOINT_SHA256 and origin["activation"] == "gelu"
    assert origin["checkpoint"] == CHECKPOINT.name and "DDP" in origin["checkpoint_kind"]
    for config in ("attributes", "relations"):  # every config's resume key is built from that identity
        assert saved["provenance"][config]["key_parts"]["model"]["converted_from"] == origin

    folder = Path(
        resolve_model(
            CHECKPOINT, QUICKGELU_JSON, "gelu", tokenizer=tiny_tokenizer, cache_dir=cache, progress=False
        )
    )
    assert saved["run"]["model_identity"]["path"] == str(folder.resolve())
    direct = evaluate_model(
        str(folder), str(hub_folder), output_dir=tmp_path / "direct", batch_size=4, progress=False
    )
    assert direct.run["model_identity"]["converted_from"] == origin  # a `hardpos convert` folder names it too
    for config in ("attributes", "relations"):
        assert saved["results"][config] == pytest.approx(direct.results[config])
        ours, theirs = _scores(out, config), _scores(tmp_path / "direct", config)
        for column in ours:
            np.testing.assert_array_equal(ours[column], theirs[column])


def test_activation_both_prints_both_side_by_side_and_reruns_without_converting(
    tiny_tokenizer, hub_folder, cache, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "eval"
    argv = [*_checkpoint_args(tiny_tokenizer, "both"), "--dataset", str(hub_folder), "--output", str(out)]
    assert _eval(*argv) == 0
    printed = capsys.readouterr().out
    saved = {a: json.loads((out / a / "metrics.json").read_text()) for a in ("quick_gelu", "gelu")}
    for activation, report in saved.items():
        origin = report["run"]["model_identity"]["converted_from"]
        assert (origin["activation"], origin["checkpoint_sha256"]) == (activation, CHECKPOINT_SHA256)
        assert f"model [{activation}]: {CHECKPOINT} " in printed and f"hidden_act={activation}" in printed
    assert not (out / "metrics.json").exists()  # one folder per activation, not a mixed one

    rows = {
        line.split("]")[0] + "]": line for line in printed.splitlines() if line.startswith("attributes [")
    }
    assert list(rows) == ["attributes [quick_gelu]", "attributes [gelu]", "attributes [gelu - quick_gelu]"]
    quick, gelu = (saved[a]["results"]["attributes"] for a in ("quick_gelu", "gelu"))
    assert quick["mean_original_score"] != gelu["mean_original_score"]  # the activation matters here
    for label, metrics in (("attributes [quick_gelu]", quick), ("attributes [gelu]", gelu)):
        assert f"{metrics['mean_original_score']:.4f}" in rows[label]
    difference = gelu["mean_original_score"] - quick["mean_original_score"]
    assert rows["attributes [gelu - quick_gelu]"].split()[-3] == f"{difference:.4f}"
    assert "[gelu - quick_gelu] rows: gelu minus quick_gelu" in printed
    assert "pooled(attributes,relations) [gelu - quick_gelu]" in printed

    def fail(*args, **kwargs):
        raise AssertionError("converted or scored again")

    monkeypatch.setattr("hf_hardpos.conversion.cache.convert_checkpoint", fail)
    monkeypatch.setattr("hf_hardpos.model_source.ModelSource.load", fail)
    assert _eval(*argv) == 0  # each activation resumes from its own folder, and says so
    rerun = capsys.readouterr().out.splitlines()
    reused = [line for line in rerun if "reusing the scores saved in" in line]
    assert sorted(line.split("]")[0] + "]" for line in reused) == [
        "[gelu]",
        "[gelu]",
        "[quick_gelu]",
        "[quick_gelu]",
    ]
    assert [line for line in rerun if line not in reused][:8] == printed.splitlines()[:8]


def test_suite_converts_once_per_activation_and_compares(tiny_tokenizer, hub_folder, cache, tmp_path, capsys):
    selection = tmp_path / "selection"
    make_selection_set(6, 1, seed=1).to_parquet(
        str(selection / "data" / "default" / "test-00000-of-00001.parquet")
    )
    (selection / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/default/test-*.parquet\n---\n"
    )
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "datasets": [
                    {"name": "replace", "dataset": str(hub_folder)},
                    {"name": "selection", "dataset": str(selection)},
                ]
            }
        )
    )
    out = tmp_path / "suite"
    assert _eval(*_checkpoint_args(tiny_tokenizer, "both"), "--suite", str(suite), "--output", str(out)) == 0
    printed = capsys.readouterr().out
    assert len(list(cache.iterdir())) == 2  # one converted folder per activation
    for activation in ("quick_gelu", "gelu"):
        saved = json.loads((out / activation / "metrics.json").read_text())
        assert saved["model"] == str(CHECKPOINT)
        assert saved["run"]["model_identity"]["converted_from"]["activation"] == activation
        assert set(saved["datasets"]) == {"replace", "selection"}
        inner = json.loads((out / activation / "replace" / "metrics.json").read_text())
        assert inner["model"] == str(CHECKPOINT)  # the user's checkpoint, not the conversion cache folder
        assert f"relations [{activation}]" in printed and f"default [{activation}]" in printed
        assert (
            f"[{activation}] [selection] caption_selection on" in printed
        )  # logs say which run they belong to
    assert "relations [gelu - quick_gelu]" in printed and "default [gelu - quick_gelu]" in printed
    assert "== replace (hard_positive;" in printed and "== selection (caption_selection;" in printed


def test_python_api_takes_the_same_options(tiny_tokenizer, hub_folder, cache, tmp_path):
    report = evaluate_model(
        str(CHECKPOINT),
        str(hub_folder),
        ["relations"],
        open_clip_config=QUICKGELU_JSON,
        tokenizer=tiny_tokenizer,
        batch_size=4,
        progress=False,
    )
    origin = report.run["model_identity"]["converted_from"]
    assert origin["activation"] == "quick_gelu"  # the config's (tiny-quickgelu.json)
    assert f"sha256 {CHECKPOINT_SHA256[:12]}, hidden_act=quick_gelu" in report.table()
    suite = run_suite(
        str(CHECKPOINT),
        [SuiteEntry("replace", str(hub_folder), configs=["relations"])],
        output_dir=tmp_path / "suite",
        open_clip_config=QUICKGELU_JSON,
        tokenizer=tiny_tokenizer,
        batch_size=4,
        progress=False,
        log=lambda message: None,
    )
    assert suite.run["model_identity"] == report.run["model_identity"]  # the same cached conversion
    assert suite.sections["replace"].results["relations"] == pytest.approx(report.results["relations"])


def test_conversion_options_errors_are_one_line(
    tiny_tokenizer, tiny_clip_dir, hub_folder, cache, tmp_path, capsys
):
    dataset = ["--dataset", str(hub_folder)]
    cases = [  # argv, what the one-line message must say
        (
            ["--model", str(tiny_clip_dir), "--activation", "gelu"],
            "is not a checkpoint file: --activation applies only",
        ),
        (
            ["--model", str(tiny_clip_dir), "--tokenizer", str(tiny_tokenizer)],
            "not a checkpoint file: --tokenizer",
        ),
        (["--model", str(tiny_clip_dir), "--preset", "negclip"], "--preset applies to checkpoint files"),
        (["--model", str(CHECKPOINT), "--tokenizer", str(tiny_tokenizer)], "an open_clip config is required"),
        (
            ["--model", str(tmp_path / "missing.pt"), "--open-clip-config", "ViT-B-32"],
            "missing.pt: no such file",
        ),
        (["--model", str(CHECKPOINT), "--preset", "no-such-preset"], "unknown --preset 'no-such-preset'"),
    ]
    for argv, message in cases:
        assert _eval(*argv, *dataset) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)
    assert not cache.exists()  # nothing was converted on the way to any error
    with pytest.raises(UserInputError, match="open_clip config is required"):
        evaluate_model(str(CHECKPOINT), str(hub_folder), progress=False)


def test_preset_fills_config_and_the_papers_activation(tiny_tokenizer, hub_folder, cache, tmp_path, capsys):
    """negclip's preset: open_clip ViT-B-32, evaluated with GELU; an explicit config still wins over the preset's."""
    argv = [
        "--model",
        str(CHECKPOINT),
        "--preset",
        "negclip",
        "--open-clip-config",
        str(QUICKGELU_JSON),
        "--tokenizer",
        str(tiny_tokenizer),
        "--dataset",
        str(hub_folder),
        "--config",
        "relations",
    ]
    assert _eval(*argv) == 0
    assert "hidden_act=gelu" in capsys.readouterr().out
