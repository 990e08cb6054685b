"""Prompts for LLM hard-positive generation (paper Appendix C) and their decoding budgets.

REPLACE and SWAP are the paper's prompts verbatim (SPEC §4), so a run with Llama-2-70B-chat
reproduces the paper's procedure. The paper also used relation-targeted variants of REPLACE (one
verb, one spatial preposition); their wording is not published, so `REPLACE_VERB` and
`REPLACE_SPATIAL` are ours, written in the same style as REPLACE.
"""

from __future__ import annotations

REPLACE = (
    "Replace one word in the input sentence with a synonym, without changing the meaning of the "
    "sentence. Only output the changed sentence.\n"
    "Input: {example}\n"
    "Output:"
)

SWAP = (
    'Swap the words around the word "and" in a sentence without changing the meaning. Only respond '
    "with the changed sentence.\n"
    "\n"
    "Input: three giraffes and two antelope\n"
    "Output: two antelopes and three giraffes\n"
    "\n"
    "Input: a blue and white stained glass clock shows the time\n"
    "Output: a white and blue stained glass clock shows the time\n"
    "\n"
    "Input: a mixture of rice and broccoli are put together\n"
    "Output: a mixture of broccoli and rice are put together\n"
    "\n"
    "Input: a bathroom with a sink, toilet and shower\n"
    "Output: a bathroom with a sink, shower and toilet\n"
    "\n"
    "Input: there is a man wearing glasses and holding a wine bottle\n"
    "Output: there is a man holding a wine bottle and wearing glasses\n"
    "\n"
    "Input: {example}\n"
    "Output:"
)

REPLACE_VERB = (
    "Replace one verb in the input sentence with a synonym, without changing the meaning of the "
    "sentence. Only output the changed sentence.\n"
    "Input: {example}\n"
    "Output:"
)

REPLACE_SPATIAL = (
    "Replace one spatial preposition in the input sentence with a synonym, without changing the "
    "meaning of the sentence. Only output the changed sentence.\n"
    "Input: {example}\n"
    "Output:"
)

PROMPTS: dict[str, str] = {
    "replace": REPLACE,
    "swap": SWAP,
    "replace-verb": REPLACE_VERB,
    "replace-spatial": REPLACE_SPATIAL,
}
KINDS: tuple[str, ...] = tuple(PROMPTS)

# Paper Appendix C: 30 new tokens for REPLACE, 20 for SWAP (captions are short; a longer budget
# only buys chatter). The relation-targeted variants are REPLACE prompts and get its budget.
MAX_NEW_TOKENS: dict[str, int] = {"replace": 30, "swap": 20, "replace-verb": 30, "replace-spatial": 30}

# Which output check applies: every REPLACE variant is checked as a replacement.
VALIDATION_KIND: dict[str, str] = {
    "replace": "replace",
    "swap": "swap",
    "replace-verb": "replace",
    "replace-spatial": "replace",
}


def check_kind(kind: str) -> str:
    """Return `kind` or raise a ValueError that lists the valid kinds."""
    if kind not in PROMPTS:
        raise ValueError(f"unknown generation kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def build_prompt(kind: str, caption: str) -> str:
    """The prompt text for one caption (before any chat template is applied)."""
    # str.replace, not str.format: a caption may contain braces.
    return PROMPTS[check_kind(kind)].replace("{example}", caption)
