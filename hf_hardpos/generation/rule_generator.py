"""The rule-based generators (`rules`) behind the same resumable-JSONL interface as the LLM path.

Why a wrapper: `hardpos generate --method rules` must write the same resumable JSONL as the LLM
path, so one output format serves both and downstream code does not care which produced it. Each
caption's random choice comes from `resumable.caption_rng(seed, caption)`, so a resumed run writes
exactly what an uninterrupted one would have.
"""

from __future__ import annotations

from collections.abc import Sequence

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import lexicon, rules, validation
from hf_hardpos.generation.resumable import Candidate, CaptionGenerator, caption_rng

NEGATIVE_KINDS = ("replace", "swap")


class RuleGenerator(CaptionGenerator):
    """Hard positives (default) or hard negatives (`negative=True`) of one kind, without a model.

    Kinds: "replace" (paper synonym table + extras), "replace-verb" / "replace-spatial" (the same
    table restricted to verbs / spatial prepositions), "swap" ("and"-conjunct swap; for negatives,
    the exchange of attributes between two objects).
    """

    method = "rules"

    def __init__(
        self,
        kind: str = "replace",
        *,
        negative: bool = False,
        seed: int = 0,
        batch_size: int = 256,
        progress: bool = True,
    ) -> None:
        self.kind = validation.check_kind(kind)
        if negative and kind not in NEGATIVE_KINDS:
            raise UserInputError(
                f"kind {kind!r} exists for hard positives only; use {' or '.join(NEGATIVE_KINDS)} for rule negatives"
            )
        if batch_size < 1:
            raise UserInputError(f"batch size must be >= 1, got {batch_size}")
        self.negative = negative
        self.polarity = "negative" if negative else "positive"
        self.kinds = (kind,)
        self.seed = seed
        self.batch_size = batch_size
        self.progress = progress

    def options(self) -> dict:
        return {**super().options(), "seed": self.seed}

    def perturb(self, caption: str) -> str | None:
        """One perturbation of `caption`, or None when no rule applies."""
        if self.kind == "swap":
            return rules.swap_hard_negative(caption) if self.negative else rules.swap_hard_positive(caption)
        if self.negative:
            return rules.replace_hard_negative(caption, caption_rng(self.seed, caption))
        sources = {"replace-verb": lexicon.VERB_SOURCES, "replace-spatial": lexicon.SPATIAL_SOURCES}.get(
            self.kind
        )
        return rules.replace_hard_positive(caption, caption_rng(self.seed, caption), sources=sources)

    def generate(self, captions: Sequence[str]) -> list[Candidate]:
        """Perturb a batch; hard positives are also run through the LLM path's validators."""
        results = []
        for caption in captions:
            output = self.perturb(caption)
            if output is None:
                reason = validation.NO_RULE
            elif self.negative:
                reason = validation.validate_negative(caption, output)
            else:
                reason = validation.validate(self.kind, caption, output, "strict")  # rules: our own checks
            results.append(Candidate(raw=None, output=output, reason=reason))
        return results

    def precheck(self, caption: str) -> str | None:
        return None if self.negative else validation.swap_precheck(self.kind, caption)
