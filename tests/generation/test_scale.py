"""Generation at scale: shards started one per machine (`--num-shards/--shard-index`, `--device-map auto`),
merged by a plain run, equal to one process; model files hashed once per (path, size, mtime)."""

import json
import os

import pytest

from hf_hardpos import provenance
from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import models
from hf_hardpos.generation.sharding import shard_path
from tests.support.llm import CAPTIONS, tiny_llama
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def sampled_model_dir(tmp_path_factory):
    model, tokenizer = tiny_llama(sampled=True)
    path = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def _private_digest_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARDPOS_WEIGHT_DIGESTS", str(tmp_path / "digests.json"))


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_shards_run_one_per_machine_then_a_plain_run_merges_them(sampled_model_dir, tmp_path, capsys):
    """The multi-machine recipe of the README on one CPU: each "machine" runs its shard with --device-map
    auto, at its own batch size; a plain run merges. Sampled (the model's config samples), so equality
    with one process also shows the draws do not depend on the shard or the batch."""
    captions = tmp_path / "captions.txt"
    captions.write_text("\n".join(CAPTIONS) + "\n")
    common = ["generate", "--kind", "replace", "--input", str(captions), "--model", str(sampled_model_dir),
              "--max-new-tokens", "6", "--dtype", "float32", "--attn-implementation", "eager", "--seed", "2",
              "--no-progress"]  # fmt: skip
    one = tmp_path / "one.jsonl"
    assert main([*common, "--output", str(one), "--device", "cpu", "--batch-size", "4"]) == 0
    capsys.readouterr()
    sharded = tmp_path / "sharded.jsonl"
    for index, batch in ((0, "3"), (1, "2")):
        argv = [*common, "--output", str(sharded), "--device-map", "auto", "--batch-size", batch]
        assert main([*argv, "--num-shards", "2", "--shard-index", str(index)]) == 0
        assert json.loads(capsys.readouterr().out)["shard"] == str(shard_path(sharded, index, 2))
    assert not sharded.exists()
    assert main([*common, "--output", str(sharded), "--device", "cpu"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["adopted_from_shards"] == len(CAPTIONS) and summary["generated_rows"] == 0
    reference = _records(one)
    assert len({r["raw"] for r in reference}) > 3
    assert _records(sharded) == reference
    manifest = json.loads((tmp_path / "one.jsonl.manifest.json").read_text())
    assert (
        manifest["options"]["attn_implementation"] == "eager"
        and manifest["settings"]["attn_implementation"] == "eager"
    )
    assert manifest["options"]["fidelity"] == "paper" and manifest["options"]["acceptance"] == "paper"


def test_shard_options_are_checked(tmp_path, capsys):
    captions = tmp_path / "captions.txt"
    captions.write_text("a cat\n")
    common = [
        "generate",
        "--kind",
        "replace",
        "--input",
        str(captions),
        "--output",
        str(tmp_path / "o.jsonl"),
    ]
    for extra, message in (
        (["--num-shards", "2"], "--num-shards and --shard-index go together"),
        (
            ["--num-shards", "2", "--shard-index", "2"],
            "--shard-index must be 0 .. 1 for --num-shards 2, got 2",
        ),
        (
            ["--attn-implementation", "eager"],
            "--attn-implementation apply to --method llm",
        ),  # rules: no model
    ):
        assert main([*common, *extra]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def _model_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    for name, size in (("model-00001-of-00002.safetensors", 3000), ("model-00002-of-00002.safetensors", 2000),
                       ("config.json", 20)):  # fmt: skip
        (folder / name).write_bytes(os.urandom(size))
    return folder


def test_weight_files_are_hashed_once_per_path_size_and_mtime(tmp_path, monkeypatch, capsys):
    folder = _model_folder(tmp_path)
    hashed = []
    real = provenance.sha256_file

    def counting(path, progress=False, chunk_size=1 << 22):
        hashed.append(path.name)
        provenance._FILE_DIGESTS.clear()  # as in a new process: only the on-disk cache may spare the work
        return real(path, progress=progress)

    monkeypatch.setattr(provenance, "sha256_file", counting)
    first = models.model_fingerprint(str(folder), progress=True)
    assert len(hashed) == 3 and first["sha256"] == provenance.model_identity(str(folder))["sha256"]
    assert capsys.readouterr().err.count("to identify the model") == 3  # a progress line per file hashed
    hashed.clear()
    assert models.model_fingerprint(str(folder)) == first and hashed == []  # a later run: from the cache
    weights = folder / "model-00002-of-00002.safetensors"
    weights.write_bytes(os.urandom(2000))  # a new file: new mtime
    changed = models.model_fingerprint(str(folder))
    assert hashed == [weights.name] and changed != first
    hashed.clear()
    assert models.model_fingerprint(str(folder), verify=True) == changed and len(hashed) == 3
    # rewritten in place with its old size and mtime: only --verify-weights can tell
    stat = weights.stat()
    weights.write_bytes(os.urandom(2000))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert models.model_fingerprint(str(folder)) == changed
    with pytest.raises(UserInputError, match="rewritten in place"):
        models.model_fingerprint(str(folder), verify=True)


def test_throughput_benchmark_measures_prompts_per_second_at_each_batch(monkeypatch):
    """`benchmarks/generation_batches.py --throughput` (run on a GPU with --device cuda): one figure per
    batch size, computed from the rows and the measured seconds; here tiny, on the CPU, not recorded."""

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import generation_batches

    figures = generation_batches.throughput([2, 4], "cpu", rows=4, hidden_size=32, layers=1)
    for batch in (2, 4):
        seconds = float(figures[f"batch_{batch}_seconds"])
        assert seconds > 0
        assert float(figures[f"batch_{batch}_prompts_per_second"]) == pytest.approx(
            4 / seconds, rel=0.05, abs=0.05
        )
    assert figures["dtype"] == "float32" and figures["device"] == "cpu" and "gpu" not in figures
