"""A tiny random Llama whose tokenizer adds `<s>` as Llama-2's does, with word-level tokens for the
generator's prompts and the captions below (no download)."""

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from hf_hardpos.generation import llm

CAPTIONS = [
    "a man 's bike is n't red",
    "a red car and a blue bus",
    "a white cat",
    "three giraffes and two antelope in a field",
    "a bathroom with a sink , toilet and shower",
    "two dogs and a cat on a sofa",
    "a man holding a cat and a dog",
]


def tiny_llama(sampled: bool):
    """A word-level tokenizer whose post-processor adds <s> (as Llama-2's), and a random 2-layer Llama."""
    corpus = [*llm.PROMPTS.values(), *CAPTIONS]
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # "'s" and "n't" stay tokens of their own
    tokenizer.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["<unk>", "<s>", "</s>"]))
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=0.5,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.do_sample = sampled
    if sampled:  # Llama-2-chat's generation_config.json: sampling at temperature 0.6, top-p 0.9
        model.generation_config.temperature = 0.6
        model.generation_config.top_p = 0.9
    return model, fast
