"""Hard-positive generation with any causal LM from the Hub or disk, as the paper's released script runs it.

Why this shape: the default reproduces `generate_hard_positives.py` of amitakamath/hard_positives
(commit 33addaa, read for this package), which made the paper's COCO hard positives (Appendix C):

- the template with the caption filled in, then `.strip()`ped (the prompt ends in "Output:" with no
  trailing space); **no chat template**, special tokens added as the tokenizer does by default;
- **no decoding arguments**: the model's own `generation_config.json` decides (for
  Llama-2-70b-chat that samples, temperature 0.6, top-p 0.9), with the seed recorded;
- left padding with the EOS token as pad, so the new tokens of every row start together (the
  attention mask makes a padded row give the same answer as an unpadded one);
- float16 weights where the device allows (CUDA), float32 on CPU;
- `max_new_tokens` per template: the script's default is 20 for every template, Appendix C says
  30 for REPLACE and 20 for SWAP; we follow the paper's text (30 for the three REPLACE templates,
  20 for SWAP) and record the value used.

A chat template (`use_chat_template=True`) and greedy decoding (`decoding="greedy"`) are named
options, not the paper's protocol; the manifest of every output says which ran. The four templates
are the script's, verbatim: `replace`, `swap`, `replace_verb`, `replace_spatial` (our kinds
"replace", "swap", "replace-verb", "replace-spatial").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import validation
from hf_hardpos.generation.models import load_model_and_tokenizer, model_fingerprint
from hf_hardpos.generation.resumable import Candidate, CaptionGenerator

# The released script's templates, verbatim (each ends in "Output: "; `build_prompt` strips it).
REPLACE = """Replace one word in the input sentence with a synonym, without changing the meaning of the sentence. Only output the changed sentence.
Input: {example}
Output: """

SWAP = """Swap the words around the word "and" in a sentence without changing the meaning. Only respond with the changed sentence.

Input: three giraffes and two antelope
Output: two antelopes and three giraffes

Input: a blue and white stained glass clock shows the time
Output: a white and blue stained glass clock shows the time

Input: a mixture of rice and broccoli are put together
Output: a mixture of broccoli and rice are put together

Input: a bathroom with a sink, toilet and shower
Output: a bathroom with a sink, shower and toilet

Input: there is a man wearing glasses and holding a wine bottle
Output: there is a man holding a wine bottle and wearing glasses

Input: {example}
Output: """

REPLACE_VERB = """Replace one verb in this sentence with a synonym, without changing the meaning of the sentence. Only output the changed sentence.
Input: A person wearing a shirt and smiling.
Output: A person clothed in a shirt and smiling.

Input: {example}
Output: """

REPLACE_SPATIAL = """Replace a spatial preposition in this sentence with a synonym, without changing the meaning of the sentence. Only output the changed sentence.
Input: A city filled with tall buildings under a cloudy sky.
Output: A city filled with tall buildings beneath a cloudy sky.

