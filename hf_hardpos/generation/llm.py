"""Hard-positive generation with any causal LM from the Hub or disk, as the paper's released script runs it.

Why this shape: the default reproduces `generate_hard_positives.py` of amitakamath/hard_positives
(commit 30dad79, "FT data generation", the file's only commit; read at 33addaa), which made the
paper's COCO hard positives (Appendix C), as that script ran in its time (transformers 4.36-4.42):

- the template with the caption filled in, then `.strip()`ped (the prompt ends in "Output:" with no
  trailing space); **no chat template**;
- the token ids the script's `pipeline("text-generation")` sent (`fidelity="paper"`, the default):
  that pipeline's `preprocess` tokenised each prompt with `add_special_tokens=False`, so **no BOS
  token**, even for Llama-2 whose tokenizer adds one; rows left-padded with the EOS id, attention
  mask 0 on the pads (the script sets `pad_token_id = eos`, `padding_side = "left"`);
- its text: `postprocess` decoded the whole sequence and the prompt with `skip_special_tokens=True,
  clean_up_tokenization_spaces=True` and kept `text[len(prompt_text):]` ("a man 's bike is n't" ->
  "a man's bike isn't"). transformers 5 skips that clean-up for BPE tokenizers (Llama's among them),
  so it is applied here with the tokenizer's own `clean_up_tokenization`;
- **no decoding arguments**: the model's own `generation_config.json` decides (for
  Llama-2-70b-chat that samples, temperature 0.6, top-p 0.9, and transformers' default top-k 50),
  with the seed recorded. Sampling is row-seeded (`hf_hardpos.generation.sampling`): each row's
  draws depend on (seed, row index) only, not on the batch, the shard or the resume point; the
  script's own stream (one torch stream per batch, never seeded) cannot be reproduced by anyone;
- float16 weights where the device allows (CUDA), float32 on CPU; batches of 32 (the script's default);
- `max_new_tokens` per template: the script's default is 20 for every template, Appendix C says
  30 for REPLACE and 20 for SWAP; we follow the paper's text (30 for the three REPLACE templates,
  20 for SWAP) and record the value used.

`fidelity="current-pipeline"` is what `pipeline("text-generation")` does from transformers 4.45 on
(and what this package did before): the tokenizer's own special tokens (`<s>` for Llama-2) and the
new tokens decoded on their own with the tokenizer's clean-up setting. A chat template
(`use_chat_template=True`) and greedy decoding (`decoding="greedy"`) are named options, not the
paper's protocol; the manifest of every output says which ran. The four templates are the
script's, verbatim: `replace`, `swap`, `replace_verb`, `replace_spatial` (our kinds "replace",
"swap", "replace-verb", "replace-spatial").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import sampling, validation
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
    "replace": "replace",
    "swap": "swap",
    "replace-verb": "replace_verb",
    "replace-spatial": "replace_spatial",
}
# Appendix C: 30 new tokens for REPLACE, 20 for SWAP (the script's own default is 20 for all); the
# relation-targeted variants are REPLACE prompts and get its budget.
MAX_NEW_TOKENS: dict[str, int] = {"replace": 30, "swap": 20, "replace-verb": 30, "replace-spatial": 30}
# "model": no decoding arguments, the model's generation_config decides (the released script);
# "greedy": argmax decoding whatever the model's config says (ours, reproducible without a seed).
DECODINGS = ("model", "greedy")
# "paper": the token ids and text of the released script's pipeline call in transformers 4.36-4.42
# (no special tokens added, clean-up of tokenisation spaces); "current-pipeline": the same call in
# transformers >= 4.45 (the tokenizer's special tokens, e.g. Llama-2's BOS; the tokenizer's clean-up).
FIDELITIES = ("paper", "current-pipeline")
DEFAULT_BATCH_SIZE = 32  # the released script's --batch-size default
# What each fidelity sends and decodes (recorded in the manifest's settings).
_FIDELITY_FACTS = {
    "paper": {
        "special_tokens": "none added (transformers 4.36-4.42 TextGenerationPipeline.preprocess: add_special_tokens=False)",
        "decode": "decode(prompt + new, skip_special_tokens) with clean_up_tokenization, minus the decoded prompt",
    },
    "current-pipeline": {
        "special_tokens": "the tokenizer's default (transformers >= 4.45 pipeline)",
        "decode": "decode(new tokens, skip_special_tokens), the tokenizer's clean-up setting",
    },
}


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


def pipeline_2024_text(
    tokenizer: PreTrainedTokenizerBase, prompt_ids: Sequence[int], new_ids: Sequence[int]
) -> str:
    """The `generated_text` of transformers 4.36-4.42's text-generation pipeline with `return_full_text=False`.

    Its `postprocess` decoded the whole sequence and the prompt (`skip_special_tokens=True,
    clean_up_tokenization_spaces=True`) and returned the text after the prompt's length. The clean-up
    is applied explicitly: transformers 5 ignores `clean_up_tokenization_spaces=True` for BPE tokenizers.
    """

    def decoded(ids: Sequence[int]) -> str:
        text = tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return tokenizer.clean_up_tokenization(text)

    return decoded([*prompt_ids, *new_ids])[len(decoded(prompt_ids)) :]


class LLMGenerator(CaptionGenerator):
    """Generate hard positives of one kind ("replace", "swap", "replace-verb", "replace-spatial").

    The tokenizer is switched to left padding with its EOS token as pad token, as the released
    script does. Defaults are the script's protocol (see the module docstring); `decoding="greedy"`,
    `use_chat_template=True`, `fidelity="current-pipeline"` and `acceptance="strict"` are named options.
    """

    method = "llm"
    polarity = "positive"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        kind: str = "replace",
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_new_tokens: int | None = None,
        use_chat_template: bool = False,
        decoding: str = "model",
        fidelity: str = "paper",
        acceptance: str = "paper",
        seed: int = 0,
        progress: bool = True,
    ) -> None:
        self.kind = validation.check_kind(kind)
        self.kinds = (kind,)
        if batch_size < 1:
            raise UserInputError(f"batch size must be >= 1, got {batch_size}")
        if decoding not in DECODINGS:
            raise UserInputError(f"unknown decoding {decoding!r}; expected one of {', '.join(DECODINGS)}")
        if fidelity not in FIDELITIES:
            raise UserInputError(f"unknown fidelity {fidelity!r}; expected one of {', '.join(FIDELITIES)}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens or MAX_NEW_TOKENS[self.kind]
        self.decoding = decoding
        self.fidelity = fidelity
        self.acceptance = validation.check_acceptance(acceptance)
        self.seed = seed
        self.progress = progress
        if tokenizer.eos_token is None:
            raise UserInputError("the tokenizer has no EOS token to pad with; set tokenizer.eos_token")
        tokenizer.padding_side = "left"
        tokenizer.pad_token = tokenizer.eos_token
        if use_chat_template and not getattr(tokenizer, "chat_template", None):
            raise UserInputError(
                "use_chat_template=True (--chat-template on) but the tokenizer has no chat_template"
            )
        self.use_chat_template = use_chat_template
        self.generation_config = sampling.effective_generation_config(model, **self.decoding_arguments())
        self.row_seeded = bool(self.generation_config.do_sample)
        if self.row_seeded:
            sampling.check_row_seeded(self.generation_config)

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
        released script loads float16). Pass `model_kwargs={"device_map": "auto"}` to spread a model
        too large for one GPU over the machine's GPUs (then `device` is ignored), and
        `model_kwargs={"attn_implementation": "flash_attention_2"}` for the script's attention.
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

    def encode(self, captions: Sequence[str]):
        """The batch the model gets: prompt ids left-padded with EOS, and the attention mask.

        "paper": no special tokens (the 2024 pipeline); "current-pipeline": the tokenizer's own. A
        chat template already writes the BOS token, so nothing is added to it in either.
        """
        add_special_tokens = self.fidelity == "current-pipeline" and not self.use_chat_template
        texts = [self.render(caption) for caption in captions]
        encoded = self.tokenizer(
            texts, return_tensors="pt", padding=True, add_special_tokens=add_special_tokens
        )
        return encoded.to(self.model.device)

    def decoding_arguments(self) -> dict:
        """What `generate` gets besides the inputs: nothing about decoding by default (the model's
        generation_config decides), argmax decoding with "greedy"."""
        arguments = {"max_new_tokens": self.max_new_tokens, "pad_token_id": self.tokenizer.pad_token_id}
        if self.decoding == "greedy":
            arguments.update(do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None)
        return arguments

    def _eos_ids(self) -> set[int]:
        configured = self.model.generation_config.eos_token_id
        ids = set(
            configured if isinstance(configured, list) else [configured] if configured is not None else []
        )
        return ids | {self.tokenizer.eos_token_id}

    def _generate(self, encoded, rows: Sequence[int]) -> torch.Tensor:
        """`model.generate` on one batch; sampling draws each row from its own (seed, row) stream."""
        arguments = self.decoding_arguments()
        if self.row_seeded:
            uniforms = sampling.row_uniforms(self.seed, rows, self.max_new_tokens)
            warpers = sampling.sampling_warpers(self.generation_config)
            sampler = sampling.RowSeededSampler(warpers, uniforms, encoded["input_ids"].shape[1])
            # greedy picks the one token the sampler leaves; the model's warpers run inside the sampler
            arguments.update(
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                min_p=None,
                typical_p=None,
                epsilon_cutoff=None,
                eta_cutoff=None,
                logits_processor=LogitsProcessorList([sampler]),
            )
        return self.model.generate(**encoded, **arguments)

    @torch.inference_mode()
    def decode_batch(
        self, captions: Sequence[str], rows: Sequence[int] | None = None
    ) -> list[tuple[str, bool]]:
        """Generate for one batch: (newly generated text, stopped at max_new_tokens without an end token) per row.

        `rows`: the input index of each caption (the sampling seed's row; default 0, 1, ...).
        """
        rows = range(len(captions)) if rows is None else rows
        encoded = self.encode(captions)
        output = self._generate(encoded, rows)
        prompt_length = encoded["input_ids"].shape[1]
        new_tokens = output[:, prompt_length:]
        eos = self._eos_ids()
        results = []
        for i, row in enumerate(new_tokens.tolist()):
            done = any(t in eos for t in row)
            if self.fidelity == "paper":
                prompt = encoded["input_ids"][i][encoded["attention_mask"][i].bool()].tolist()
                text = pipeline_2024_text(self.tokenizer, prompt, row)
            else:
                text = self.tokenizer.decode(row, skip_special_tokens=True)
            results.append((text, not done and len(row) >= self.max_new_tokens))
        return results

    def generate_raw(self, captions: Sequence[str], rows: Sequence[int] | None = None) -> list[str]:
        """The newly generated text of each row of one batch."""
        return [text for text, _ in self.decode_batch(captions, rows)]

    def generate(self, captions: Sequence[str], rows: Sequence[int] | None = None) -> list[Candidate]:
        """Generate, clean and validate one batch of captions (`rows`: their input indices).

        Validated under `acceptance` (`validation.ACCEPTANCES`). With "strict", an answer is also
        refused as cut off when the model hit `max_new_tokens` with no end token while still on its
        first line (a model that finished the line and went on with a new "Input:" completed its answer).
        """
        results = []
        for caption, (raw, truncated) in zip(captions, self.decode_batch(captions, rows)):
            output = validation.clean_output(raw, caption)
            reason = validation.validate(self.kind, caption, output, self.acceptance)
            if self.acceptance == "strict" and truncated and "\n" not in raw.strip():
                reason = validation.TRUNCATED
            results.append(Candidate(raw=raw, output=output, reason=reason, extra={"truncated": truncated}))
        return results

    def generate_rows(self, rows: Sequence[int], captions: Sequence[str]) -> list[dict[str, Candidate]]:
        return [{self.kind: candidate} for candidate in self.generate(captions, rows)]

    def precheck(self, caption: str) -> str | None:
        """A reason not to call the model at all: the paper's SWAP eligibility (an "and", fewer than 15 words)."""
        return validation.swap_precheck(self.kind, caption)

    def settings(self) -> dict:
        """Every setting that decides the decoded text, resolved from the loaded model (the manifest's
        `settings`): every decoding value in force, the prompt's digest, padding, fidelity, seed."""
        prompt = self.render("{example}")
        return {
            "template": TEMPLATE_NAMES[self.kind],
            "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            "chat_template": self.use_chat_template,
            "decoding": self.decoding,
            "fidelity": self.fidelity,
            **_FIDELITY_FACTS[self.fidelity],
            "generation_config": sampling.decoding_values(self.generation_config),
            "max_new_tokens": self.max_new_tokens,
            "padding": "left, pad = EOS",
            "seed": self.seed,
            "sampled": self.row_seeded,
            "sampling": "per row: inverse CDF on uniforms from torch.Generator(sha256(seed, row index))"
            if self.row_seeded
            else "none (deterministic)",
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "attn_implementation": getattr(self.model.config, "_attn_implementation", None) or "default",
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
            "fidelity": self.fidelity,
            "acceptance": self.acceptance,
            "seed": self.seed,
            "model_fingerprint": model_fingerprint(self.model),
        }
