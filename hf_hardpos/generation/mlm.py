"""Typed hard negatives from a masked LM at part-of-speech slots: our filtered procedure ("ours").

CE-CLIP's own released procedure is `ce_clip.CEClipNegativeGenerator` (the default of
`hardpos generate --method mlm`); this module is the alternative that refuses what CE-CLIP's keeps
(a fill equal to the masked word or its synonym, a fill inside a hyphenated word), and the tagger,
the types and the input checks both share.

CE-CLIP trains with four negative *types* per caption, and its CMR loss keeps one threshold per
type, so every record says which type made it (docs/reference.md, Generating hard positives):

- attribute: an adjective (spaCy POS `ADJ`) masked and filled by the LM;
- action: a verb (`VERB`) masked and filled;
- object: a noun (`NOUN`) masked and filled;
- relation: two different nouns swapped (who does what to whom changes, the words do not).

For a fill, the *site* (which adjective, verb or noun) is drawn with `caption_rng(seed, caption)`
(one stream per type), so the choice is deterministic per caption and seed and independent of the
other captions in the batch; at that site the LM's top fills are ranked by log-probability and the
best one that is a whole word, differs from the masked word (and its plural/singular) and is not
its synonym in the hard-positive lexicon becomes the output; the next ones are kept as ranked
`candidates`. For a relation, the drawn noun is swapped with each other noun and the swaps are
ranked by the LM's log-probability of the two moved words in their new places. No word inside a
protected phrase of the lexicon ("in front of", "on top of", "years old", ...) is masked or moved.

Only words that are whole words of the caption are masked or moved: spaCy splits "t-shirt" into
"t", "-", "shirt", and filling "shirt" alone gives "t-plates".

POS tags come from a pluggable tagger (`Tagger`: captions -> tagged words with character spans);
`spacy_tagger` wraps a spaCy pipeline (the optional extra), and says how to install an English
model when none is present.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForMaskedLM, PreTrainedModel, PreTrainedTokenizerBase

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import lexicon, validation
from hf_hardpos.generation.models import load_model_and_tokenizer, model_fingerprint
from hf_hardpos.generation.resumable import Candidate, CaptionGenerator, caption_rng
from hf_hardpos.generation.rules import protected_character_spans, replace_words
from hf_hardpos.generation.tokens import tokenize

TYPES: tuple[str, ...] = ("relation", "attribute", "action", "object")
MLM_KINDS: tuple[str, ...] = (*TYPES, "all")
FILL_POS: dict[str, str] = {"attribute": "ADJ", "action": "VERB", "object": "NOUN"}
RELATION_POS = "NOUN"
_WORD = re.compile(r"^[^\W\d_]+(?:['-][^\W\d_]+)*$")


@dataclass(frozen=True)
class TaggedWord:
    """One word of a caption with its universal POS tag and character span."""

    text: str
    pos: str
    start: int
    end: int


Tagger = Callable[[Sequence[str]], list[list[TaggedWord]]]


def spacy_tagger(pipeline: str | Path | object = "en_core_web_sm") -> Tagger:
    """A `Tagger` from a spaCy pipeline: a loaded `spacy.Language`, or a package name / folder.

    Raises UserInputError with the install commands when spaCy or the English model is missing.
    """
    if isinstance(pipeline, (str, Path)):
        try:
            import spacy
        except ImportError:
            raise UserInputError(
                "--method mlm needs spaCy for the part-of-speech tags: pip install 'hf_hardpos[mlm]' "
                f"(or pip install spacy), then python -m spacy download {pipeline}"
            ) from None
        try:
            # CE-CLIP loads en_core_web_sm with exclude=['ner', 'parser']; the lemmatizer only sets lemmas
            nlp = spacy.load(pipeline, exclude=["ner", "parser", "lemmatizer"])
        except OSError:
            raise UserInputError(
                f"spaCy pipeline {str(pipeline)!r} is not installed: python -m spacy download en_core_web_sm "
                "(or pass --spacy-model with an installed pipeline name or folder)"
            ) from None
    else:
        nlp = pipeline

    def tag(captions: Sequence[str]) -> list[list[TaggedWord]]:
        return [
            [TaggedWord(t.text, t.pos_, t.idx, t.idx + len(t.text)) for t in doc]
            for doc in nlp.pipe(list(captions))
        ]

    return tag


def max_positions(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> int:
    """How many tokens (special ones included) the masked LM takes: the smaller of the tokenizer's
    `model_max_length` and the model's position embeddings."""
    limits = [getattr(model.config, "max_position_embeddings", None), tokenizer.model_max_length]
    return min(int(limit) for limit in limits if limit is not None and 0 < limit < 1_000_000)


