"""The documentation's "never" sentences, each with a test that fails when the behaviour is removed.

- "A Hub id whose commit cannot be resolved (offline, never downloaded) is never reused."
- An interrupted conversion "is never used" (the conversion cache).
- A rule-method caption's output "does not depend on the other captions of the run".
(A resumed training run draws the same crops: tests/training/test_robustness.py.)
Each sentence is checked to be in the README or a docs page too (`GUARANTEES`), so a promise and its test
cannot drift apart: rewording one means updating the other.
"""

from __future__ import annotations

import json
from pathlib import Path

from hf_hardpos.backends import hf as hf_backend
from hf_hardpos.conversion import resolve_model
from hf_hardpos.conversion.record import MARKER
from hf_hardpos.evaluation import runner
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.generation.rule_generator import RuleGenerator
from tests.support.eval_data import write_attributes_relations_folder
from tests.support.paths import OPEN_CLIP_FIXTURES as FIXTURES
from tests.support.paths import REPO as ROOT

# Each promise as the docs word it (whitespace aside), with the page that holds it and the test below.
GUARANTEES = {
    "A Hub id whose commit cannot be resolved (offline, never downloaded) is never reused.":
        ("evaluation.md", "test_scores_of_a_model_whose_hub_commit_is_unknown_are_never_reused"),
    "so an interrupted one is never used": ("models.md", "test_an_interrupted_conversion_is_never_used"),
    "a caption's output does not depend on the other captions of the run":
        ("generation.md", "test_a_rule_output_does_not_depend_on_the_other_captions_of_the_run"),
}  # fmt: skip


def _words(text: str) -> str:
    return " ".join(text.split())


def test_every_guarantee_is_written_in_the_docs_and_tested_here():
    for sentence, (page, test) in GUARANTEES.items():
        assert _words(sentence) in _words((ROOT / "docs" / page).read_text()), (page, sentence)
        assert callable(globals()[test])
        # the trust page lists it too, pointing at this file
        assert "tests/repository/test_readme_guarantees.py" in (ROOT / "docs" / "trust.md").read_text()


def test_scores_of_a_model_whose_hub_commit_is_unknown_are_never_reused(tiny_clip_dir, tmp_path, monkeypatch):
    hub_folder = write_attributes_relations_folder(tmp_path / "replace")
    # As for a Hub id offline: the identity names the repository but no commit could be resolved.
    monkeypatch.setattr(hf_backend, "model_identity", lambda name: {"hub_id": "org/model", "revision": None})
    out, messages = tmp_path / "eval", []
    evaluate_model(str(tiny_clip_dir), str(hub_folder), output_dir=out, progress=False, log=messages.append)
    scored = []
    original = runner._unit_keys

    def spy(*args, **kwargs):
        keys = original(*args, **kwargs)
        scored.append(dict(keys))
        return keys

    monkeypatch.setattr(runner, "_unit_keys", spy)
    again = evaluate_model(
        str(tiny_clip_dir), str(hub_folder), output_dir=out, progress=False, log=messages.append
    )
    assert scored == [{"attributes": None, "relations": None}]  # no key: nothing can match a saved result
    assert set(again.results) >= {"attributes", "relations"}
    assert not any("reusing" in m for m in messages)
    assert (
        json.loads((out / "metrics.json").read_text())["results"]["attributes"] == again.results["attributes"]
    )


def test_an_interrupted_conversion_is_never_used(tmp_path, tiny_tokenizer):
    options = dict(
        open_clip_config=FIXTURES / "tiny-quickgelu.json",
        tokenizer=tiny_tokenizer,
        cache_dir=tmp_path,
        progress=False,
    )
    done = Path(resolve_model(FIXTURES / "quickgelu_plain.pt", **options))
    # Simulate a conversion killed after writing the weights but before its record: no conversion.json.
    (done / MARKER).unlink()
    (done / "model.safetensors").write_bytes(b"truncated")
    again = Path(resolve_model(FIXTURES / "quickgelu_plain.pt", **options))
    assert again == done and (again / MARKER).is_file()
    assert (again / "model.safetensors").stat().st_size > len(b"truncated")  # converted afresh, not reused


def test_a_rule_output_does_not_depend_on_the_other_captions_of_the_run():
    target = "a man holding a white cup on a wooden table"
    others = ["a black dog on a red sofa", "two people standing near a large tree", "a small cat in a box"]
    for negative in (False, True):
        alone = RuleGenerator("replace", negative=negative, seed=3, progress=False).generate([target])[0]
        among = RuleGenerator("replace", negative=negative, seed=3, progress=False).generate(
            [*others, target, *others]
        )
        assert alone.output is not None
        assert among[len(others)].output == alone.output
        reordered = RuleGenerator("replace", negative=negative, seed=3, progress=False).generate(
            [target, *reversed(others)]
        )
        assert reordered[0].output == alone.output
