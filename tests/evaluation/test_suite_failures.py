"""A suite runs every dataset, records each failure, says what group means miss, exits non-zero; bad groups
are refused before scoring."""

import json

import pytest
import yaml

from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite


def _quiet(**kwargs):
    return dict(batch_size=4, progress=False, log=lambda message: None, **kwargs)


def test_a_failing_dataset_is_recorded_and_the_rest_still_run(tiny_clip_dir, suite_folders, tmp_path):
    garbled = tmp_path / "garbled"
    (garbled / "data" / "x").mkdir(parents=True)
    (garbled / "data" / "x" / "test-00000-of-00001.parquet").write_bytes(b"not parquet")
    (garbled / "README.md").write_text(
        "---\nconfigs:\n- config_name: x\n  data_files:\n  - split: test\n    path: data/x/test-*.parquet\n---\n"
    )
    entries = [
        SuiteEntry("missing", str(tmp_path / "no" / "such")),
        SuiteEntry("cifar_a", str(suite_folders["cifar_a"]), group="mini-vtab"),
        SuiteEntry("broken", str(garbled), task="zeroshot_classification", group="mini-vtab"),
        SuiteEntry("replace", str(suite_folders["replace"])),
    ]
    out = tmp_path / "out"
    report = run_suite(str(tiny_clip_dir), entries, output_dir=out, **_quiet())
    assert list(report.sections) == ["missing", "cifar_a", "broken", "replace"]
    assert report.failed == ["missing", "broken"]
    assert report.sections["missing"].failed and report.sections["replace"].results
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["run"]["failed"] == ["missing", "broken"] and saved["run"]["complete"] is False
    mean = saved["group_means"]["mini-vtab"]
    assert mean["num_datasets"] == 1 and mean["missing"] == ["broken"]
    assert mean["value"] == report.sections["cifar_a"].results["all"]["acc1"]


def test_complete_suite_is_marked_complete(tiny_clip_dir, suite_folders, tmp_path):
    out = tmp_path / "out"
    report = run_suite(
        str(tiny_clip_dir), [SuiteEntry("cifar_b", str(suite_folders["cifar_b"]))], output_dir=out, **_quiet()
    )
    assert report.failed == []
    assert json.loads((out / "metrics.json").read_text())["run"]["complete"] is True


def test_group_mixing_tasks_is_refused_before_scoring(tiny_clip_dir, suite_folders, tmp_path, monkeypatch):
    from hf_hardpos.evaluation import suite

    monkeypatch.setattr(
        suite, "_run_entry", lambda *a, **k: pytest.fail("scored before the groups were checked")
    )
    entries = [
        SuiteEntry("cifar_a", str(suite_folders["cifar_a"]), group="g"),
        SuiteEntry("coco", str(suite_folders["coco"]), group="g"),
    ]
    with pytest.raises(UserInputError, match="mixes tasks"):
        run_suite(str(tiny_clip_dir), entries, output_dir=tmp_path / "out", **_quiet())
    with pytest.raises(UserInputError, match="no group metric"):
        run_suite(
            str(tiny_clip_dir),
            [SuiteEntry("r", str(suite_folders["replace"]), group="g")],
            output_dir=tmp_path / "out2",
            **_quiet(),
        )


def test_cli_exits_non_zero_after_running_everything(tiny_clip_dir, suite_folders, tmp_path, capsys):
    spec = tmp_path / "suite.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "datasets": [
                    {"name": "missing", "dataset": str(tmp_path / "nope")},
                    {"name": "cifar_b", "dataset": str(suite_folders["cifar_b"])},
                ]
            }
        )
    )
    code = main(
        [
            "eval",
            "--model",
            str(tiny_clip_dir),
            "--suite",
            str(spec),
            "--output",
            str(tmp_path / "o"),
            "--no-progress",
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "cifar_b" in captured.out and "FAILED" in captured.out
    assert captured.err.strip().splitlines()[-1].endswith("failed: missing")
