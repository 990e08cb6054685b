"""`--output` folders are transactions: one writer at a time, partial runs beside full ones, one dataset each."""

import json
import os
import threading

import numpy as np
import pytest

from hf_hardpos import output_folder
from hf_hardpos.evaluation.run import evaluate_model
from tests.support.eval_data import write_attributes_relations_folder


def _quiet(**kwargs):
    return dict(progress=False, log=lambda message: None, batch_size=4, **kwargs)


def _saved(out):
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture()
def hub_folder(tmp_path):
    return write_attributes_relations_folder(tmp_path / "replace")


def test_concurrent_runs_into_one_output_keep_both_configs(tiny_clip_dir, hub_folder, tmp_path):
    alone = {
        config: evaluate_model(str(tiny_clip_dir), str(hub_folder), [config], **_quiet()).results[config]
        for config in ("attributes", "relations")
    }
    out = tmp_path / "shared"
    errors = []

    def run(config):
        try:
            evaluate_model(str(tiny_clip_dir), str(hub_folder), [config], output_dir=out, **_quiet())
        except Exception as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(c,)) for c in ("attributes", "relations")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    saved = _saved(out)
    assert set(saved["results"]) == {"attributes", "relations"}
    for config, metrics in alone.items():
        assert saved["results"][config] == metrics
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".") and "tmp" in p.name) == []


def test_a_second_run_waits_for_the_lock_holder(tiny_clip_dir, hub_folder, tmp_path):
    out = tmp_path / "out"
    messages = []
    with output_folder.locked(out):
        worker = threading.Thread(
            target=evaluate_model,
            args=(str(tiny_clip_dir), str(hub_folder), ["attributes"]),
            kwargs=dict(output_dir=out, progress=False, log=messages.append),
        )
        worker.start()
        worker.join(timeout=3)
        assert worker.is_alive()  # blocked on the lock, wrote nothing
        assert not (out / "metrics.json").exists()
        assert any(m.startswith("waiting") for m in messages)
    worker.join()
    assert list(_saved(out)["results"]) == ["attributes"]


def test_max_rows_run_goes_beside_a_full_result(tiny_clip_dir, hub_folder, tmp_path):
    out = tmp_path / "out"
    full = evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, **_quiet())
    before = (out / "metrics.json").read_bytes()
    partial = evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, max_rows=3, **_quiet())
    assert (out / "metrics.json").read_bytes() == before
    assert partial.output_dir == str(out / "max-rows-3")
    beside = _saved(out / "max-rows-3")
    assert beside["results"]["attributes"]["num_examples"] == 3
    assert (
        _saved(out)["results"]["attributes"]["num_examples"]
        == full.results["attributes"]["num_examples"]
        == 8
    )


def test_full_run_replaces_a_partial_one(tiny_clip_dir, hub_folder, tmp_path):
    out = tmp_path / "out"
    evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, max_rows=3, **_quiet())
    report = evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, **_quiet())
    assert report.output_dir == str(out)
    assert _saved(out)["results"]["attributes"]["num_examples"] == 8


def test_second_dataset_never_reports_the_first_ones_configs(tiny_clip_dir, tmp_path):
    first = write_attributes_relations_folder(tmp_path / "A", seeds=(0, 1))
    second = write_attributes_relations_folder(tmp_path / "B", seeds=(5, 6))
    out = tmp_path / "out"
    evaluate_model(str(tiny_clip_dir), str(first), output_dir=out, **_quiet())
    messages = []
    report = evaluate_model(
        str(tiny_clip_dir),
        str(second),
        ["attributes"],
        output_dir=out,
        progress=False,
        log=messages.append,
        batch_size=4,
    )
    assert list(report.results) == ["attributes"]
    saved = _saved(out)
    assert list(saved["results"]) == ["attributes"]
    assert saved["provenance"]["attributes"]["source"] == str(second.resolve())
    alone = evaluate_model(str(tiny_clip_dir), str(second), ["attributes"], **_quiet())
    assert saved["results"]["attributes"] == alone.results["attributes"]
    assert all(str(second.resolve()) in line for line in report.data_lines() if line.startswith("data:"))
    assert any("relations" in m and "dropped" in m for m in messages)


