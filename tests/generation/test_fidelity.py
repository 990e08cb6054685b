"""The released script's exact model inputs and text (`fidelity="paper"`), and row-seeded sampling.

The reference is an independent restatement of what amitakamath/hard_positives
`generate_hard_positives.py` (commit 30dad79) ran: `pipeline("text-generation", model, tokenizer,
batch_size=B)`, `pad_token_id = eos`, `padding_side = "left"`, `pipe(prompts, return_full_text=False,
max_new_tokens=n)`, in transformers 4.36-4.42 (src/transformers/pipelines/text_generation.py of those
releases): `preprocess` tokenised each prompt with `add_special_tokens=False`; the pipeline's collate
function left-padded the batch with the pad id (attention mask 0); `postprocess` decoded the whole
sequence and the prompt with `skip_special_tokens=True, clean_up_tokenization_spaces=True` and kept
the text after the prompt's length. The clean-up is that release's `clean_up_tokenization`, restated
below as a literal chain of replacements. The tiny Llama's tokenizer adds `<s>` by default, as
Llama-2's does.
"""

import json
from pathlib import Path

import pytest
import torch

from hf_hardpos.generation import llm, sampling
from hf_hardpos.generation.llm import LLMGenerator
from hf_hardpos.generation.resumable import generate_into
from hf_hardpos.generation.run_output import GenerationOutput
from hf_hardpos.generation.sharding import shard_indices
from tests.support.llm import CAPTIONS, tiny_llama


