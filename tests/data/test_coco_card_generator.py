"""The COCO fine-tuning set's card describes the generator that made its `ce_clip` negatives: CE-CLIP's
released procedure (lezhang7/Enhance-FineGrained data/dataset.py @ef87eb7, TextAugment), the default,
or our filtered one; never the other one's checks.

A unit test of the card's measured-defects text: a full build with negatives of the default procedure
needs a masked LM whose fills of a bare mask are words, which the tiny test LM's are not (its fill of a
caption with no word of a type decodes to "", which the builder refuses as an empty caption).
"""

from __future__ import annotations

from hf_hardpos import columns
from hf_hardpos.data.build_report import BuildReport
from hf_hardpos.data.coco_finetune_card import (
    _TYPED_DEFECTS,
    SWAP_ELIGIBLE,
    SWAP_INELIGIBLE,
    _defects_text,
)
from hf_hardpos.data.coco_finetune_rows import CE_CLIP_CONFIG, CONFIG


def _report() -> BuildReport:
    report = BuildReport("coco")
    names = (*columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS)
    counts = {
        f"{n} {what}": 1
        for n in (*names, *columns.CE_CLIP_NEGATIVE_COLUMNS)
        for what in ("present", "equal to caption")
    }
    report.flags[CONFIG] = {**counts, SWAP_ELIGIBLE: 2, SWAP_INELIGIBLE: 0}
    report.flags[CE_CLIP_CONFIG] = counts
    return report


def test_typed_negative_defects_follow_the_generator_that_ran():
    released = _defects_text(_report(), ("ce-clip",))
    assert _TYPED_DEFECTS["ce-clip"] in released and _TYPED_DEFECTS["ours"] not in released
    ours = _defects_text(_report(), ("ours",))
    assert _TYPED_DEFECTS["ours"] in ours and _TYPED_DEFECTS["ce-clip"] not in ours
    # The released generator's card names its one null (the '###' relation placeholder), not our checks.
    assert "'###'" in _TYPED_DEFECTS["ce-clip"] and "synonym" not in _TYPED_DEFECTS["ce-clip"]