def test_result_keys_name_package_and_metric_definition_versions(
    tiny_clip_dir, hub_folder, tmp_path, monkeypatch
):
    from hf_hardpos import __version__
    from hf_hardpos.evaluation import definitions, runner

    out = tmp_path / "out"
    evaluate_model(str(tiny_clip_dir), str(hub_folder), ["attributes"], output_dir=out, **_quiet())
    versions = _saved(out)["run"]["settings"]["versions"]
    assert versions == {
        "hf_hardpos": __version__,
        "metric_definitions": definitions.METRIC_DEFINITIONS_VERSION,
        "result_layout": definitions.RESULT_LAYOUT_VERSION,
    }
    monkeypatch.setattr(
        runner, "RESULT_VERSIONS", {**versions, "metric_definitions": versions["metric_definitions"] + 1}
    )
    messages = []
    evaluate_model(
        str(tiny_clip_dir),
        str(hub_folder),
        ["attributes"],
        output_dir=out,
        progress=False,
        log=messages.append,
    )
    assert any("recomputing" in m for m in messages)


def test_atomic_write_leaves_no_partial_file_on_failure(tmp_path):
    target = tmp_path / "metrics.json"
    output_folder.write_json(target, {"a": 1})
    with pytest.raises(TypeError):
        output_folder.write_json(target, {"a": np.float32})  # not JSON-able: the old file stays
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_resume_says_what_it_reused(tiny_clip_dir, hub_folder, tmp_path):
    out = tmp_path / "out"
    evaluate_model(str(tiny_clip_dir), str(hub_folder), ["attributes"], output_dir=out, **_quiet())
    messages = []
    evaluate_model(
        str(tiny_clip_dir),
        str(hub_folder),
        ["attributes", "relations"],
        output_dir=out,
        progress=False,
        log=messages.append,
        batch_size=4,
    )
    assert [m.split(":")[0] for m in messages if "reusing" in m] == ["attributes"]


def test_another_models_output_is_refused_not_merged(tiny_clip_dir, hub_folder, tmp_path):
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

    other = build_tiny_clip(tmp_path / "other_model", seed=3)
    out = tmp_path / "out"
    evaluate_model(str(tiny_clip_dir), str(hub_folder), ["attributes"], output_dir=out, **_quiet())
    before = (out / "metrics.json").read_bytes()
    with pytest.raises(UserInputError, match="another model"):
        evaluate_model(str(other), str(hub_folder), ["relations"], output_dir=out, **_quiet())
    assert (out / "metrics.json").read_bytes() == before
    replaced = evaluate_model(
        str(other), str(hub_folder), ["relations"], output_dir=out, resume=False, **_quiet()
    )
    assert list(_saved(out)["results"]) == ["relations"] and replaced.run["model_identity"]["path"] == str(
        other.resolve()
    )


def test_the_folder_lock_is_a_filelock_held_across_processes_and_names_its_holder(tmp_path):
    """`filelock` (portable, no hand-written fcntl): another process's FileLock on the same file times out while
    a run holds the folder, the holder's pid is written beside the lock, and the lock is free afterwards."""
    import subprocess
    import sys

    from filelock import FileLock

    out = tmp_path / "out"
    probe = (
        "import sys\nfrom filelock import FileLock, Timeout\n"
        "try:\n    FileLock(sys.argv[1], timeout=0).acquire()\n    print('free')\n"
        "except Timeout:\n    print('held')\n"
    )
    with output_folder.locked(out):
        seen = subprocess.run(
            [sys.executable, "-c", probe, str(out / output_folder.LOCK_NAME)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        holder = output_folder.holder_path(out / output_folder.LOCK_NAME).read_text()
    assert seen == "held"
    assert holder.split()[:2] == ["pid", str(os.getpid())]
    lock = FileLock(str(out / output_folder.LOCK_NAME), timeout=0)
    lock.acquire()  # released at the end of the block
    lock.release()
