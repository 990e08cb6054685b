"""Resume safety and batching of a generation run (issue: resume safety, full batches, report).

- a resume records the model's fingerprint (folder digest / Hub commit) and resolved settings, and
  refuses another model at the same folder;
- a single-process run reuses a sharded launch's finished rows and a sharded run the rows of a
  single-process run; shards of another run are refused;
- model batches are cut from the rows that need the model;
- the report gives the share of rejected rows per reason.
"""

import json
import shutil
from collections.abc import Sequence

import pytest
import torch

from hf_hardpos import cli
from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import models
from hf_hardpos.generation.report import quality_report, quality_summary
from hf_hardpos.generation.resumable import Candidate, CaptionGenerator, generate_into
from hf_hardpos.generation.rule_generator import RuleGenerator
from hf_hardpos.generation.run_output import GenerationOutput
from hf_hardpos.generation.sharding import generate_sharded, shard_indices, shard_path

CAPTIONS = [f"a {colour} car near a {thing}" for colour in ("red", "white", "small", "big")
            for thing in ("wall", "tree", "man")]  # fmt: skip


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _captions_file(tmp_path):
    path = tmp_path / "captions.txt"
    path.write_text("\n".join(CAPTIONS) + "\n")
    return path


def _rules_cli(captions, output, *extra):
    return cli.main(["generate", "--kind", "replace", "--negative", "--input", str(captions), "--output", str(output),
                     "--no-progress", *extra])  # fmt: skip


def test_another_model_at_the_same_folder_is_refused(tiny_mlm_dir, pos_nlp, tmp_path, capsys):
    model_dir = tmp_path / "mlm"
    shutil.copytree(tiny_mlm_dir, model_dir)
    pos_nlp.to_disk(tmp_path / "pos")
    captions = _captions_file(tmp_path)
    argv = ["generate", "--negative", "--method", "mlm", "--kind", "object", "--model", str(model_dir), "--input",
            str(captions), "--output", str(tmp_path / "o.jsonl"), "--spacy-model", str(tmp_path / "pos"),
            "--device", "cpu", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    manifest = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())
    assert set(manifest["options"]["model_fingerprint"]) == {"sha256"}
    assert manifest["settings"]["model_fingerprint"] == manifest["options"]["model_fingerprint"]
    assert cli.main(argv) == 0  # the same model resumes (nothing left to do)
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(model_dir)
    with torch.no_grad():
        model.cls.predictions.decoder.weight.mul_(2.0)  # another model saved at the same folder
    model.save_pretrained(model_dir)
    capsys.readouterr()
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert "model_fingerprint" in error and "refusing to mix two runs" in error


def test_a_new_hub_revision_is_refused(monkeypatch, tmp_path):
    import hf_hardpos.provenance as provenance

    monkeypatch.setattr(provenance, "hub_revision", lambda repo_id, repo_type="model": "a" * 40)
    first = models.model_fingerprint("org/model")
    assert first == {"hub_id": "org/model", "revision": "a" * 40}
    inputs = ["a red car"]
    options = {"method": "llm", "polarity": "positive", "kind": "replace", "model": "org/model"}
    generator = RuleGenerator("replace", progress=False)
    with GenerationOutput(tmp_path / "o.jsonl", {**options, "model_fingerprint": first}, inputs) as output:
        generate_into(generator, inputs, output)
    monkeypatch.setattr(provenance, "hub_revision", lambda repo_id, repo_type="model": "b" * 40)
    second = models.model_fingerprint("org/model")
    with pytest.raises(UserInputError, match="model_fingerprint"):
        with GenerationOutput(tmp_path / "o.jsonl", {**options, "model_fingerprint": second}, inputs):
            pass


def test_settings_resolved_after_loading_are_checked_on_resume(tmp_path):
    class Configured(RuleGenerator):
        temperature = 0.6

        def settings(self):
            return {"generation_config": {"temperature": self.temperature}}

    generator = Configured("replace", progress=False)
    generator.generate_to_jsonl(CAPTIONS, tmp_path / "o.jsonl")
    assert json.loads((tmp_path / "o.jsonl.manifest.json").read_text())["settings"] == {
        "generation_config": {"temperature": 0.6}
    }
    generator.temperature = 1.0
    with pytest.raises(UserInputError, match="generation_config.temperature: 0.6 \\(output\\) vs 1.0"):
        generator.generate_to_jsonl(CAPTIONS, tmp_path / "o.jsonl")


def _write_shard(output, rank, world, inputs):
    generator = RuleGenerator("replace", negative=True, progress=False)
    options = {**generator.options(), "shard": f"rank {rank} of {world}"}
    with GenerationOutput(shard_path(output, rank, world), options, inputs) as shard:
        generate_into(generator, inputs, shard, indices=shard_indices(len(inputs), rank, world))


def test_single_process_run_reuses_a_sharded_launchs_rows(tmp_path, capsys):
    captions = _captions_file(tmp_path)
    reference = tmp_path / "reference.jsonl"
    assert _rules_cli(captions, reference) == 0
    output = tmp_path / "out.jsonl"
    _write_shard(output, 0, 2, CAPTIONS)  # rank 0 finished, rank 1 never ran
    capsys.readouterr()
    assert _rules_cli(captions, output) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["adopted_from_shards"] == len(shard_indices(len(CAPTIONS), 0, 2))
    assert (
        summary["written"] == len(CAPTIONS) - summary["adopted_from_shards"]
    )  # only rank 1's rows generated
    assert sorted(_records(output), key=lambda r: r["index"]) == _records(reference)


