"""CE-CLIP's typed hard negatives made the way its released generator makes them (the default).

Read from lezhang7/Enhance-FineGrained `data/dataset.py` @ef87eb7, class `TextAugment`, and
reproduced step for step, with two changes: its `random.choice` is unseeded, ours is drawn from
`caption_rng(seed, caption)` (one stream per type) so a run repeats and resumes exactly; and a fill
that decodes to nothing is rejected (below).

- Tagging: spaCy `en_core_web_sm` (ner and parser excluded); the texts of the tokens tagged
  NOUN, ADJ and VERB are collected in caption order (every spaCy token: "shirt" of "t-shirt" too).
- relation: only when the caption has **more than two** nouns, the first two noun texts are
  exchanged by string replacement over the whole caption (every occurrence, inside other words
  too: `replace(n0, "temp1")`, `replace(n1, n0)`, `replace("temp1", n1)`); otherwise CE-CLIP writes
  the placeholder "###", the only value its training marks invalid. We write that row as rejected
  (reason `validation.FEWER_THAN_THREE_NOUNS`, `output` null): the COCO builder turns it into a
  missing negative, which is what the placeholder meant.
- attribute / object / action (ADJ / NOUN / VERB): the first occurrence (substring) of one randomly
  chosen token text of that POS is replaced by the mask token; a caption without such a token
  becomes the bare mask token, which is filled too and counted valid (a one-word "negative").
- filling: a `fill-mask` pipeline (CE-CLIP: `distilroberta-base`) with top_k = 5, and the output is
  `results[min(3, len(results))]["sequence"]`: the **4th** candidate, with no check that it
  differs from the masked word or the caption.

Every record is therefore marked valid except the relation placeholder, as in CE-CLIP, and one
departure of ours: a taken fill that is empty or only whitespace is rejected (reason
`validation.EMPTY`, the output "" kept in the record), so a builder reads it as a missing negative.
It happens when the caption was masked whole and the LM's 4th fill is a special token, which the
pipeline's decoding drops; CE-CLIP keeps it valid and would train on the empty string, which is no
caption. The records keep the masked text and the five ranked fills so a reader sees what was
taken. Our filtered procedure (`mlm.MLMNegativeGenerator`, "ours") is the alternative.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from transformers import Pipeline, pipeline

from hf_hardpos.generation import validation
from hf_hardpos.generation.mlm import FILL_POS, RELATION_POS, MaskedLMGenerator
from hf_hardpos.generation.models import model_fingerprint
from hf_hardpos.generation.resumable import Candidate, caption_rng

# How each type is made, for a dataset card that names the procedure its columns came from (a
# manifest's `options.procedure`; outputs written before that key existed were made by "ours").
TYPE_PROCEDURES = {
    "relation": "the first two nouns (spaCy `NOUN`) exchanged by string replacement when the caption has more than "
    "two nouns (CE-CLIP's placeholder '###' otherwise: null here)",
    "attribute": "the first occurrence of one adjective (spaCy `ADJ`, drawn per caption and seed) masked, or the "
    "whole caption when it has none, and the 4th of the masked LM's top-5 fills taken, as CE-CLIP's TextAugment",
    "action": "the first occurrence of one verb (spaCy `VERB`, drawn per caption and seed) masked, or the whole "
    "caption when it has none, and the 4th of the masked LM's top-5 fills taken, as CE-CLIP's TextAugment",
    "object": "the first occurrence of one noun (spaCy `NOUN`, drawn per caption and seed) masked, or the whole "
    "caption when it has none, and the 4th of the masked LM's top-5 fills taken, as CE-CLIP's TextAugment",
}
TOP_K = 5  # TextAugment: pipeline('fill-mask', ..., top_k=5)
PICKED = 3  # TextAugment.select_unmasked_captions: results[min(3, len(results))]
_SWAP_PLACEHOLDER = "temp1"  # TextAugment.mask_captions


def ce_clip_relation(caption: str, nouns: Sequence[str]) -> str | None:
    """CE-CLIP's relation negative: the first two nouns exchanged by string replacement, or None
    (its "###") when the caption has two nouns or fewer."""
    if len(nouns) <= 2:
        return None
    first, second = nouns[0], nouns[1]
    return caption.replace(first, _SWAP_PLACEHOLDER).replace(second, first).replace(_SWAP_PLACEHOLDER, second)


def ce_clip_masked(caption: str, words: Sequence[str], mask_token: str, rng) -> str:
    """CE-CLIP's masked caption for one POS: the first occurrence of one drawn word masked, or the
    bare mask token when the caption has no word of that POS."""
    if not words:
        return mask_token
    return caption.replace(rng.choice(list(words)), mask_token, 1)


class CEClipNegativeGenerator(MaskedLMGenerator):
    """CE-CLIP's released negative generator (arguments: `MaskedLMGenerator`)."""

    procedure = "ce-clip"

    @cached_property
    def fill_mask(self) -> Pipeline:
        """CE-CLIP's `fill-mask` pipeline over the generator's model: top-5 fills per masked caption."""
        return pipeline(
            "fill-mask",
            model=self.model,
            tokenizer=self.tokenizer,
            top_k=TOP_K,
            device=self.model.device,
            trust_remote_code=False,
        )

    def settings(self) -> dict:
        return {"procedure": self.procedure, "top_k": TOP_K, "picked_index": PICKED,
                "model_fingerprint": model_fingerprint(self.model)}  # fmt: skip

    def _fill(self, masked: Sequence[str]) -> list[list[dict]]:
        if not masked:
            return []
        results = self.fill_mask(list(masked), batch_size=self.batch_size)
        # one input gives the list of candidates itself, several give one list per input
        return [results] if len(masked) == 1 else list(results)

    def generate_kinds(self, captions: Sequence[str]) -> list[dict[str, Candidate]]:
        """Tag the batch, build CE-CLIP's masked captions, fill them all in one pipeline call."""
        mask = self.tokenizer.mask_token
        plans: list[dict[str, object]] = []
        masked: list[str] = []
        for caption, words in zip(captions, self.tagger(captions)):
            plan: dict[str, object] = {}
            for kind in self.kinds:
                if kind == "relation":
                    plan[kind] = ce_clip_relation(caption, [w.text for w in words if w.pos == RELATION_POS])
                    continue
                texts = [w.text for w in words if w.pos == FILL_POS[kind]]
                plan[kind] = len(masked)
                masked.append(
                    ce_clip_masked(caption, texts, mask, caption_rng(self.seed, caption, stream=kind))
                )
            plans.append(plan)
        filled = self._fill(masked)
        results = []
        for plan in plans:
            row = {}
            for kind in self.kinds:
                if kind == "relation":
                    swapped = plan[kind]
                    reason = validation.FEWER_THAN_THREE_NOUNS if swapped is None else None
                    row[kind] = Candidate(raw=None, output=swapped, reason=reason)
                    continue
                ranked = filled[plan[kind]]
                picked = ranked[min(PICKED, len(ranked))]["sequence"]
                extra = {
                    "masked": masked[plan[kind]],
                    "candidates": [
                        {"output": r["sequence"], "score": round(float(r["score"]), 6)} for r in ranked
                    ],
                }
                # our one departure from TextAugment: an empty fill is no caption (module docstring)
                reason = validation.EMPTY if not picked.strip() else None
                row[kind] = Candidate(raw=None, output=picked, reason=reason, extra=extra)
            results.append(row)
        return results