def mlm_precheck(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, caption: str) -> str | None:
    """A reason the masked LM cannot take `caption`: it holds the mask token (a second mask would
    be filled too), or it has more tokens than the model has positions. Recorded per row instead of
    crashing the run (and every resume after it)."""
    if tokenizer.mask_token and tokenizer.mask_token in caption:
        return validation.MASK_IN_INPUT
    if len(tokenizer(caption)["input_ids"]) > max_positions(model, tokenizer):
        return validation.TOO_LONG_FOR_MODEL
    return None


def _at_least_one(settings: dict[str, int]) -> None:
    """UserInputError naming the first setting below 1 ("batch size must be >= 1, got 0")."""
    for name, value in settings.items():
        if value < 1:
            raise UserInputError(f"{name} must be >= 1, got {value}")


def _same_word(fill: str, word: str) -> bool:
    """The fill is the masked word itself, or its plural/singular ("dog" / "dogs", "bus" / "buses")."""
    fill, word = fill.lower(), word.lower()
    return fill == word or fill in (word + "s", word + "es") or word in (fill + "s", fill + "es")


class MaskedLMGenerator(CaptionGenerator):
    """What both masked-LM procedures (ours below, CE-CLIP's in `ce_clip`) share: loading the masked LM,
    the checks on its arguments and inputs, and the options that identify a run of it (procedure,
    model, dtype, seed, weights fingerprint). `kind` is one type or "all" (four records per caption)."""

    method = "mlm"
    polarity = "negative"
    procedure: str

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        kind: str = "all",
        *,
        tagger: Tagger,
        seed: int = 0,
        batch_size: int = 32,
        progress: bool = True,
    ) -> None:
        if kind not in MLM_KINDS:
            raise UserInputError(
                f"unknown masked-LM negative type {kind!r}; expected one of {', '.join(MLM_KINDS)}"
            )
        if tokenizer.mask_token_id is None:
            raise UserInputError(
                f"{model.name_or_path}: the tokenizer has no mask token; --method mlm needs a masked LM"
            )
        _at_least_one({"batch size": batch_size})
        self.model, self.tokenizer, self.tagger = model.eval(), tokenizer, tagger
        self.kind, self.kinds = kind, TYPES if kind == "all" else (kind,)
        self.seed, self.batch_size, self.progress = seed, batch_size, progress

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str | Path = "distilroberta-base",
        kind: str = "all",
        *,
        tagger: Tagger,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype = "auto",
        **kwargs,
    ):
        """Load a masked LM (CE-CLIP used distilroberta-base) and its tokenizer, and wrap them."""
        model, tokenizer = load_model_and_tokenizer(
            AutoModelForMaskedLM, model_name_or_path, device=device, dtype=dtype
        )
        return cls(model, tokenizer, kind, tagger=tagger, **kwargs)

    def options(self) -> dict:
        return {
            **super().options(),
            "procedure": self.procedure,
            "model": str(self.model.name_or_path),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "seed": self.seed,
            "model_fingerprint": model_fingerprint(self.model),
        }

    def precheck(self, caption: str) -> str | None:
        """Captions the masked LM cannot take (longer than its positions, or holding its mask token)."""
        return mlm_precheck(self.model, self.tokenizer, caption)


