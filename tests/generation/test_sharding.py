"""Generation spread over processes (issue 14 item 3): one resumable shard per rank, merged by input
index; a rank killed mid-run is resumed by rerunning the launch, generating only its missing rows."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from hf_hardpos import cli
from hf_hardpos.errors import UserInputError
from hf_hardpos.generation.run_output import manifest_path
from hf_hardpos.generation.sharding import (
    check_world_size,
    merge_shards,
    shard_indices,
    shard_path,
)
from hf_hardpos.output_folder import holder_path

ROWS = 12_000


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _launch(tmp_path, captions, output, logs):
    """`torchrun --nproc_per_node 2 -m hf_hardpos.cli generate ...` (what accelerate launch runs too)."""
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--log-dir",
        str(logs),
        "--redirects",
        "1",
        "-m",
        "hf_hardpos.cli",
        "generate",
        "--kind",
        "replace",
        "--negative",
        "--input",
        str(captions),
        "--output",
        str(output),
        "--batch-size",
        "20",
        "--no-progress",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _summaries(logs):
    found = {}
    for path in logs.glob("*/attempt_*/*/stdout.log"):
        text = path.read_text()
        if text.strip():
            summary = json.loads(text)
            found[summary["rank"]] = summary
    return found


def _lines(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.slow
def test_two_processes_with_a_killed_rank_resume_to_every_index_exactly_once(tmp_path):
    captions = tmp_path / "captions.txt"
    words = ["white", "red", "small", "large", "wooden", "empty", "open"]
    captions.write_text(
        "".join(f"a {words[i % 7]} box number {i} near a {words[(i // 7) % 7]} wall\n" for i in range(ROWS))
    )
    reference = tmp_path / "reference.jsonl"
    assert (
        cli.main(
            [
                "generate",
                "--kind",
                "replace",
                "--negative",
                "--input",
                str(captions),
                "--output",
                str(reference),
                "--no-progress",
            ]
        )
        == 0
    )

    output = tmp_path / "out.jsonl"
    shard1 = shard_path(output, 1, 2)
    first = _launch(tmp_path, captions, output, tmp_path / "logs1")
    deadline = time.monotonic() + 120
    while _lines(shard1) < 500:
        assert first.poll() is None and time.monotonic() < deadline, first.stderr and first.stderr.read()
        time.sleep(0.02)
    holder = holder_path(shard1.with_name(shard1.name + ".lock")).read_text()  # "pid N on HOST since ..."
    pid = int(holder.split()[1])
    os.kill(pid, signal.SIGKILL)  # rank 1 dies mid-run; torchrun then stops rank 0
    assert first.wait(timeout=120) != 0
    written_before = _lines(shard1)
    assert 500 <= written_before < ROWS // 2
    assert not output.exists()
    prefix = shard1.read_bytes()[: shard1.read_bytes().rfind(b"\n") + 1]

    second = _launch(tmp_path, captions, output, tmp_path / "logs2")
    _, error = second.communicate(timeout=300)
    assert second.returncode == 0, error
    rank1 = _summaries(tmp_path / "logs2")[1]
    assert rank1["already_done"] == prefix.count(b"\n")
    assert rank1["written"] == ROWS // 2 - rank1["already_done"]  # only the missing rows
    assert shard1.read_bytes().startswith(prefix)

    merged = _records(output)
    assert [r["index"] for r in merged] == list(range(ROWS))  # every index exactly once, in order
    assert merged == _records(reference)  # identical to one uninterrupted process
    assert json.loads(manifest_path(output).read_text()) == json.loads(manifest_path(reference).read_text())


def test_merge_refuses_missing_rows_and_other_world_sizes(tmp_path):
    captions = tmp_path / "c.txt"
    captions.write_text("a red car\na white cat\na small dog\n")
    inputs = ["a red car", "a white cat", "a small dog"]
    output = tmp_path / "out.jsonl"
    assert list(shard_indices(3, 1, 2)) == [1]
    from hf_hardpos.generation.resumable import generate_into
    from hf_hardpos.generation.rule_generator import RuleGenerator
    from hf_hardpos.generation.run_output import GenerationOutput

    generator = RuleGenerator("replace", negative=True, progress=False)
    options = generator.options()
    with GenerationOutput(shard_path(output, 0, 2), {**options, "shard": "rank 0 of 2"}, inputs) as shard:
        generate_into(generator, inputs, shard, indices=shard_indices(3, 0, 2))
    with pytest.raises(
        UserInputError, match="1 \\(index, kind\\) records are missing \\(first: \\(1, 'replace'\\)\\)"
    ):
        merge_shards(output, options, inputs, generator.kinds, 2)
    with GenerationOutput(shard_path(output, 1, 2), {**options, "shard": "rank 1 of 2"}, inputs) as shard:
        generate_into(generator, inputs, shard, indices=shard_indices(3, 1, 2))
    assert merge_shards(output, options, inputs, generator.kinds, 2) == {
        "shards": 2,
        "records": 3,
        "merged_now": 3,
    }
    assert [r["index"] for r in _records(output)] == [0, 1, 2]
    assert merge_shards(output, options, inputs, generator.kinds, 2)["merged_now"] == 0  # idempotent
    with pytest.raises(UserInputError, match="another number of processes \\(rank-00000-of-00002.jsonl\\)"):
        check_world_size(output, 4)
    check_world_size(output, 2)