def _clean_up_2024(text: str) -> str:
    """transformers 4.36-4.42 `PreTrainedTokenizerBase.clean_up_tokenization`, restated."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):  # fmt: skip
        text = text.replace(before, after)
    return text


@pytest.fixture(scope="module")
def greedy_llama():
    return tiny_llama(sampled=False)


@pytest.fixture(scope="module")
def sampled_llama():
    return tiny_llama(sampled=True)


def _released_script_call(model, tokenizer, prompts: list[str], max_new_tokens: int):
    """The 2024 pipeline call on one batch: (the input ids it sent, its generated_text per prompt)."""
    eos = model.config.eos_token_id
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    width = max(map(len, encoded))
    input_ids = torch.tensor([[eos] * (width - len(ids)) + ids for ids in encoded])
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded])
    with torch.no_grad():
        sequences = model.generate(
            input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens
        )
    texts = []
    for row, ids in zip(sequences.tolist(), input_ids.tolist()):

        def decode(tokens):
            return _clean_up_2024(
                tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            )

        texts.append(decode(row)[len(decode(ids)) :])
    return input_ids, texts


def _captured_inputs(generator: LLMGenerator, captions: list[str]) -> tuple[list[torch.Tensor], list[str]]:
    """Run the generator, recording the input ids every `model.generate` call received."""
    seen, real = [], generator.model.generate

    def recording(*args, **kwargs):
        seen.append(kwargs["input_ids"].clone())
        return real(*args, **kwargs)

    generator.model.generate = recording
    try:
        texts = generator.generate_raw(captions)
    finally:
        del generator.model.generate
    return seen, texts


def test_paper_fidelity_sends_the_released_scripts_token_ids_and_returns_its_text(greedy_llama):
    model, tokenizer = greedy_llama
    assert tokenizer("a white cat")["input_ids"][0] == tokenizer.bos_token_id  # the tokenizer adds BOS
    generator = LLMGenerator(model, tokenizer, "swap", max_new_tokens=8, progress=False)
    assert generator.fidelity == "paper" and generator.batch_size == 32
    captions = CAPTIONS[:4]
    (sent,), texts = _captured_inputs(generator, captions)
    expected_ids, expected_texts = _released_script_call(
        model, tokenizer, [llm.build_prompt("swap", c) for c in captions], 8
    )
    assert torch.equal(sent, expected_ids)
    assert tokenizer.bos_token_id not in sent[sent != tokenizer.eos_token_id].tolist()
    assert texts == expected_texts and len(set(texts)) > 1
    settings = generator.settings()
    assert settings["fidelity"] == "paper" and "add_special_tokens=False" in settings["special_tokens"]


def test_current_pipeline_fidelity_adds_the_tokenizers_bos(greedy_llama):
    from transformers import pipeline

    model, tokenizer = greedy_llama
    generator = LLMGenerator(
        model, tokenizer, "replace", max_new_tokens=6, fidelity="current-pipeline", progress=False
    )
    (sent,), texts = _captured_inputs(generator, ["a white cat"])
    assert sent[0, 0].item() == tokenizer.bos_token_id
    pipe = pipeline("text-generation", model=model, tokenizer=tokenizer)
    today = pipe(llm.build_prompt("replace", "a white cat"), return_full_text=False, max_new_tokens=6)
    assert texts == [today[0]["generated_text"]]
    paper = LLMGenerator(model, tokenizer, "replace", max_new_tokens=6, progress=False)
    (paper_sent,), _ = _captured_inputs(paper, ["a white cat"])
    assert torch.equal(paper_sent[0], sent[0, 1:])  # the same prompt, without <s>


def test_paper_decoding_cleans_up_tokenisation_spaces(greedy_llama):
    _, tokenizer = greedy_llama
    prompt = tokenizer("Input: x\nOutput:", add_special_tokens=False)["input_ids"]
    new = tokenizer("a man 's bike is n't red", add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id
    ]
    assert llm.pipeline_2024_text(tokenizer, prompt, new) == " a man's bike isn't red"
    assert (
        tokenizer.decode(new, skip_special_tokens=True) == "a man 's bike is n't red"
    )  # current-pipeline's text


def test_unknown_fidelity_is_refused(greedy_llama):
    model, tokenizer = greedy_llama
    with pytest.raises(ValueError, match="unknown fidelity 'exact'"):
        LLMGenerator(model, tokenizer, "replace", fidelity="exact", progress=False)


def test_sampled_rows_do_not_depend_on_the_batch(sampled_llama):
    model, tokenizer = sampled_llama
    generator = LLMGenerator(model, tokenizer, "replace", max_new_tokens=8, seed=5, progress=False)
    assert generator.row_seeded
    rows = [10, 11, 12, 13]
    together = generator.generate_raw(CAPTIONS[:4], rows)
    alone = [generator.generate_raw([caption], [row])[0] for caption, row in zip(CAPTIONS[:4], rows)]
    assert together == alone
    reordered = generator.generate_raw(CAPTIONS[:4][::-1], rows[::-1])[::-1]
    assert reordered == together
    other_seed = LLMGenerator(model, tokenizer, "replace", max_new_tokens=8, seed=6, progress=False)
    assert other_seed.generate_raw(CAPTIONS[:4], rows) != together  # the seed decides, so the test can fail


def test_row_seeded_draws_follow_the_models_sampling_distribution(sampled_llama):
    """Over many rows, the first sampled token's frequencies match the warped distribution that
    `generate(do_sample=True)` samples from (temperature 0.6, top-k 50, top-p 0.9)."""
    model, tokenizer = sampled_llama
    generator = LLMGenerator(model, tokenizer, "replace", max_new_tokens=1, progress=False)
    encoded = generator.encode(["a white cat"])
    with torch.no_grad():
        logits = model(**encoded).logits[:, -1].double()
    warped = sampling.sampling_warpers(generator.generation_config)(encoded["input_ids"], logits)
    expected = torch.softmax(warped, dim=-1)[0]
    n = 400
    sampler = sampling.RowSeededSampler(
        sampling.sampling_warpers(generator.generation_config), sampling.row_uniforms(0, range(n), 1), 0
    )
    picks = sampler(torch.zeros(n, 0, dtype=torch.long), logits.expand(n, -1).clone()).argmax(dim=-1)
    counts = torch.bincount(picks, minlength=expected.numel()).double() / n
    assert set(picks.tolist()) <= set(torch.nonzero(expected).flatten().tolist())
    assert (counts - expected).abs().max() < 0.08
    assert len(set(picks.tolist())) > 1


def test_manifest_records_every_effective_decoding_value(sampled_llama):
    model, tokenizer = sampled_llama
    values = LLMGenerator(model, tokenizer, "swap", progress=False).settings()["generation_config"]
    assert values["do_sample"] is True and values["temperature"] == 0.6 and values["top_p"] == 0.9
    assert (
        values["top_k"] == 50
    )  # transformers' default, applied by generate although the config leaves it unset
    assert values["min_new_tokens"] == 0 and values["max_new_tokens"] == 20 and values["num_beams"] == 1
    assert values["repetition_penalty"] == 1.0 and values["pad_token_id"] == tokenizer.eos_token_id
    assert set(sampling.DECODING_FIELDS) == set(values)
    greedy = LLMGenerator(model, tokenizer, "swap", decoding="greedy", progress=False).settings()
    assert greedy["generation_config"]["do_sample"] is False and greedy["sampled"] is False


def _run(generator, path: Path, indices=None) -> list[dict]:
    with GenerationOutput(path, generator.options(), CAPTIONS) as output:
        generate_into(generator, CAPTIONS, output, indices=indices)
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resumed_and_sharded_sampled_runs_equal_one_uninterrupted_run(sampled_llama, tmp_path):
    """Cut after 3 rows at batch 3, resumed at batch 2; and two interleaved shards at batch 3: the same
    records as one process at batch 4."""
    model, tokenizer = sampled_llama

    def generator(batch_size):
        return LLMGenerator(
            model, tokenizer, "replace", batch_size=batch_size, max_new_tokens=8, seed=1, progress=False
        )

    reference = _run(generator(4), tmp_path / "one.jsonl")
    assert len({r["raw"] for r in reference}) > 3
    _run(generator(3), tmp_path / "resumed.jsonl", indices=range(3))
    assert _run(generator(2), tmp_path / "resumed.jsonl") == reference
    shards = [_run(generator(3), tmp_path / f"shard{rank}.jsonl", shard_indices(len(CAPTIONS), rank, 2))
              for rank in range(2)]  # fmt: skip
    assert sorted(shards[0] + shards[1], key=lambda r: r["index"]) == reference