class MLMNegativeGenerator(MaskedLMGenerator):
    """Our filtered typed hard negatives from a masked LM: the best `num_candidates` acceptable fills
    among the LM's top `search_k` are kept, ranked (other arguments: `MaskedLMGenerator`)."""

    procedure = "ours"

    def __init__(self, *args: Any, num_candidates: int = 5, search_k: int = 50, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _at_least_one({"num_candidates": num_candidates, "search_k": search_k})
        self.num_candidates, self.search_k = num_candidates, search_k
        self._synonyms = lexicon.synonyms()
        self._whole_word: dict[tuple[int, bool], str | None] = {}

    def options(self) -> dict:
        return {**super().options(), "num_candidates": self.num_candidates, "search_k": self.search_k}

    def settings(self) -> dict:
        return {
            "procedure": self.procedure,
            "search_k": self.search_k,
            "model_fingerprint": model_fingerprint(self.model),
        }

    # ---- the LM ------------------------------------------------------------------------------

    @torch.inference_mode()
    def _mask_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """Log-probabilities over the vocabulary at the single mask token of each text, [n, vocab]."""
        rows = []
        for start in range(0, len(texts), 64):
            encoded = self.tokenizer(list(texts[start : start + 64]), return_tensors="pt", padding=True)
            encoded = encoded.to(self.model.device)
            logits = self.model(**encoded).logits
            where = (encoded["input_ids"] == self.tokenizer.mask_token_id).nonzero()
            if len(where) != len(encoded["input_ids"]):
                raise RuntimeError("expected exactly one mask token per text")
            rows.append(torch.log_softmax(logits[where[:, 0], where[:, 1]].float(), dim=-1).cpu())
        return torch.cat(rows) if rows else torch.empty(0)

    def _masked(self, caption: str, start: int, end: int) -> str:
        return caption[:start] + self.tokenizer.mask_token + caption[end:]

    def _word_of(self, token_id: int, initial: bool) -> str | None:
        """The word a vocabulary entry stands for when it fills a whole word, else None.

        A fill must be one whole word: tokenising it (after a space, unless caption-initial) must
        give back exactly this token, which rules out word pieces ("##ing", BPE continuations),
        punctuation and special tokens for any tokenizer.
        """
        key = (token_id, initial)
        if key not in self._whole_word:
            word = self.tokenizer.decode([token_id]).strip()
            ids = self.tokenizer(("" if initial else " ") + word, add_special_tokens=False)["input_ids"]
            ok = (
                bool(_WORD.match(word))
                and ids == [token_id]
                and token_id not in self.tokenizer.all_special_ids
            )
            self._whole_word[key] = word if ok else None
        return self._whole_word[key]

    def _first_token(self, word: str, initial: bool) -> int:
        return self.tokenizer(("" if initial else " ") + word, add_special_tokens=False)["input_ids"][0]

    # ---- one caption -------------------------------------------------------------------------

    def _fills(self, word: TaggedWord, log_probs: torch.Tensor) -> list[tuple[str, float]]:
        """Acceptable fills at one site, best first: whole words, not the word, not its synonyms."""
        refused = self._synonyms.get(word.text.lower(), frozenset())
        fills = []
        top = torch.topk(log_probs, min(self.search_k, log_probs.numel()))
        for score, token_id in zip(top.values.tolist(), top.indices.tolist()):
            fill = self._word_of(token_id, word.start == 0)
            if fill is None or _same_word(fill, word.text) or fill.lower() in refused:
                continue
            fills.append((fill, score))
            if len(fills) == self.num_candidates:
                break
        return fills

    def _fill_candidate(self, caption: str, kind: str, sites: list[TaggedWord], fills: dict) -> Candidate:
        if not sites:
            return Candidate(raw=None, output=None, reason=validation.NO_POSITION)
        order = list(range(len(sites)))
        caption_rng(self.seed, caption, stream=kind).shuffle(order)
        for i in order:
            ranked = fills[sites[i].start]
            if ranked:
                site = sites[i]
                texts = [
                    (replace_words(caption, [(site.start, site.end, fill)]), score) for fill, score in ranked
                ]
                return self._ranked(caption, texts)
        return Candidate(raw=None, output=None, reason=validation.NO_FILL)

    def _ranked(self, caption: str, texts: list[tuple[str, float]]) -> Candidate:
        output = texts[0][0]
        return Candidate(
            raw=None,
            output=output,
            reason=validation.validate_negative(caption, output),
            extra={"candidates": [{"output": t, "log_prob": round(s, 4)} for t, s in texts]},
        )

    def _relation_pairs(
        self, caption: str, nouns: list[TaggedWord]
    ) -> tuple[TaggedWord, list[TaggedWord]] | None:
        """The drawn noun and the other nouns it can swap with (a different word), or None."""
        eligible = [n for n in nouns if any(m.text.lower() != n.text.lower() for m in nouns)]
        if not eligible:
            return None
        site = caption_rng(self.seed, caption, stream="relation").choice(eligible)
        return site, [m for m in nouns if m.text.lower() != site.text.lower()]

    def _swap_texts(self, caption: str, a: TaggedWord, b: TaggedWord) -> tuple[str, str]:
        """The swapped caption with a's new place masked, and with b's new place masked."""
        first, second = (a, b) if a.start < b.start else (b, a)

        def build(mask_first: bool) -> str:
            left = self.tokenizer.mask_token if mask_first else second.text
            right = first.text if mask_first else self.tokenizer.mask_token
            return (
                caption[: first.start]
                + left
                + caption[first.end : second.start]
                + right
                + caption[second.end :]
            )

        return build(True), build(False)

    # ---- a batch -----------------------------------------------------------------------------

    def generate_kinds(self, captions: Sequence[str]) -> list[dict[str, Candidate]]:
        """Tag the batch, run one LM pass over every masked site and swap, and rank per type."""
        tagged = self.tagger(captions)
        plans = []
        texts: list[str] = []
        for caption, words in zip(captions, tagged):
            protected = protected_character_spans(caption)
            whole = {(t.start, t.end) for t in tokenize(caption)}
            words = [
                w for w in words
                if _WORD.match(w.text) and (w.start, w.end) in whole and not any(a <= w.start < b for a, b in protected)
            ]  # fmt: skip
            plan = {"sites": {}, "fill_rows": {}, "relation": None, "swap_rows": []}
            for kind in self.kinds:
                if kind == "relation":
                    pairs = self._relation_pairs(caption, [w for w in words if w.pos == RELATION_POS])
                    plan["relation"] = pairs
                    if pairs is not None:
                        site, partners = pairs
                        for partner in partners:
                            masked_a, masked_b = self._swap_texts(caption, site, partner)
                            plan["swap_rows"].append((partner, len(texts)))
                            texts += [masked_a, masked_b]
                    continue
                sites = [w for w in words if w.pos == FILL_POS[kind]]
                plan["sites"][kind] = sites
                for site in sites:
                    if site.start not in plan["fill_rows"]:
                        plan["fill_rows"][site.start] = len(texts)
                        texts.append(self._masked(caption, site.start, site.end))
            plans.append(plan)
        log_probs = self._mask_log_probs(texts)
        results = []
        for caption, plan in zip(captions, plans):
            result = {}
            for kind in self.kinds:
                if kind == "relation":
                    result[kind] = self._relation_candidate(caption, plan, log_probs)
                    continue
                sites = plan["sites"][kind]
                fills = {s.start: self._fills(s, log_probs[plan["fill_rows"][s.start]]) for s in sites}
                result[kind] = self._fill_candidate(caption, kind, sites, fills)
            results.append(result)
        return results

    def typed_negatives(self, captions: Sequence[str]) -> list[dict[str, str | None]]:
        """`{type: negative or None}` per caption, for dataset builders (CE-CLIP's four columns).

        Batches by `batch_size`; a caption the type cannot perturb gets None, as do empty captions and
        those `precheck` refuses.
        """
        results: list[dict[str, str | None]] = []
        usable = [bool(c and c.strip()) and self.precheck(c) is None for c in captions]
        for start in range(0, len(captions), self.batch_size):
            batch = list(captions[start : start + self.batch_size])
            flags = usable[start : start + self.batch_size]
            present = [c for c, ok in zip(batch, flags) if ok]
            made = iter(self.generate_kinds(present)) if present else iter(())
            for ok in flags:
                row = next(made) if ok else {}
                results.append({k: row[k].output if k in row and row[k].valid else None for k in self.kinds})
        return results

    def _relation_candidate(self, caption: str, plan: dict, log_probs: torch.Tensor) -> Candidate:
        if plan["relation"] is None:
            return Candidate(raw=None, output=None, reason=validation.TOO_FEW_NOUNS)
        site, _ = plan["relation"]
        scored = []
        for partner, row in plan["swap_rows"]:
            first, second = (site, partner) if site.start < partner.start else (partner, site)
            # Row `row`: the first place masked (the second word moves there); row + 1: the reverse.
            score = (
                log_probs[row, self._first_token(second.text, first.start == 0)].item()
                + log_probs[row + 1, self._first_token(first.text, False)].item()
            )
            # A caption-initial word loses its capital when it moves ("Dogs chase cats" -> "Cats chase dogs").
            moved_first = first.text.lower() if first.start == 0 else first.text
            edits = [(first.start, first.end, second.text), (second.start, second.end, moved_first)]
            swapped = replace_words(caption, edits)
            scored.append((swapped, score))
        scored.sort(key=lambda item: -item[1])
        return self._ranked(caption, scored[: self.num_candidates])