Input: {example}
Output: """

PROMPTS: dict[str, str] = {
    "replace": REPLACE,
    "swap": SWAP,
    "replace-verb": REPLACE_VERB,
    "replace-spatial": REPLACE_SPATIAL,
}
# The released script's `--template` name of each kind (recorded in the manifest).
TEMPLATE_NAMES: dict[str, str] = {
    "replace": "replace", "swap": "swap", "replace-verb": "replace_verb", "replace-spatial": "replace_spatial"
}
# Appendix C: 30 new tokens for REPLACE, 20 for SWAP (the script's own default is 20 for all); the
# relation-targeted variants are REPLACE prompts and get its budget.
MAX_NEW_TOKENS: dict[str, int] = {"replace": 30, "swap": 20, "replace-verb": 30, "replace-spatial": 30}
# "model": no decoding arguments, the model's generation_config decides (the released script);
# "greedy": argmax decoding whatever the model's config says (ours, reproducible without a seed).
DECODINGS = ("model", "greedy")
# The generation_config fields that decide what is decoded (recorded with every run).
_DECODING_FIELDS = ("do_sample", "temperature", "top_p", "top_k", "num_beams", "repetition_penalty",
                    "no_repeat_ngram_size", "typical_p", "min_p")  # fmt: skip


def build_prompt(kind: str, caption: str) -> str:
    """The prompt for one caption as the released script builds it: template filled, then stripped.

    `str.replace`, not the script's `str.format`: a caption may contain braces.
    """
    return PROMPTS[validation.check_kind(kind)].replace("{example}", caption).strip()


def default_dtype(device: str | torch.device | None) -> torch.dtype:
    """float16 on CUDA, as the released script loads the model; float32 elsewhere (CPU half is slow)."""
    if device is None:
        return torch.float16 if torch.cuda.is_available() else torch.float32
    return torch.float16 if torch.device(device).type == "cuda" else torch.float32


def _batch_seed(seed: int, captions: Sequence[str]) -> int:
    """The torch seed for one sampled batch: from the run's seed and the batch's captions, so a run
    repeats batch for batch (a resumed run's batches start where it stopped)."""
    digest = hashlib.sha256(f"{seed}\x00".encode() + "\x00".join(captions).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


class LLMGenerator(CaptionGenerator):
    """Generate hard positives of one kind ("replace", "swap", "replace-verb", "replace-spatial").

    The tokenizer is switched to left padding with its EOS token as pad token, as the released
    script does. Defaults are the script's protocol (see the module docstring); `decoding="greedy"`
    and `use_chat_template=True` are our options.
    """

    method = "llm"
    polarity = "positive"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        kind: str = "replace",
        *,
        batch_size: int = 8,
        max_new_tokens: int | None = None,
        use_chat_template: bool = False,
        decoding: str = "model",
        seed: int = 0,
        progress: bool = True,
    ) -> None:
        self.kind = validation.check_kind(kind)
        self.kinds = (kind,)
        if batch_size < 1:
            raise UserInputError(f"batch size must be >= 1, got {batch_size}")
        if decoding not in DECODINGS:
            raise UserInputError(f"unknown decoding {decoding!r}; expected one of {', '.join(DECODINGS)}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens or MAX_NEW_TOKENS[self.kind]
        self.decoding = decoding
        self.seed = seed
        self.progress = progress
        if tokenizer.eos_token is None:
            raise UserInputError("the tokenizer has no EOS token to pad with; set tokenizer.eos_token")
        tokenizer.padding_side = "left"
        tokenizer.pad_token = tokenizer.eos_token
        if use_chat_template and not getattr(tokenizer, "chat_template", None):
            raise UserInputError("use_chat_template=True (--chat-template on) but the tokenizer has no chat_template")
        self.use_chat_template = use_chat_template

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str | Path,
        kind: str = "replace",
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        model_kwargs: dict | None = None,
        **kwargs,
    ) -> LLMGenerator:
        """Load a causal LM and its tokenizer (Hub id or local folder) and wrap them.

        `device` defaults to CUDA when available; `dtype` to float16 there and float32 on CPU (the
        released script loads float16). Pass `model_kwargs={"device_map": "auto"}` to shard a model
        too large for one GPU (then `device` is ignored).
        """
        if dtype is None:
            dtype = default_dtype(None if (model_kwargs or {}).get("device_map") else device)
        model, tokenizer = load_model_and_tokenizer(
            AutoModelForCausalLM, model_name_or_path, device=device, dtype=dtype, **(model_kwargs or {})
        )
        return cls(model, tokenizer, kind, **kwargs)

    def render(self, caption: str) -> str:
        """The exact text fed to the model for one caption (prompt, inside the chat template if asked)."""
        prompt = build_prompt(self.kind, caption)
        if not self.use_chat_template:
            return prompt
        messages = [{"role": "user", "content": prompt}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def decoding_arguments(self) -> dict:
        """What `generate` gets besides the inputs: nothing about decoding by default (the model's
        generation_config decides), argmax decoding with "greedy"."""
        arguments = {"max_new_tokens": self.max_new_tokens, "pad_token_id": self.tokenizer.pad_token_id}
        if self.decoding == "greedy":
            arguments.update(do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None)
        return arguments

    def _eos_ids(self) -> set[int]:
        configured = self.model.generation_config.eos_token_id
        ids = set(configured if isinstance(configured, list) else [configured] if configured is not None else [])
        return ids | {self.tokenizer.eos_token_id}

    @torch.inference_mode()
    def decode_batch(self, captions: Sequence[str]) -> list[tuple[str, bool]]:
        """Generate for one batch: (newly generated text, stopped at max_new_tokens without an end token) per row."""
        texts = [self.render(caption) for caption in captions]
        # A chat template already writes the BOS token; adding special tokens again would double it.
        encoded = self.tokenizer(
            texts, return_tensors="pt", padding=True, add_special_tokens=not self.use_chat_template
        ).to(self.model.device)
        if self.decoding == "model" and self.model.generation_config.do_sample:
            torch.manual_seed(_batch_seed(self.seed, captions))
        output = self.model.generate(**encoded, **self.decoding_arguments())
        new_tokens = output[:, encoded["input_ids"].shape[1] :]
        eos = self._eos_ids()
        stopped = [any(int(t) in eos for t in row) for row in new_tokens]
        decoded = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [
            (text, not done and len(row) >= self.max_new_tokens)
            for text, done, row in zip(decoded, stopped, new_tokens)
        ]

    def generate_raw(self, captions: Sequence[str]) -> list[str]:
        """The newly generated text of each row of one batch."""
        return [text for text, _ in self.decode_batch(captions)]

    def generate(self, captions: Sequence[str]) -> list[Candidate]:
        """Generate, clean and validate one batch of captions.

        An answer is refused as cut off when the model hit `max_new_tokens` with no end token while
        still on its first line (a model that finished the line and went on with a new "Input:"
        completed its answer).
        """
        results = []
        for caption, (raw, truncated) in zip(captions, self.decode_batch(captions)):
            output = validation.clean_output(raw, caption)
            reason = validation.validate(self.kind, caption, output)
            if truncated and "\n" not in raw.strip():
                reason = validation.TRUNCATED
            results.append(Candidate(raw=raw, output=output, reason=reason))
        return results

    def precheck(self, caption: str) -> str | None:
        """A reason not to call the model at all: SWAP needs an "and" to swap around."""
        return validation.swap_precheck(self.kind, caption)

    def settings(self) -> dict:
        """Every setting that decides the decoded text, resolved from the loaded model (the manifest's
        `settings`): the generation_config values in force, the prompt's digest, padding, seed."""
        config = self.model.generation_config
        resolved = {field: getattr(config, field, None) for field in _DECODING_FIELDS}
        if self.decoding == "greedy":
            resolved.update(do_sample=False, num_beams=1)
        prompt = self.render("{example}")
        return {
            "template": TEMPLATE_NAMES[self.kind],
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            "chat_template": self.use_chat_template,
            "decoding": self.decoding,
            "generation_config": resolved,
            "max_new_tokens": self.max_new_tokens,
            "padding": "left, pad = EOS",
            "seed": self.seed,
            "sampled": bool(resolved["do_sample"]),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "model_fingerprint": model_fingerprint(self.model),
        }

    def options(self) -> dict:
        return {
            **super().options(),
            "model": str(self.model.name_or_path),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "max_new_tokens": self.max_new_tokens,
            "chat_template": self.use_chat_template,
            "decoding": self.decoding,
            "seed": self.seed,
            "model_fingerprint": model_fingerprint(self.model),
        }
