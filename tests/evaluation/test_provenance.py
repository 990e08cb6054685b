"""`hardpos eval` never reuses stale scores, records how every number was obtained, and fails early."""

import json
import shutil

import pytest
from datasets import Dataset

from hf_hardpos.cli import main
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import make_eval_set, write_attributes_relations_folder


@pytest.fixture()
def hub_folder(tmp_path):
    return write_attributes_relations_folder(tmp_path / "replace")


def test_metrics_json_records_how_the_numbers_were_obtained(tiny_clip_dir, hub_folder, tmp_path):
    out = tmp_path / "eval"
    evaluate_model(
        str(tiny_clip_dir),
        str(hub_folder),
        output_dir=out,
        batch_size=5,
        bootstrap_samples=20,
        progress=False,
        log=lambda m: None,
    )
    saved = json.loads((out / "metrics.json").read_text())
    run = saved["run"]
    assert run["settings"]["precision"] == "fp32" and run["settings"]["device"] == "cpu"
    assert run["settings"]["batch_size"] == 5 and run["settings"]["max_length"] == 77
    assert {"torch", "transformers", "datasets", "hf_hardpos"} <= set(run["environment"])
    assert len(run["model_identity"]["sha256"]) == 64
    for config in ("attributes", "relations"):
        prov = saved["provenance"][config]
        assert len(prov["dataset"]["sha256"]) == 64 and prov["split"] == "test"
        assert prov["truncation"]["truncated_captions"] == 0
        assert "over images" in prov["interval"]
    assert "strict" in saved["metric_definitions"]["tie_rule"]


def test_replacing_the_model_at_the_same_path_recomputes(hub_folder, tmp_path):
    model_dir = build_tiny_clip(tmp_path / "model", seed=0)
    out = tmp_path / "eval"
    messages = []
    first = evaluate_model(
        str(model_dir), str(hub_folder), output_dir=out, progress=False, log=messages.append
    )
    shutil.rmtree(model_dir)
    build_tiny_clip(model_dir, seed=1)
    second = evaluate_model(
        str(model_dir), str(hub_folder), output_dir=out, progress=False, log=messages.append
    )
    fresh = evaluate_model(str(model_dir), str(hub_folder), progress=False)
    assert second.results == fresh.results
    assert second.results != first.results
    assert any("recomputing" in m and "model changed" in m for m in messages)
    assert json.loads((out / "metrics.json").read_text())["results"] == fresh.results


def test_configs_evaluated_one_by_one_are_merged(tiny_clip_dir, hub_folder, tmp_path):
    out = tmp_path / "eval"
    for config in ("attributes", "relations"):
        assert (
            main(
                [
                    "eval",
                    "--model",
                    str(tiny_clip_dir),
                    "--dataset",
                    str(hub_folder),
                    "--config",
                    config,
                    "--output",
                    str(out),
                    "--no-progress",
                ]
            )
            == 0
        )
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved["results"]) == {"attributes", "relations"}
    assert "pooled(attributes,relations)" in saved["aggregates"]


def test_local_datasets_are_read_by_content_not_by_folder_name(tiny_clip_dir, tmp_path):
    """Two folders with the same name and README but different rows must not share `datasets`' cache."""
    a = write_attributes_relations_folder(tmp_path / "a" / "replace", seeds=(0, 1))
    b = write_attributes_relations_folder(tmp_path / "b" / "replace", seeds=(2, 3))
    assert (a / "README.md").read_text() == (b / "README.md").read_text()
    result_a = evaluate_model(str(tiny_clip_dir), str(a), progress=False)
    result_b = evaluate_model(str(tiny_clip_dir), str(b), progress=False)
    assert result_a.results != result_b.results
    # Rebuilt in place with other rows: the new rows are read.
    write_attributes_relations_folder(a, seeds=(2, 3))
    assert evaluate_model(str(tiny_clip_dir), str(a), progress=False).results == result_b.results


def test_in_memory_dataset_is_keyed_by_fingerprint(tiny_clip_dir, tmp_path):
    out = tmp_path / "eval"
    first = evaluate_model(str(tiny_clip_dir), make_eval_set(seed=0), output_dir=out, progress=False)
    second = evaluate_model(
        str(tiny_clip_dir), make_eval_set(seed=5), output_dir=out, progress=False, log=lambda m: None
    )
    assert first.results != second.results


