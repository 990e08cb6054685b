"""Which captions get a SWAP hard positive: the paper's rule, in one place for the generator and the builder.

Source: Kamath et al., ECCV 2024, Appendix C (COCO fine-tuning data): SWAP hard positives were
generated only for captions that contain the word "and" and have **fewer than 15 words**
(119,071 of the 591,753 COCO train2017 captions); upstream's README (amitakamath/hard_positives
@33addaa, "Finetuning data") writes "None" for every other caption of `swap_hp.jsonl`.

Two readings, one rule. The paper says "fewer than 15 words" where it states which captions were
used, and that captions "greater than 15 words" were filtered where it explains the 20-token
budget; the two disagree only on captions of exactly 15 words. We implement "fewer than 15"
(at most 14 words): it is the sentence that defines the selection, and the 20-new-token budget
the paper set for SWAP is what a 15-word caption's swap already strains. The released count
(119,071) would decide between them, but it needs COCO train2017's captions and the released
`swap_hp.jsonl` (neither ships with this package or its tests); a build from those files reports
how many released swaps sit on captions of exactly 15 words (`hardpos build finetune`'s card and
report: "swap hard positives on ineligible captions"), which is 0 under this reading.

What counts:
- words: whitespace-separated (`str.split`), as a reader counts a caption's words;
- "and": a word token equal to "and", case-insensitive, punctuation around it ignored ("cats, and
  dogs", "And"). Inside a hyphenated compound it is not the conjunction the prompt swaps around:
  "Rock-and-roll band" has no "and" (swapping around it would give "roll-and-Rock"). The token
  rule is `hf_hardpos.generation.tokens.tokenize`'s, the one every check of a swap uses.
"""

from __future__ import annotations

from hf_hardpos.generation.tokens import tokenize

SWAP_MAX_WORDS = 14  # "fewer than 15 words" (Appendix C)
PAPER_SWAP_ELIGIBLE = 119_071  # COCO train2017 captions the paper made a SWAP hard positive for
# Reasons a caption gets no SWAP hard positive (written to generation outputs, counted in reports).
NO_AND = "no 'and' in input"
TOO_LONG_FOR_SWAP = "15 words or more (the paper's SWAP limit)"


def word_count(caption: str) -> int:
    """Whitespace-separated words."""
    return len(caption.split())


def has_and(caption: str) -> bool:
    """True when "and" is a word of the caption (not part of a hyphenated compound)."""
    return any(token.text.lower() == "and" for token in tokenize(caption))


def swap_ineligibility(caption: str) -> str | None:
    """Why the paper made no SWAP hard positive for `caption` (`NO_AND`, `TOO_LONG_FOR_SWAP`), or None."""
    if not has_and(caption):
        return NO_AND
    if word_count(caption) > SWAP_MAX_WORDS:
        return TOO_LONG_FOR_SWAP
    return None


def swap_eligible(caption: str) -> bool:
    """Whether the paper made a SWAP hard positive for this caption: the word "and", fewer than 15 words."""
    return swap_ineligibility(caption) is None
