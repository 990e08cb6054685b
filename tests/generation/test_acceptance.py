"""Validity filtering: the paper's acceptance by default, "strict" (ours) as a named option, and the
share each keeps (`hardpos generate --report`).

The verbatim samples of the paper's Appendix C.3 were not available to us (neither the paper's text
nor the released `hard_positives_ft/*.jsonl` could be read here). The pairs below are the kinds the
issue reports the strict checks wrongly refuse, in the paper's style: "a man in a Red shirt" ->
"crimson" (quoted in the issue), REPLACE answers that change two words ("on top of" -> "atop" with
"riding" -> "surfing"), and the SWAP prompt's own first example, which inflects a noun while swapping
("three giraffes and two antelope" -> "two antelopes and three giraffes"). The paper's named failure
modes (Appendix C: output equal to input, extra chatter, several sentences, an "and"-swap that moved
attributes between objects) must still be refused by default.
"""

import json

import pytest

from hf_hardpos.generation import validation
from hf_hardpos.generation.report import (
    acceptance_shares,
    quality_report,
    quality_summary,
)

# (kind, caption, answer, the strict checks' verdict); the paper's acceptance keeps all of them.
PAPER_STYLE_ACCEPTED = [
    ("replace", "a man in a Red shirt riding a skateboard", "a man in a crimson shirt riding a skateboard",
     validation.NAME_REPLACED),
    ("replace", "A man riding a wave on top of a surfboard.", "A man surfing a wave atop a surfboard.",
     validation.SEVERAL_EDITS),
    ("replace", "A little girl holding a kitten next to a blue fence.",
     "A small girl holding a kitten beside a blue fence.", validation.SEVERAL_EDITS),
    ("replace", "a cat sleeping on a bed", "a cat resting on a bed", None),
    ("swap", "three giraffes and two antelope", "two antelopes and three giraffes", validation.WORDS_CHANGED),
    ("swap", "a bathroom with a sink, toilet and shower", "a bathroom with a sink, shower and toilet", None),
]  # fmt: skip
# The paper's own failure modes: refused by both acceptances.
PAPER_FAILURES = [
    ("replace", "a cat sleeping on a bed", "a cat sleeping on a bed.", validation.IDENTICAL),
    ("replace", "a cat sleeping on a bed", "I replaced sleeping with resting", validation.CHATTER),
    (
        "replace",
        "a cat sleeping on a bed",
        "a cat resting on a bed. It is a nice cat.",
        validation.SEVERAL_SENTENCES,
    ),
    ("swap", "a red car and a blue bus", "a blue car and a red bus", validation.NOT_A_SWAP),
    ("swap", "a red car and a blue bus", "", validation.EMPTY),
]


@pytest.mark.parametrize(("kind", "caption", "answer", "strict"), PAPER_STYLE_ACCEPTED)
def test_the_papers_acceptance_keeps_what_the_paper_kept(kind, caption, answer, strict):
    assert validation.validate(kind, caption, answer, "paper") is None
    assert validation.validate(kind, caption, answer, "strict") == strict


@pytest.mark.parametrize(("kind", "caption", "answer", "reason"), PAPER_FAILURES)
def test_the_papers_failure_modes_are_refused_by_both(kind, caption, answer, reason):
    assert validation.validate(kind, caption, answer, "paper") == reason
    assert validation.validate(kind, caption, answer, "strict") == reason


def test_unknown_acceptance_is_refused():
    with pytest.raises(ValueError, match="unknown acceptance 'lenient'; expected one of paper, strict"):
        validation.validate("replace", "a cat", "a kitty", "lenient")


def _records(pairs, truncated_rows=()) -> list[dict]:
    return [
        {"index": i, "input": caption, "output": answer, "raw": answer, "method": "llm", "kind": kind,
         "polarity": "positive", "valid": validation.validate(kind, caption, answer, "paper") is None,
         "reason": validation.validate(kind, caption, answer, "paper"), "truncated": i in truncated_rows}
        for i, (kind, caption, answer, _) in enumerate(pairs)
    ]  # fmt: skip


def test_report_gives_the_share_each_acceptance_keeps(tmp_path):
    replace = [p for p in PAPER_STYLE_ACCEPTED + PAPER_FAILURES if p[0] == "replace"]
    records = _records(replace, truncated_rows={3})  # row 3 ("a cat resting on a bed") was cut off
    records.append({"index": len(records), "input": None, "output": None, "raw": None, "method": "llm",
                    "kind": "replace", "valid": False, "reason": validation.EMPTY_INPUT})  # fmt: skip
    assert acceptance_shares(records) == {"generated": 7, "paper": 4, "strict": 0}
    path = tmp_path / "hp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert quality_summary(path, samples=0)["replace"]["acceptance"] == {
        "generated": 7,
        "paper": 4,
        "strict": 0,
    }
    lines = quality_report(path, samples=0).splitlines()
    kept = {
        line.split()[0]: line.split()[1:] for line in lines if line.strip().startswith(("paper ", "strict "))
    }
    assert kept == {"paper": ["4", "57.1%"], "strict": ["0", "0.0%"]}
