"""Hard-positive generation with any causal LM from the Hub or disk: the paper's prompts (Appendix C).

Why this shape: the paper used Llama-2-70B-chat, but "any instruction model must work" (docs/reference.md, Generating hard positives),
so the generator takes a `transformers` model and tokenizer as they come: chat models get the
prompt through their own chat template, base models get the raw prompt. Decoding is greedy with the
paper's token budgets so that a run is reproducible. Prompts are batched with *left* padding so
every sequence ends at the same position and the new tokens of all rows start together; the
attention mask (and the position ids `generate` derives from it) make padded rows give the same
answer as unpadded ones.

REPLACE and SWAP are the paper's prompts verbatim (docs/reference.md, Generating hard positives), so a run with Llama-2-70B-chat
reproduces the paper's procedure. The paper also used relation-targeted variants of REPLACE (one
verb, one spatial preposition); their wording is not published, so `REPLACE_VERB` and
`REPLACE_SPATIAL` are ours, written in the same style as REPLACE.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import validation
from hf_hardpos.generation.models import load_model_and_tokenizer
from hf_hardpos.generation.resumable import Candidate, CaptionGenerator

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
# Paper Appendix C: 30 new tokens for REPLACE, 20 for SWAP (captions are short; a longer budget
# only buys chatter). The relation-targeted variants are REPLACE prompts and get its budget.
MAX_NEW_TOKENS: dict[str, int] = {"replace": 30, "swap": 20, "replace-verb": 30, "replace-spatial": 30}


def build_prompt(kind: str, caption: str) -> str:
    """The prompt text for one caption (before any chat template is applied)."""
    # str.replace, not str.format: a caption may contain braces.
    return PROMPTS[validation.check_kind(kind)].replace("{example}", caption)


class LLMGenerator(CaptionGenerator):
    """Generate hard positives of one kind ("replace", "swap", "replace-verb", "replace-spatial").

    The tokenizer is switched to left padding, and gets its EOS token as pad token when it has no
    pad token (most decoder-only models ship without one).
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
        use_chat_template: bool | None = None,
        progress: bool = True,
    ) -> None:
        self.kind = validation.check_kind(kind)
        self.kinds = (kind,)
        if batch_size < 1:
            raise UserInputError(f"batch size must be >= 1, got {batch_size}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens or MAX_NEW_TOKENS[self.kind]
        self.progress = progress
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            if tokenizer.eos_token is None:
                raise UserInputError("the tokenizer has neither a pad token nor an EOS token; set tokenizer.pad_token")
            tokenizer.pad_token = tokenizer.eos_token
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if use_chat_template and not has_template:
            raise UserInputError("use_chat_template=True (--chat-template on) but the tokenizer has no chat_template")
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
        model, tokenizer = load_model_and_tokenizer(
            AutoModelForCausalLM, model_name_or_path, device=device, dtype=dtype, **(model_kwargs or {})
        )
        return cls(model, tokenizer, kind, **kwargs)

    def render(self, caption: str) -> str:
        """The exact text fed to the model for one caption (prompt, inside the chat template if any)."""
        prompt = build_prompt(self.kind, caption)
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
        return validation.swap_precheck(self.kind, caption)

    def options(self) -> dict:
        return {
            **super().options(),
            "model": str(self.model.name_or_path),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "max_new_tokens": self.max_new_tokens,
            "chat_template": self.use_chat_template,
        }
