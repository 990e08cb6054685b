"""Clean an LLM's answer and decide whether it is a usable hard positive, with a reason if not.

Why a reason and not a bool: an LLM's output can fail in several ways (output equal to the input,
extra chatter, several sentences, an "and"-swap that moved attributes between objects); both
acceptance rules are ours: the paper names no failure mode (it hand-checked 100 swap outputs) and its
released script (`generate_hard_positives.py` @33addaa) keeps every first line as it is. Recording
which check failed on each row lets a user see what their model does wrong and tune the prompt or
the model, instead of silently losing rows.

`clean_output` removes only *known* wrappers (a leading "Output:", quotes, a "Sure! Here is the
changed sentence:" preamble, an echo of the prompt's "Input: ..." line before the answer, the model
going on with a new "Input:" line, markdown emphasis, quote and list markers, an arrow, brackets
around the whole answer). Anything it does not recognise is left in place for the validators to
reject: a candidate whose punctuation or symbols differ from the input's (beyond the final full
stop) is refused, so "!!!", an emoji or a stray quote never reaches a training set.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from functools import lru_cache

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import lexicon
from hf_hardpos.generation.swap_rule import NO_AND, TOO_LONG_FOR_SWAP, swap_ineligibility  # noqa: F401  (every reason here)
from hf_hardpos.generation.tokens import proper_noun_tokens, tokenize

# Every rejection reason of every generator, in one place (stable strings: they are written to the
# JSONL output and counted in reports).
# - before generating (the caption cannot be perturbed this way):
EMPTY_INPUT = "empty input"
# NO_AND, TOO_LONG_FOR_SWAP: the paper's SWAP eligibility (`swap_rule`)
NO_RULE = "no rule applies"
NO_POSITION = "no word of this part of speech"  # masked-LM fill: no ADJ / VERB / NOUN to mask
TOO_FEW_NOUNS = "fewer than two different nouns"  # relation swap
NO_FILL = "no fill other than the word or its synonyms"  # masked-LM fill: every top fill refused
FEWER_THAN_THREE_NOUNS = "fewer than three nouns (CE-CLIP's '###' placeholder)"  # CE-CLIP relation swap
MASK_IN_INPUT = "caption contains the mask token"  # masked LM: a second mask would be filled too
TOO_LONG_FOR_MODEL = "longer than the masked LM's positions"
# - after generating (the candidate is not a usable hard positive / negative):
EMPTY = "empty output"
CHATTER = "chatter"
SEVERAL_SENTENCES = "several sentences"
IDENTICAL = "identical to input"
TOO_LONG = "too long"
SEVERAL_EDITS = "more than one edit"
EDIT_TOO_LARGE = "edit too large"
AND_MISSING = "'and' not kept"
WORDS_CHANGED = "words differ from input"
NOT_A_SWAP = "not a swap around 'and'"
INSERTION = "words added"  # REPLACE: "a dog" -> "a black dog"
DELETION = "words dropped"  # REPLACE: "a red car" -> "a car", or cut off: "... on a wooden"
NEGATION = "negation added"  # "holding" -> "not holding", "with" -> "without"
TRUNCATED = "stopped at max_new_tokens"  # the model had not finished its answer
SYMBOLS_CHANGED = "punctuation or symbols differ from input"
CASING_CHANGED = "a name lost its capital"  # SWAP: "John and Mary" -> "Mary and john"
NAME_REPLACED = "a name replaced"  # REPLACE: "the Red Sox" -> "the Crimson Sox"

# A replacement may grow a word into a short phrase ("behind" -> "to the rear of": +3 words).
MAX_EXTRA_WORDS = 4
MAX_REPLACED_WORDS = 3
MAX_REPLACEMENT_WORDS = 5

_LABEL = re.compile(
    r"^\s*(?:output|answer|changed sentence|modified sentence|new sentence|result|sentence)\s*:\s*",
    re.IGNORECASE,
)
_PREAMBLE = re.compile(
    r"^\s*(?:sure|certainly|of course|okay|ok|here is|here's|here are|absolutely|great)\b.*$",
    re.IGNORECASE,
)
_CHATTER_WORDS = re.compile(
    r"\b(?:synonym|synonyms|sentence|replaced|replacing|swapped|input|output|note|meaning)\b|^(?:i|as an)\b",
    re.IGNORECASE,
)
_SENTENCE_BREAK = re.compile(r"[.!?]+\s+\S")
_EXPLANATION = re.compile(
    r"^[(\[]?\s*(?:note|explanation|i (?:replaced|changed|swapped|used|have)|in this sentence|the word"
    r"|this sentence)\b",
    re.IGNORECASE,
)
_NEW_EXAMPLE = re.compile(r"^\s*input\s*:", re.IGNORECASE)
_QUOTED = re.compile(r"^[\"'“”‘’`]+(.*?)[\"'“”‘’`]+([.!?]?)\s*$")
# Formatting a chat model wraps an answer in: markdown emphasis, quote/list markers, an arrow,
# brackets around the whole line.
_LINE_MARKER = re.compile(r"^(?:>+|[-*+•]|\d+[.)]|→|->|=>)\s+")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3})(?=\S)(.+?)(?<=\S)\1")
_BRACKETED = re.compile(r"^[\[(](.*)[\])]([.!?]?)$")
_FINAL_PUNCTUATION = ".!?"
# Words that negate what they touch: a hard positive never adds one.
NEGATIONS = frozenset(
    {"not", "no", "never", "without", "nobody", "nothing", "none", "neither", "nor", "nowhere", "cannot"}
)


def clean_output(text: str, original: str | None = None) -> str:
    """Strip known wrappers from a raw model answer; return "" when nothing is left.

    `original` (the input caption), when given, keeps a caption that itself starts like a preamble
    ("Here is a dog ...") from being mistaken for one.
    """
    original_start = words(original)[:1] if original else []
    kept: list[str] = []
    for line in text.replace("\r", "").split("\n"):
        line = line.strip()
        if not line:
            continue
        if not kept and _NEW_EXAMPLE.match(line):
            continue  # the prompt's "Input: ..." echoed before "Output: <answer>": keep the answer
        if _NEW_EXAMPLE.match(line) or (kept and _EXPLANATION.match(line)):
            break  # a new few-shot example, or "I replaced X with Y": nothing after is the answer
        if not kept and _PREAMBLE.match(line) and words(line)[:1] != original_start:
            # "Sure! Here is the changed sentence:" alone, or followed by the answer on the line.
            _, colon, rest = line.partition(":")
            if not colon or not rest.strip():
                continue
            line = rest.strip()
        line = _strip_formatting(_LABEL.sub("", line).strip())
        if line:
            kept.append(line)
    return "\n".join(kept)


def _strip_formatting(line: str) -> str:
    """Remove markdown and wrapper formatting: "> **a man grasping a cup**" -> "a man grasping a cup"."""
    previous = None
    while line != previous:
        previous = line
        line = _LINE_MARKER.sub("", line).strip()
        line = _EMPHASIS.sub(r"\2", line)
        line = _LABEL.sub("", line).strip()
        bracketed = _BRACKETED.match(line)
        if bracketed:
            line = (bracketed.group(1) + bracketed.group(2)).strip()
        line = _unquote(line)
    return line


def _unquote(line: str) -> str:
    """'"A man grasping a bottle."' or '"A man grasping a bottle".' -> 'A man grasping a bottle.'"""
    match = _QUOTED.match(line)
    return match.group(1) + match.group(2) if match else line


def words(text: str) -> list[str]:
    """Lowercased word tokens, punctuation dropped: what the checks compare."""
    return [t.lower for t in tokenize(text)]


def symbols(text: str) -> list[str]:
    """The characters outside words and spaces (punctuation, quotes, emoji), one final . ! ? dropped,
    sorted: what a hard positive must keep ("t-shirt" and "man's" are words, their - and ' are not counted)."""
    text = text.rstrip()
    if text[-1:] in _FINAL_PUNCTUATION:
        text = text[:-1].rstrip()  # one final mark: an LLM that ends the sentence changed nothing
    spans = [(t.start, t.end) for t in tokenize(text)]
    outside, position = [], 0
    for start, end in spans:
        outside.append(text[position:start])
        position = end
    outside.append(text[position:])
    return sorted(ch for piece in outside for ch in piece if not ch.isspace())


def _sentence_count(text: str) -> int:
    return 1 + len(_SENTENCE_BREAK.findall(text.strip()))


def _paper_failures(original: str, candidate: str) -> str | None:
    """The failures the lenient rule refuses (ours; the paper and its released script filter nothing):
    nothing left, extra chatter, several sentences, the input repeated."""
    if not candidate.strip() or not words(candidate):
        return EMPTY
    original_words = set(words(original))
    chatter = [m.group().lower() for m in _CHATTER_WORDS.finditer(candidate)]
    if any(word not in original_words for word in chatter):
        return CHATTER
    if "\n" in candidate.strip() or _sentence_count(candidate) > _sentence_count(original):
        return SEVERAL_SENTENCES
    if words(candidate) == words(original):
        return IDENTICAL
    return None


def _common_checks(original: str, candidate: str) -> str | None:
    """Checks shared by every kind, in the order a reader would ask them."""
    reason = _paper_failures(original, candidate)
    if reason is not None:
        return reason
    if (
        len(words(candidate)) > len(words(original)) + MAX_EXTRA_WORDS
        or len(candidate) > 2 * len(original) + 20
    ):
        return TOO_LONG
    if symbols(candidate) != symbols(original):
        return SYMBOLS_CHANGED
    if sum(w in NEGATIONS or w.endswith("n't") for w in words(candidate)) > sum(
        w in NEGATIONS or w.endswith("n't") for w in words(original)
    ):
        return NEGATION
    return None


def validate_replace(original: str, candidate: str) -> str | None:
    """None when `candidate` is `original` with one word/short phrase replaced, else the reason.

    Casing and a final full stop are ignored (an LLM that adds one still made a valid edit). A
    replacement replaces: words only added ("a black dog") or only dropped ("a car" for "a red
    car"), and a phrase at the end shrunk to fewer words ("... on a timber" for "... on a wooden
    table": an answer cut off), are refused, and so is an added negation.
    """
    reason = _common_checks(original, candidate)
    if reason is not None:
        return reason
    before, after = words(original), words(candidate)
    edits = [
        op
        for op in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]
    if len(edits) > 1:
        return SEVERAL_EDITS
    tag, i1, i2, j1, j2 = edits[0]
    if tag == "insert":
        return INSERTION
    if any(i in proper_noun_tokens(original) for i in range(i1, i2)):
        return NAME_REPLACED  # a name is not an attribute: "the Red Sox" is no "Crimson Sox"
    shrinks = tag == "delete" or (i2 == len(before) and j2 == len(after) and j2 - j1 < i2 - i1)
    if shrinks and not _table_phrase_edit(before, after, i1, i2):
        return DELETION
    if i2 - i1 > MAX_REPLACED_WORDS or j2 - j1 > MAX_REPLACEMENT_WORDS:
        return EDIT_TOO_LARGE
    return None


@lru_cache(maxsize=1)
def _shorter_phrase_targets() -> dict[tuple[str, ...], frozenset[tuple[str, ...]]]:
    """Synonym-table phrases whose replacement is shorter ("on top of" -> "on", "in back of" -> "behind")."""
    table: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for rule in lexicon.hard_positive_rules(True):
        source = tuple(rule.source.split())
        for target in rule.targets:
            if len(target.split()) < len(source):
                table.setdefault(source, set()).add(tuple(target.split()))
    return {source: frozenset(targets) for source, targets in table.items()}


def _table_phrase_edit(before: list[str], after: list[str], i1: int, i2: int) -> bool:
    """True when the words dropped at [i1, i2) belong to a phrase of the paper's table that the table
    itself shortens: "pillow on top of a couch" -> "pillow on a couch" is a replacement, not a deletion."""
    for source, targets in _shorter_phrase_targets().items():
        for start in range(max(0, i2 - len(source)), min(i1, len(before) - len(source)) + 1):
            if tuple(before[start : start + len(source)]) != source:
                continue
            for target in targets:
                rebuilt = before[:start] + list(target) + before[start + len(source) :]
                if rebuilt == after:
                    return True
    return False


def is_conjunct_swap(original: str, candidate: str) -> bool:
    """True when candidate = P + B + "and" + A + S for original = P + A + "and" + B + S.

    This is stronger than "same words": "a red car and a blue bus" -> "a blue car and a red bus"
    has the same words but moves the colours between objects; it is not a swap of whole conjuncts.
    """
    before, after = words(original), words(candidate)
    if len(before) != len(after):
        return False
    n = len(before)
    for k, word in enumerate(before):
        if word != "and":
            continue
        for a in range(k):
            if before[:a] != after[:a]:
                break
            for b in range(k + 2, n + 1):
                swapped = before[:a] + before[k + 1 : b] + ["and"] + before[a:k] + before[b:]
                if swapped == after:
                    return True
    return False


def validate_swap(original: str, candidate: str) -> str | None:
    """None when `candidate` swaps the phrases around an "and" of `original`, else the reason."""
    reason = _common_checks(original, candidate)
    if reason is not None:
        return reason
    before, after = words(original), words(candidate)
    if after.count("and") != before.count("and") or "and" not in after:
        return AND_MISSING
    if sorted(before) != sorted(after):
        return WORDS_CHANGED
    if not is_conjunct_swap(original, candidate):
        return NOT_A_SWAP
    if _lost_capital(original, candidate):
        return CASING_CHANGED
    return None


def _lost_capital(original: str, candidate: str) -> bool:
    """True when a name of `original` is lowercased in `candidate` ("John and Mary" -> "Mary and john").

    A capitalised word after the first is a name and must stay capitalised. The first word may be
    capitalised only because it opens the caption ("A cat and a dog" -> "A dog and a cat" rightly
    lowercases it); it is held to the same rule when a name moved in front of it, which says the
    two were a list of names.
    """
    before, after = tokenize(original), tokenize(candidate)
    names = Counter(t.text for t in before[1:] if t.text[:1].isupper() and t.text != "I")
    if before and after and before[0].text[:1].isupper() and after[0].text in names:
        names[before[0].text] += 1
    capitals = Counter(t.text for t in after if t.text[:1].isupper())
    return any(capitals[name] < count for name, count in names.items())


# Hard-positive kinds (LLM and rules): the paper's REPLACE and SWAP, and the relation-targeted
# REPLACE variants. Which output check applies: every REPLACE variant is checked as a replacement.
VALIDATION_KIND: dict[str, str] = {
    "replace": "replace",
    "swap": "swap",
    "replace-verb": "replace",
    "replace-spatial": "replace",
}
KINDS: tuple[str, ...] = tuple(VALIDATION_KIND)


def check_kind(kind: str) -> str:
    """Return `kind` or raise a UserInputError that lists the valid kinds."""
    if kind not in VALIDATION_KIND:
        raise UserInputError(f"unknown generation kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def swap_precheck(kind: str, caption: str) -> str | None:
    """For a SWAP hard positive, why the paper would not make one for `caption` (`swap_rule`: no "and",
    or 15 words or more); None for other kinds."""
    if VALIDATION_KIND[kind] == "swap":
        return swap_ineligibility(caption)
    return None


# How strictly a generated hard positive is accepted:
# - "paper" (default; our rule, named for staying as close to the paper's unfiltered outputs as a usable
#   set allows: the paper names no failure mode and its released script filters nothing): empty,
#   chatter, several sentences, identical to the input, and for SWAP an "and"-swap that moved
#   attributes between objects (the same words, not a swap of whole conjuncts). Several edits ("on top
#   of" -> "atop" and "riding" -> "surfing"), a capitalised colour ("a Red shirt" -> "crimson"), an
#   inflection the prompt's own example makes ("antelope" -> "antelopes") and an answer cut at
#   max_new_tokens are kept, as the paper's procedure keeps them.
# - "strict" (ours): every check of `validate_replace` / `validate_swap` and the token-limit cut-off:
#   one replacement of at most a short phrase, no insertion, deletion or negation, the same symbols,
#   names kept, for SWAP exactly the same words swapped around one "and".
ACCEPTANCES = ("paper", "strict")


def check_acceptance(acceptance: str) -> str:
    """Return `acceptance` or raise a UserInputError that lists the valid ones."""
    if acceptance not in ACCEPTANCES:
        raise UserInputError(f"unknown acceptance {acceptance!r}; expected one of {', '.join(ACCEPTANCES)}")
    return acceptance


def accept_paper(kind: str, original: str, candidate: str) -> str | None:
    """The paper's acceptance (see `ACCEPTANCES`): None, or the failure mode the paper names."""
    reason = _paper_failures(original, candidate)
    if reason is None and VALIDATION_KIND[check_kind(kind)] == "swap":
        moved = sorted(words(candidate)) == sorted(words(original)) and not is_conjunct_swap(
            original, candidate
        )
        reason = NOT_A_SWAP if moved else None
    return reason


def validate(kind: str, original: str, candidate: str, acceptance: str = "strict") -> str | None:
    """The verdict on one candidate of a generation kind ("replace", "swap", "replace-verb",
    "replace-spatial") under `acceptance` ("paper" or "strict", see `ACCEPTANCES`)."""
    if check_acceptance(acceptance) == "paper":
        return accept_paper(kind, original, candidate)
    if VALIDATION_KIND[check_kind(kind)] == "swap":
        return validate_swap(original, candidate)
    return validate_replace(original, candidate)


def validate_negative(original: str, candidate: str) -> str | None:
    """A hard negative must differ from its caption in at least one word (casing and punctuation aside)."""
    return IDENTICAL if words(candidate) == words(original) else None
