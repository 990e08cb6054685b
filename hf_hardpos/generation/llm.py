"""Hard-positive generation with any causal LM from the Hub or disk (paper Appendix C).

Why this shape: the paper used Llama-2-70B-chat, but "any instruction model must work" (SPEC §4),
so the generator takes a `transformers` model and tokenizer as they come: chat models get the
prompt through their own chat template, base models get the raw prompt. Decoding is greedy with the
paper's token budgets so that a run is reproducible. Prompts are batched with *left* padding so
every sequence ends at the same position and the new tokens of all rows start together; the
attention mask (and the position ids `generate` derives from it) make padded rows give the same
answer as unpadded ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from hf_hardpos.generation import prompts, resumable, validation
from hf_hardpos.generation.resumable import Candidate

NO_AND = "no 'and' in input"


class LLMGenerator:
    """Generate hard positives of one kind ("replace", "swap", "replace-verb", "replace-spatial").

    The tokenizer is switched to left padding, and gets its EOS token as pad token when it has no
    pad token (most decoder-only models ship without one).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        kind: str = "replace",
        *,
        batch_size: int = 8,
        max_new_tokens: int | None = None,
        use_chat_template: bool | None = None,
        progress: bool = True,
    ) -> None:
        self.kind = prompts.check_kind(kind)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens or prompts.MAX_NEW_TOKENS[self.kind]
        self.progress = progress
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            if tokenizer.eos_token is None:
                raise ValueError("the tokenizer has neither a pad token nor an EOS token; set tokenizer.pad_token")
            tokenizer.pad_token = tokenizer.eos_token
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if use_chat_template and not has_template:
            raise ValueError("use_chat_template=True but the tokenizer has no chat_template")
        self.use_chat_template = has_template if use_chat_template is None else use_chat_template

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str | Path,
        kind: str = "replace",
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype = "auto",
        model_kwargs: dict | None = None,
        **kwargs,
    ) -> LLMGenerator:
        """Load a causal LM and its tokenizer (Hub id or local folder) and wrap them.

        `device` defaults to CUDA when available; pass `model_kwargs={"device_map": "auto"}` to shard
        a model too large for one GPU (then `device` is ignored).
        """
        model_kwargs = dict(model_kwargs or {})
        tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
        model = AutoModelForCausalLM.from_pretrained(model_name_or_path, dtype=dtype, **model_kwargs)
        if "device_map" not in model_kwargs:
            model = model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        return cls(model, tokenizer, kind, **kwargs)

    def render(self, caption: str) -> str:
        """The exact text fed to the model for one caption (prompt, inside the chat template if any)."""
        prompt = prompts.build_prompt(self.kind, caption)
        if not self.use_chat_template:
            return prompt
        messages = [{"role": "user", "content": prompt}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    @torch.inference_mode()
    def generate_raw(self, captions: Sequence[str]) -> list[str]:
        """Greedy-decode one batch; return only the newly generated text of each row."""
        texts = [self.render(caption) for caption in captions]
        # A chat template already writes the BOS token; adding special tokens again would double it.
        encoded = self.tokenizer(
            texts, return_tensors="pt", padding=True, add_special_tokens=not self.use_chat_template
        ).to(self.model.device)
        output = self.model.generate(
            **encoded,
            do_sample=False,
            num_beams=1,
            temperature=None,
            top_p=None,
            top_k=None,
            max_new_tokens=self.max_new_tokens,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        new_tokens = output[:, encoded["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)

    def generate(self, captions: Sequence[str]) -> list[Candidate]:
        """Generate, clean and validate one batch of captions."""
        results = []
        for caption, raw in zip(captions, self.generate_raw(captions)):
            output = validation.clean_output(raw, caption)
            results.append(Candidate(raw=raw, output=output, reason=validation.validate(self.kind, caption, output)))
        return results

    def precheck(self, caption: str) -> str | None:
        """A reason not to call the model at all: SWAP needs an "and" to swap around."""
        if prompts.VALIDATION_KIND[self.kind] == "swap" and "and" not in validation.words(caption):
            return NO_AND
        return None

    def generate_to_jsonl(self, inputs: Sequence[str | None], output_path: str | Path) -> dict:
        """Generate for every input not yet in `output_path` (see `resumable.generate_to_jsonl`)."""
        return resumable.generate_to_jsonl(
            inputs,
            output_path,
            self.generate,
            batch_size=self.batch_size,
            precheck=self.precheck,
            progress=self.progress,
            desc=f"hard positives ({self.kind})",
        )
