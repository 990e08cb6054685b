"""A generation run owns its output (issue 10 items 3-4): manifest, refused resumes, lock, typed
records, and text input read the way the index semantics need. Each test reproduces a "Why" bullet."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from hf_hardpos import __version__, cli
from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import validation
from hf_hardpos.generation.caption_file import read_captions
from hf_hardpos.generation.report import quality_report, quality_summary
from hf_hardpos.generation.rule_generator import RuleGenerator
from hf_hardpos.generation.run_output import (
    GenerationOutput,
    input_fingerprint,
    lock_path,
    manifest_path,
)

CAPTIONS = "a white cat on a mat\na red car and a blue bus\n\na small dog in back of a fence\n"


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def captions_file(tmp_path):
    path = tmp_path / "captions.txt"
    path.write_text(CAPTIONS)
    return path


def _generate(captions_file, output, *extra):
    argv = ["generate", "--input", str(captions_file), "--output", str(output), "--no-progress", *extra]
    return cli.main(argv)


def test_manifest_written_with_the_first_record_and_records_are_typed(captions_file, tmp_path, capsys):
    out = tmp_path / "hp.jsonl"
    assert _generate(captions_file, out, "--kind", "replace") == 0
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["options"] == {"method": "rules", "polarity": "positive", "kind": "replace", "seed": 0}
    assert manifest["input"] == {"sha256": input_fingerprint(read_captions(captions_file)), "rows": 4}
    assert manifest["hf_hardpos"] == __version__
    rows = _lines(out)
    assert [(r["index"], r["method"], r["kind"], r["polarity"]) for r in rows] == [
        (i, "rules", "replace", "positive") for i in range(4)
    ]
    assert rows[2]["reason"] == validation.EMPTY_INPUT  # the blank line keeps its index
    error = capsys.readouterr().err
    assert "1 empty caption(s)" in error and "at index 2:" in error


def test_no_manifest_before_the_first_record(tmp_path):
    """A run that dies before writing anything leaves nothing that could pin the options."""
    generator = RuleGenerator("replace", progress=False)
    generator.generate = lambda captions: (_ for _ in ()).throw(KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        generator.generate_to_jsonl(["a white cat"], tmp_path / "out.jsonl")
    assert not manifest_path(tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    "first, second, differs",
    [
        (
            ["--kind", "replace"],
            ["--kind", "replace", "--negative"],
            "polarity: 'positive' (output) vs 'negative'",
        ),
        (["--kind", "replace"], ["--kind", "swap"], "kind: 'replace' (output) vs 'swap' (this run)"),
        (["--kind", "replace", "--seed", "1"], ["--kind", "replace"], "seed: 1 (output) vs 0"),
    ],
)
def test_resume_with_other_options_is_refused(captions_file, tmp_path, capsys, first, second, differs):
    """Why: resuming with --negative onto a hard-positive file, or --kind swap onto a replace file,
    silently mixed or skipped everything."""
    out = tmp_path / "out.jsonl"
    assert _generate(captions_file, out, *first) == 0
    before = out.read_text()
    capsys.readouterr()
    assert _generate(captions_file, out, *second) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "refusing to mix two runs" in error and differs in error
    assert out.read_text() == before
    assert _generate(captions_file, out, *second, "--overwrite") == 0
    assert {r["kind"] for r in _lines(out)} == {second[1]} and len(_lines(out)) == 4


def test_resume_onto_another_input_is_refused(captions_file, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert _generate(captions_file, out, "--kind", "replace") == 0
    captions_file.write_text(CAPTIONS + "one more caption\n")
    assert _generate(captions_file, out, "--kind", "replace") == 2
    assert "input rows: 4 (output) vs 5 (this run)" in capsys.readouterr().err


def test_output_without_manifest_is_refused(captions_file, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"index": 0, "input": "a white cat on a mat"}) + "\n")
    assert _generate(captions_file, out, "--kind", "replace") == 2
    assert "no manifest" in capsys.readouterr().err


def test_second_concurrent_writer_is_refused_and_a_killed_writer_leaves_no_stale_lock(
    captions_file, tmp_path, capsys
):
    """Why: two concurrent runs on one output wrote 20,000 duplicate indices."""
    out = tmp_path / "out.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from hf_hardpos.generation.run_output import GenerationOutput\n"
            f"with GenerationOutput({str(out)!r}, {{'method': 'rules'}}, ['a']):\n"
            "    print('locked', flush=True); time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert _generate(captions_file, out, "--kind", "replace") == 2
        error = capsys.readouterr().err
        assert f"being written by another process (pid {holder.pid}" in error and error.count("\n") == 1
        with pytest.raises(UserInputError, match="another process"):
            with GenerationOutput(out, {}, []):
                pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert lock_path(out).exists()  # left in place on purpose; the kernel released the lock
    assert _generate(captions_file, out, "--kind", "replace") == 0
    assert [r["index"] for r in _lines(out)] == [0, 1, 2, 3]


def test_unwritable_output_fails_before_any_work(captions_file, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    started = time.monotonic()
    assert _generate(captions_file, blocker / "out.jsonl", "--kind", "replace") == 2
    assert "cannot write the output" in capsys.readouterr().err and time.monotonic() - started < 5


def test_text_input_bom_line_endings_and_bad_bytes(tmp_path):
    """Why: a BOM was kept inside the first caption, a lone \\r split a line (shifting every later
    index), a non-UTF-8 byte gave a bare UnicodeDecodeError naming neither file nor line."""
    path = tmp_path / "c.txt"
    path.write_bytes(b"\xef\xbb\xbfa white cat\r\na dog\rwith a hat\n\n  \nlast line without newline")
    assert read_captions(path) == [
        "a white cat",
        "a dog\rwith a hat",
        None,
        None,
        "last line without newline",
    ]
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"caption": "a cat"}\r\n{"caption": "x\\ry"}\n')
    assert read_captions(jsonl) == ["a cat", "x\ry"]
    path.write_bytes(b"a cat\na caf\xe9\n")
    with pytest.raises(UserInputError, match=r"c.txt line 2: byte 0xe9 at column 6 is not UTF-8"):
        read_captions(path)
    with pytest.raises(UserInputError, match="does not exist"):
        read_captions(tmp_path / "missing.txt")


def test_cli_bad_input_is_one_line_naming_file_and_line(tmp_path, capsys):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a caf\xe9\n")
    assert _generate(path, tmp_path / "out.jsonl", "--kind", "replace") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "latin1.txt line 1" in error and "Traceback" not in error


@pytest.mark.parametrize(
    "args, message",
    [
        (["--kind", "replace", "--batch-size", "0"], "--batch-size must be a positive integer, got 0"),
        (["--kind", "replace-verb", "--negative"], "exists for hard positives only"),
        (["--kind", "swap", "--method", "llm"], "needs --model"),
        (["--kind", "attribute", "--method", "mlm"], "add --negative"),
        (["--kind", "replace", "--method", "mlm", "--negative"], "use one of relation, attribute"),
        (["--kind", "attribute", "--negative"], "does not exist for --method rules"),
        (["--kind", "swap", "--model", "./no/such/model"], "model not found: ./no/such/model"),
        (["--kind", "all", "--method", "mlm", "--negative", "--num-candidates", "3"], "--mlm-procedure ours"),
    ],
)
def test_bad_options_fail_early_with_one_line(captions_file, tmp_path, capsys, args, message):
    """Why: `--batch-size 0` was silently replaced by 256; a missing model path gave "Repo id must be
    in the form ..."."""
    out = tmp_path / "out.jsonl"
    assert _generate(captions_file, out, *args) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not out.exists()


def test_generator_batch_size_zero_is_an_error():
    with pytest.raises(UserInputError, match="batch size must be >= 1, got 0"):
        RuleGenerator("replace", batch_size=0)


def test_report_counts_reasons_and_samples(captions_file, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert _generate(captions_file, out, "--kind", "swap", "--report", "--report-samples", "1") == 0
    assert capsys.readouterr().out.endswith(quality_report(out, samples=1) + "\n")  # what --report printed
    (swap,) = quality_summary(out, samples=1).values()
    assert (swap["captions"], swap["valid"]) == (4, 1)
    assert swap["rejected"] == {validation.NO_AND: 2, validation.EMPTY_INPUT: 1}
    assert [(r["index"], r["input"], r["output"]) for r in swap["sample"]] == [
        (1, "a red car and a blue bus", "a blue bus and a red car")
    ]
