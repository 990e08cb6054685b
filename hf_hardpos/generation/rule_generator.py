"""The rule-based generators behind the same batch/JSONL interface as `LLMGenerator`.

Why a wrapper: `hardpos generate --method rules` must write the same resumable JSONL as the LLM
path, so one output format serves both and downstream code does not care which produced it. Each
caption gets its own `random.Random` seeded from (seed, caption text): the choice for a caption does
not depend on which other captions were processed in this run, so a resumed run writes exactly
what an uninterrupted one would have.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from hf_hardpos.generation import lexicon, prompts, resumable, rules, validation
from hf_hardpos.generation.resumable import Candidate

NO_RULE = "no rule applies"
NO_AND = "no 'and' in input"


class RuleGenerator:
    """Hard positives (default) or hard negatives (`negative=True`) of one kind, without a model.

    Kinds: "replace" (paper synonym table + extras), "replace-verb" / "replace-spatial" (the same
    table restricted to verbs / spatial prepositions), "swap" ("and"-conjunct swap; for negatives,
    the exchange of attributes between two objects).
    """

    def __init__(
        self,
        kind: str = "replace",
        *,
        negative: bool = False,
        seed: int = 0,
        batch_size: int = 256,
        progress: bool = True,
    ) -> None:
        self.kind = prompts.check_kind(kind)
        if negative and kind in ("replace-verb", "replace-spatial"):
            raise ValueError(f"kind {kind!r} exists for hard positives only; use 'replace' or 'swap' for negatives")
        self.negative = negative
        self.seed = seed
        self.batch_size = batch_size
        self.progress = progress

    def _rng(self, caption: str) -> random.Random:
        return random.Random(f"{self.seed}\x00{caption}")

    def perturb(self, caption: str) -> str | None:
        """One perturbation of `caption`, or None when no rule applies."""
        if self.kind == "swap":
            return rules.swap_hard_negative(caption) if self.negative else rules.swap_hard_positive(caption)
        if self.negative:
            return rules.replace_hard_negative(caption, self._rng(caption))
        sources = {"replace-verb": lexicon.VERB_SOURCES, "replace-spatial": lexicon.SPATIAL_SOURCES}.get(self.kind)
        return rules.replace_hard_positive(caption, self._rng(caption), sources=sources)

    def generate(self, captions: Sequence[str]) -> list[Candidate]:
        """Perturb a batch; hard positives are also run through the LLM path's validators."""
        results = []
        for caption in captions:
            output = self.perturb(caption)
            if output is None:
                reason = NO_RULE
            elif self.negative:
                reason = validation.IDENTICAL if validation.words(output) == validation.words(caption) else None
            else:
                reason = validation.validate(self.kind, caption, output)
            results.append(Candidate(raw=None, output=output, reason=reason))
        return results

    def precheck(self, caption: str) -> str | None:
        if self.kind == "swap" and not self.negative and "and" not in validation.words(caption):
            return NO_AND
        return None

    def generate_to_jsonl(self, inputs: Sequence[str | None], output_path: str | Path) -> dict:
        """Same resumable JSONL as `LLMGenerator.generate_to_jsonl`."""
        what = "hard negatives" if self.negative else "hard positives"
        return resumable.generate_to_jsonl(
            inputs,
            output_path,
            self.generate,
            batch_size=self.batch_size,
            precheck=self.precheck,
            progress=self.progress,
            desc=f"{what} ({self.kind}, rules)",
        )