def _run_cli(capsys, *args):
    code = main(["eval", *args, "--no-progress"])
    captured = capsys.readouterr()
    return code, captured.err.strip()


def test_missing_model_is_one_line_and_exit_2(hub_folder, tmp_path, capsys):
    code, err = _run_cli(capsys, "--model", str(tmp_path / "no-such-model"), "--dataset", str(hub_folder))
    assert code == 2 and err.count("\n") == 0
    assert "model not found" in err and "Traceback" not in err


def test_not_a_dual_encoder_is_named(hub_folder, tmp_path, capsys):
    from transformers import BertConfig, BertModel

    folder = tmp_path / "bert"
    BertModel(
        BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    ).save_pretrained(folder)
    code, err = _run_cli(capsys, "--model", str(folder), "--dataset", str(hub_folder))
    assert code == 2 and "not a dual encoder (needs get_image_features/get_text_features)" in err


def test_unwritable_output_fails_before_scoring(tiny_clip_dir, hub_folder, tmp_path, capsys, monkeypatch):
    from hf_hardpos.model_source import ModelSource

    monkeypatch.setattr(ModelSource, "load", lambda self, *args: pytest.fail("model loaded"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, err = _run_cli(
        capsys, "--model", str(tiny_clip_dir), "--dataset", str(hub_folder), "--output", str(blocker / "eval")
    )
    assert code == 2 and "not writable" in err and str(blocker) in err


def test_empty_split_and_bad_batch_size_are_clear(tiny_clip_dir, tmp_path, capsys):
    root = tmp_path / "empty"
    (root / "data").mkdir(parents=True)
    Dataset.from_dict({"image": [], "caption": [], "hard_negative": [], "hard_positive": []}).to_parquet(
        str(root / "data" / "test.parquet")
    )
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test.parquet\n---\n"
    )
    code, err = _run_cli(capsys, "--model", str(tiny_clip_dir), "--dataset", str(root))
    assert code == 2 and "no rows" in err and "default" in err
    code, err = _run_cli(capsys, "--model", str(tiny_clip_dir), "--dataset", str(root), "--batch-size", "0")
    assert code == 2 and "--batch-size must be >= 1" in err


def test_embedding_cache_encodes_each_input_once_across_runs(
    tiny_clip_dir, hub_folder, tmp_path, monkeypatch
):
    from transformers import CLIPModel

    calls = {"image": 0, "text": 0}
    real_image, real_text = CLIPModel.get_image_features, CLIPModel.get_text_features

    def count_image(self, *a, **k):
        calls["image"] += 1
        return real_image(self, *a, **k)

    def count_text(self, *a, **k):
        calls["text"] += 1
        return real_text(self, *a, **k)

    monkeypatch.setattr(CLIPModel, "get_image_features", count_image)
    monkeypatch.setattr(CLIPModel, "get_text_features", count_text)
    cache = tmp_path / "cache"
    first = evaluate_model(str(tiny_clip_dir), str(hub_folder), cache_dir=cache, progress=False)
    assert calls["image"] > 0 and calls["text"] > 0
    calls.update(image=0, text=0)
    second = evaluate_model(str(tiny_clip_dir), str(hub_folder), cache_dir=cache, progress=False)
    assert calls == {"image": 0, "text": 0}
    assert second.results == first.results
    # Another precision is another namespace: nothing is reused across settings.
    evaluate_model(str(tiny_clip_dir), str(hub_folder), cache_dir=cache, precision="bf16", progress=False)
    assert calls["image"] > 0


def test_missing_columns_are_named_before_the_model_loads(tiny_clip_dir, tmp_path, capsys, monkeypatch):
    from hf_hardpos.model_source import ModelSource

    monkeypatch.setattr(ModelSource, "load", lambda self, *args: pytest.fail("model loaded"))
    root = tmp_path / "incomplete"
    make_eval_set(num_images=2, rows_per_image=1).remove_columns("hard_positive").to_parquet(
        str(root / "data" / "test.parquet")
    )
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test.parquet\n---\n"
    )
    code, err = _run_cli(
        capsys, "--model", str(tiny_clip_dir), "--dataset", str(root), "--task", "hard_positive"
    )
    assert code == 2 and "lacks column(s) ['hard_positive']" in err and "default" in err
