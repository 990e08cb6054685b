"""Decoding that depends on (seed, row) only, and the decoding values `generate` really applies.

Why: `model.generate(do_sample=True)` draws every row's next token from one torch random stream
(`torch.multinomial` over the whole batch), so what a row samples depends on which captions share
its batch: a run resumed at another batch size, or split over machines, writes other text for the
same rows than one uninterrupted process. Here every row gets its own uniform numbers, drawn from a
CPU `torch.Generator` seeded by (seed, row index), one per new token; the token is picked by inverse
CDF from the row's distribution after the model's own logits processors and warpers. The draw is
the same on any device, at any batch size, in any shard and after any resume (the model's logits
still carry the numerical noise of the batch shape: a uniform that falls within float rounding of a
CDF boundary could pick the neighbour, which for 20-30 tokens of a float32/float16 model is rare).

The distribution sampled is the one `generate` samples with the same configuration: the warpers
are the classes `transformers` builds in `GenerationMixin._get_logits_processor`, in its order
(temperature, top-k, top-p, min-p, typical, epsilon, eta), with `min_tokens_to_keep=1`; the
other logits processors (repetition penalty, no-repeat n-grams, minimum length, bad words ...)
still run inside `generate`, before ours, as they do before the warpers there.

`effective_generation_config` resolves what `generate` would apply (the model's
`generation_config.json`, then transformers' global defaults such as top-k 50, then the call's
arguments), so the manifest records values, never `null` where a default applied.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch
from transformers import (
    EpsilonLogitsWarper,
    EtaLogitsWarper,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    MinPLogitsWarper,
    PreTrainedModel,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from hf_hardpos.errors import UserInputError

# Every generation_config field that decides the decoded tokens of a single-sequence decoder run
# (recorded in the manifest with the value in force).
DECODING_FIELDS = (
    "do_sample", "temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff",
    "num_beams", "num_return_sequences", "repetition_penalty", "encoder_repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "sequence_bias", "suppress_tokens",
    "begin_suppress_tokens", "forced_bos_token_id", "forced_eos_token_id", "exponential_decay_length_penalty",
    "renormalize_logits", "remove_invalid_values", "max_new_tokens", "min_new_tokens", "min_length",
    "eos_token_id", "pad_token_id", "guidance_scale",
)  # fmt: skip
# Fields whose unset value means "no constraint", recorded as that neutral value rather than null.
_NEUTRAL_WHEN_UNSET = {"min_new_tokens": 0, "min_p": 0.0, "guidance_scale": 1.0}


def effective_generation_config(model: PreTrainedModel, **arguments) -> GenerationConfig:
    """The configuration `model.generate(**arguments)` decodes with: the model's generation_config,
    transformers' global defaults for what it leaves unset (top_k 50, top_p 1.0, ...), then `arguments`.

    Uses `GenerationMixin._prepare_generation_config`, the step `generate` itself runs, so the
    values are the library's and not a copy of its defaults.
    """
    config, _ = model._prepare_generation_config(None, **arguments)
    return config


def decoding_values(config: GenerationConfig) -> dict:
    """`DECODING_FIELDS` of a resolved configuration, JSON-ready; "no constraint" fields get their neutral value."""
    values = {}
    for field in DECODING_FIELDS:
        value = getattr(config, field, None)
        if value is None and field in _NEUTRAL_WHEN_UNSET:
            value = _NEUTRAL_WHEN_UNSET[field]
        values[field] = value
    return values


def sampling_warpers(config: GenerationConfig) -> LogitsProcessorList:
    """The warpers `generate` appends for sampling with `config`, same classes, same order, same conditions."""
    warpers = LogitsProcessorList()
    if config.temperature is not None and config.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if getattr(config, "top_h", None) is not None:
        raise UserInputError(
            "top_h sampling in the model's generation_config is not supported by row-seeded sampling"
        )
    if config.top_k is not None and config.top_k != 0:
        warpers.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
    if config.top_p is not None and config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
    if config.min_p is not None:
        warpers.append(MinPLogitsWarper(min_p=config.min_p, min_tokens_to_keep=1))
    if config.typical_p is not None and config.typical_p < 1.0:
        warpers.append(TypicalLogitsWarper(mass=config.typical_p, min_tokens_to_keep=1))
    if config.epsilon_cutoff is not None and 0.0 < config.epsilon_cutoff < 1.0:
        warpers.append(EpsilonLogitsWarper(epsilon=config.epsilon_cutoff, min_tokens_to_keep=1))
    if config.eta_cutoff is not None and 0.0 < config.eta_cutoff < 1.0:
        warpers.append(EtaLogitsWarper(epsilon=config.eta_cutoff, min_tokens_to_keep=1))
    return warpers


def row_seed(seed: int, row: int) -> int:
    """The generator seed of one input row: sha256 of (seed, row), so neighbouring rows are unrelated."""
    digest = hashlib.sha256(f"hf_hardpos.sample\x00{seed}\x00{row}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


def row_uniforms(seed: int, rows: Sequence[int], steps: int) -> torch.Tensor:
    """(len(rows), steps) float64 uniforms in [0, 1): row i's draws come from its own CPU generator."""
    draws = []
    for row in rows:
        generator = torch.Generator(device="cpu").manual_seed(row_seed(seed, int(row)))
        draws.append(torch.rand(steps, generator=generator, dtype=torch.float64))
    return torch.stack(draws) if draws else torch.empty(0, steps, dtype=torch.float64)


class RowSeededSampler(LogitsProcessor):
    """Picks each row's next token from its own uniforms and returns logits that allow only that token.

    Run it with `do_sample=False` (greedy then takes the one allowed token) and the model's warpers
    passed as `warpers`: `generate` applies its other processors first, as it does when sampling.
    """

    def __init__(self, warpers: LogitsProcessorList, uniforms: torch.Tensor, prompt_length: int) -> None:
        self.warpers = warpers
        self.uniforms = uniforms
        self.prompt_length = prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_length
        warped = self.warpers(input_ids, scores)
        probabilities = torch.softmax(warped.double(), dim=-1)
        cdf = probabilities.cumsum(dim=-1)
        u = self.uniforms[:, step].to(cdf.device) * cdf[:, -1]
        tokens = (cdf <= u.unsqueeze(1)).sum(dim=-1).clamp(max=scores.shape[-1] - 1)
        # a token whose probability is 0 can only be reached through rounding at the CDF's end: step back
        zero = probabilities.gather(1, tokens.unsqueeze(1)).squeeze(1) == 0
        if zero.any():
            tokens = torch.where(zero, probabilities.argmax(dim=-1), tokens)
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, tokens.unsqueeze(1), 0.0)
        return forced


def check_row_seeded(config: GenerationConfig) -> None:
    """Refuse a sampled configuration that row-seeded sampling cannot reproduce (beams, several sequences)."""
    if (config.num_beams or 1) > 1 or (config.num_return_sequences or 1) > 1:
        raise UserInputError(
            f"the model's generation_config samples with num_beams={config.num_beams}, num_return_sequences="
            f"{config.num_return_sequences}: row-seeded sampling draws one sequence per row without beams; "
            "use --decoding greedy or a generation_config with num_beams=1"
        )