def test_shards_of_another_run_are_refused(tmp_path, capsys):
    captions = _captions_file(tmp_path)
    output = tmp_path / "out.jsonl"
    _write_shard(output, 0, 2, CAPTIONS)
    assert _rules_cli(captions, output, "--seed", "5") == 2
    assert "seed: 0 (output) vs 5 (this run)" in capsys.readouterr().err
    assert _rules_cli(captions, output, "--seed", "5", "--overwrite") == 0  # --overwrite starts again
    assert not (tmp_path / "out.jsonl.shards").exists()


def test_sharded_run_reuses_a_single_process_runs_rows(tmp_path, capsys):
    reference = tmp_path / "reference.jsonl"
    assert _rules_cli(_captions_file(tmp_path), reference) == 0
    output = tmp_path / "out.jsonl"
    generator = RuleGenerator("replace", negative=True, progress=False)
    options = generator.options()
    with GenerationOutput(output, options, CAPTIONS) as single:  # a single-process run stopped after 5 rows
        generate_into(generator, CAPTIONS, single, indices=range(5))
    summary = generate_sharded(lambda state: RuleGenerator("replace", negative=True, progress=False), CAPTIONS,
                               output, options)  # fmt: skip
    assert summary["already_done"] == 5 and summary["written"] == len(CAPTIONS) - 5
    assert sorted(_records(output), key=lambda r: r["index"]) == _records(reference)


class _Counting(CaptionGenerator):
    """Rows starting with "skip" are refused by precheck; records the size of every model batch."""

    method, polarity, kind, kinds, progress = "rules", "positive", "replace", ("replace",), False

    def __init__(self, batch_size):
        self.batch_size = batch_size
        self.batches: list[int] = []

    def precheck(self, caption):
        return "skipped" if caption.startswith("skip") else None

    def generate(self, captions: Sequence[str]):
        self.batches.append(len(captions))
        return [Candidate(raw=None, output=c.upper(), reason=None) for c in captions]


def test_model_batches_are_cut_from_the_rows_that_need_the_model(tmp_path):
    inputs = [
        ("keep " if i % 5 == 0 else "skip ") + str(i) for i in range(100)
    ]  # one row in five needs the model
    generator = _Counting(batch_size=4)
    summary = generator.generate_to_jsonl(inputs, tmp_path / "o.jsonl")
    needing = sum(not c.startswith("skip") for c in inputs)
    assert generator.batches == [4] * (needing // 4) + ([needing % 4] if needing % 4 else [])
    assert summary["model_calls"] == len(generator.batches) and summary["generated_rows"] == needing
    # cutting first and filtering after (the previous behaviour) calls the model on 20 batches of one row
    old_batches = [sum(not c.startswith("skip") for c in inputs[b : b + 4]) for b in range(0, 100, 4)]
    assert [n for n in old_batches if n] == [1] * 20 and generator.batches == [4] * 5
    records = _records(tmp_path / "o.jsonl")
    assert [r["index"] for r in records] == list(range(100))  # still written in index order
    assert all(r["reason"] == "skipped" for r in records if r["input"].startswith("skip"))


def test_report_gives_the_share_of_rows_per_reason(tmp_path):
    rows = [{"index": i, "input": "x", "output": None, "valid": i < 2, "kind": "replace",
             "reason": None if i < 2 else ("too long" if i < 5 else "chatter")} for i in range(8)]  # fmt: skip
    path = tmp_path / "o.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert quality_summary(path, samples=0) == {
        "replace": {"captions": 8, "valid": 2, "rejected": {"too long": 3, "chatter": 3}, "sample": []}
    }
    # the text gives each reason's share of the kind's rows: 3 of 8
    lines = quality_report(path, samples=0).splitlines()
    shares = [line.split()[:2] for line in lines if line.endswith(("too long", "chatter"))]
    assert shares == [["3", "37.5%"], ["3", "37.5%"]]


def _set_first_record(path, text_edit):
    lines = path.read_text().splitlines()
    lines[0] = text_edit(lines[0])
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "edit, field",
    [
        (
            lambda line: line.replace('"valid": true', '"valid": "true"').replace(
                '"valid": false', '"valid": "false"'
            ),
            "field valid",
        ),
        (lambda line: line[:-1] + ', "output": "another"}', "field output appears twice"),
        (lambda line: line + "\n" + line, "line 2: a second record for caption index 0"),
        (lambda line: line.replace('"index": 0', '"index": "0"'), "index '0'"),
    ],
)
def test_a_malformed_record_is_refused_on_resume_in_one_line(tmp_path, capsys, edit, field):
    """Records of a generate output are checked, not coerced: a `"valid": "true"` was read as not valid
    (its caption silently null), a key twice took the last value, two records for one caption the first."""
    captions = _captions_file(tmp_path)
    output = tmp_path / "out.jsonl"
    assert _rules_cli(captions, output) == 0
    _set_first_record(output, edit)
    capsys.readouterr()
    assert _rules_cli(captions, output) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(output) in err and field in err, err


@pytest.mark.parametrize("rows", ["6", -1, 1.5, None])
def test_a_manifest_with_rows_of_the_wrong_type_is_one_line(tmp_path, capsys, rows):
    captions = _captions_file(tmp_path)
    output = tmp_path / "out.jsonl"
    assert _rules_cli(captions, output) == 0
    manifest_file = tmp_path / "out.jsonl.manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["input"]["rows"] = rows
    manifest_file.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert _rules_cli(captions, output) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "manifest.json" in err and "input.rows" in err, err
