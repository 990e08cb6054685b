"""The LLM path end to end with a tiny random causal LM, plus output cleaning/validation and resume.

The tiny model's text is garbage, so model-backed tests check mechanics (greedy, left padding,
batching, chat template, files, resume); canned outputs check the validation logic.
"""

import argparse
import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from hf_hardpos.commands import generate as generate_command
from hf_hardpos.errors import UserInputError
from hf_hardpos.generation import llm, run_output, validation
from hf_hardpos.generation.caption_file import read_captions
from hf_hardpos.generation.llm import LLMGenerator
from hf_hardpos.generation.validation import NO_AND

CAPTIONS = [
    "a man holding a cat and a dog",
    "a red car and a blue bus",
    "two dogs",
    None,
    "three giraffes and two antelope in a field near some tall trees",
    "a white cat",
    "a bathroom with a sink, toilet and shower",
]


@pytest.fixture(scope="module")
def tiny_lm_dir(tmp_path_factory) -> Path:
    """A word-level tokenizer (no pad token) and a random 2-layer Llama, saved like a Hub repo.

    The generation config asks for sampling on purpose: the generator must decode greedily anyway.
    A large init scale makes the random model's output depend on its input.
    """
    corpus = [*llm.PROMPTS.values(), *(c for c in CAPTIONS if c), "sure here is the changed sentence output"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    trainer = trainers.WordLevelTrainer(special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tokenizer.train_from_iterator(corpus, trainer)
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
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        initializer_range=0.5,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.do_sample = True
    model.generation_config.temperature = 0.7
    path = tmp_path_factory.mktemp("tiny_lm")
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


def _generator(path: Path, kind: str, **kwargs) -> LLMGenerator:
    return LLMGenerator.from_pretrained(
        path, kind, device="cpu", dtype=torch.float32, progress=False, **kwargs
    )


def test_prompts_are_the_released_scripts():
    """The four templates of amitakamath/hard_positives `generate_hard_positives.py` @33addaa, restated
    here verbatim, filled and `.strip()`ped as the script does."""
    assert llm.build_prompt("replace", "a man holding a cup") == (
        "Replace one word in the input sentence with a synonym, without changing the meaning of the sentence. "
        "Only output the changed sentence.\nInput: a man holding a cup\nOutput:"
    )
    swap = llm.build_prompt("swap", "a {cat} and a dog")
    assert swap.startswith('Swap the words around the word "and" in a sentence without changing the meaning.')
    assert swap.count("\n\nInput: ") == 6 and swap.endswith("\n\nInput: a {cat} and a dog\nOutput:")
    assert "Output: there is a man holding a wine bottle and wearing glasses\n" in swap
    assert llm.build_prompt("replace-verb", "a dog") == (
        "Replace one verb in this sentence with a synonym, without changing the meaning of the sentence. Only "
        "output the changed sentence.\nInput: A person wearing a shirt and smiling.\nOutput: A person clothed in "
        "a shirt and smiling.\n\nInput: a dog\nOutput:"
    )
    assert llm.build_prompt("replace-spatial", "a dog") == (
        "Replace a spatial preposition in this sentence with a synonym, without changing the meaning of the "
        "sentence. Only output the changed sentence.\nInput: A city filled with tall buildings under a cloudy "
        "sky.\nOutput: A city filled with tall buildings beneath a cloudy sky.\n\nInput: a dog\nOutput:"
    )
    assert llm.TEMPLATE_NAMES["replace-verb"] == "replace_verb"
    assert llm.MAX_NEW_TOKENS["replace"] == 30 and llm.MAX_NEW_TOKENS["swap"] == 20
    with pytest.raises(ValueError, match="replace-verb"):
        llm.build_prompt("paraphrase", "x")


def test_default_is_the_released_script_protocol(tiny_lm_dir):
    """No chat template, no decoding arguments (the model's generation_config samples here), EOS as
    left pad, the 2024 pipeline's inputs (tests/generation/test_fidelity.py compares them with a
    restatement of the script's call), sampling seeded per (seed, row)."""
    generator = _generator(tiny_lm_dir, "replace", max_new_tokens=10, seed=3)
    assert not generator.use_chat_template and generator.decoding == "model" and generator.fidelity == "paper"
    assert set(generator.decoding_arguments()) == {"max_new_tokens", "pad_token_id"}
    assert (
        generator.tokenizer.pad_token == generator.tokenizer.eos_token
        and generator.tokenizer.padding_side == "left"
    )
    caption = "a white cat"
    # sampled (the fixture's config says do_sample=True) and seeded: the seed decides, and is recorded
    assert generator.generate_raw([caption]) == generator.generate_raw([caption])
    other_seed = _generator(tiny_lm_dir, "replace", max_new_tokens=10, seed=4)
    assert other_seed.generate_raw([caption, "two dogs"]) != generator.generate_raw([caption, "two dogs"])
    settings = generator.settings()
    assert (
        settings["generation_config"]["do_sample"] is True
        and settings["generation_config"]["temperature"] == 0.7
    )
    assert settings["seed"] == 3 and settings["sampled"] is True and settings["template"] == "replace"
    assert "sha256" in settings["model_fingerprint"]


def test_fp16_where_the_device_allows():
    assert llm.default_dtype("cpu") == torch.float32
    assert llm.default_dtype("cuda:0") == torch.float16


def test_batched_left_padded_generation_equals_one_by_one(tiny_lm_dir):
    generator = _generator(tiny_lm_dir, "replace", batch_size=4, max_new_tokens=12, decoding="greedy")
    assert generator.tokenizer.padding_side == "left"
    assert generator.tokenizer.pad_token == generator.tokenizer.eos_token
    captions = [c for c in CAPTIONS if c][:4]
    batched = generator.generate_raw(captions)
    single = [generator.generate_raw([caption])[0] for caption in captions]
    assert batched == single
    assert len(set(batched)) > 1  # the outputs depend on the input, so the comparison means something

    generator.tokenizer.padding_side = "right"  # what left padding protects against
    assert generator.generate_raw(captions) != single


def test_greedy_option_decodes_greedily_and_returns_only_new_tokens(tiny_lm_dir):
    # current-pipeline: the new tokens decoded on their own (the paper's fidelity keeps the 2024
    # pipeline's leading space, tested in tests/generation/test_fidelity.py)
    generator = _generator(
        tiny_lm_dir, "replace", max_new_tokens=6, decoding="greedy", fidelity="current-pipeline"
    )
    caption = "a white cat"
    prompt_ids = generator.tokenizer(generator.render(caption), return_tensors="pt")["input_ids"]
    ids = prompt_ids
    with torch.no_grad():  # argmax decoding by hand, despite the model's do_sample=True config
        for _ in range(6):
            next_id = generator.model(input_ids=ids).logits[0, -1].argmax()
            ids = torch.cat([ids, next_id.view(1, 1)], dim=1)
            if next_id.item() == generator.tokenizer.eos_token_id:
                break
    expected = generator.tokenizer.decode(ids[0, prompt_ids.shape[1] :], skip_special_tokens=True)
    assert expected
    assert generator.generate_raw([caption]) == [expected]
    assert generator.settings()["generation_config"]["do_sample"] is False


def test_an_answer_cut_off_by_the_token_limit_is_refused(tiny_lm_dir, tmp_path):
    generator = _generator(tiny_lm_dir, "replace", max_new_tokens=3, decoding="greedy", acceptance="strict")
    ((text, truncated),) = generator.decode_batch(["a white cat"])
    assert truncated and len(generator.tokenizer(text, add_special_tokens=False)["input_ids"]) <= 3
    generator.generate_to_jsonl(["a white cat"], tmp_path / "cut.jsonl")
    (row,) = _lines(tmp_path / "cut.jsonl")
    assert row["reason"] == validation.TRUNCATED and not row["valid"] and row["truncated"]
    # the paper's acceptance does not name a cut-off answer as a failure; the record still says it was cut
    paper = _generator(tiny_lm_dir, "replace", max_new_tokens=3, decoding="greedy")
    paper.generate_to_jsonl(["a white cat"], tmp_path / "paper.jsonl")
    (row,) = _lines(tmp_path / "paper.jsonl")
    assert row["truncated"] and row["reason"] != validation.TRUNCATED


def test_chat_template_wraps_the_prompt(tiny_lm_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    tokenizer.chat_template = (
        "{% for m in messages %}{{ bos_token }}USER: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    generator = LLMGenerator(
        model, tokenizer, "replace", max_new_tokens=4, use_chat_template=True, progress=False
    )
    assert generator.use_chat_template
    text = generator.render("a white cat")
    assert text == "<s>USER: " + llm.build_prompt("replace", "a white cat") + "\nASSISTANT:"
    assert len(generator.generate_raw(["a white cat", "two dogs"])) == 2
    plain = LLMGenerator(model, tokenizer, "replace", use_chat_template=False, progress=False)
    assert plain.render("a white cat") == llm.build_prompt("replace", "a white cat")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_resume_after_interruption_has_no_duplicates_and_no_losses(tiny_lm_dir, tmp_path):
    generator = _generator(tiny_lm_dir, "swap", batch_size=2, max_new_tokens=8)
    reference = tmp_path / "reference.jsonl"
    summary = generator.generate_to_jsonl(CAPTIONS, reference)
    assert summary["written"] == len(CAPTIONS) and summary["already_done"] == 0
    expected = _lines(reference)
    assert [r["index"] for r in expected] == list(range(len(CAPTIONS)))
    assert expected[2]["reason"] == NO_AND and expected[3]["reason"] == validation.EMPTY_INPUT

    interrupted = tmp_path / "interrupted.jsonl"
    real_generate = generator.generate
    calls = {"n": 0}

    def dies_on_second_batch(captions, rows=None):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real_generate(captions, rows)

    generator.generate = dies_on_second_batch
    with pytest.raises(KeyboardInterrupt):
        generator.generate_to_jsonl(CAPTIONS, interrupted)
    # Batches of 2 rows that need the model: [0, 1] generated and flushed; [2, 3] are skipped
    # without the model (no "and", empty) and wait for the next batch [4, 5], whose model call dies.
    assert [r["index"] for r in _lines(interrupted)] == [0, 1]
    with interrupted.open("a") as handle:
        handle.write('{"index": 2, "input": "two d')  # a write cut short by the kill
    generator.generate = real_generate

    summary = generator.generate_to_jsonl(CAPTIONS, interrupted)
    assert summary["already_done"] == 2 and summary["written"] == len(CAPTIONS) - 2
    assert sorted(_lines(interrupted), key=lambda r: r["index"]) == expected
    again = generator.generate_to_jsonl(CAPTIONS, interrupted)
    assert again["written"] == 0 and len(_lines(interrupted)) == len(CAPTIONS)


def test_resume_refuses_an_output_written_for_other_inputs(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(
        json.dumps({"index": 0, "input": "a dog", "output": None, "valid": False, "reason": "x"}) + "\n"
    )
    with pytest.raises(ValueError, match="line 1.*another input file"):
        run_output.read_done(path, ["a cat"])
    path.write_text("not json\n" + json.dumps({"index": 0, "input": "a dog"}) + "\n")
    with pytest.raises(ValueError, match="line 1: not valid JSON"):
        run_output.read_done(path, ["a dog"])


class _CannedGenerator(LLMGenerator):
    """The real cleaning/validation/JSONL path with fixed model answers instead of a model."""

    def __init__(self, model, tokenizer, kind, answers, acceptance="strict"):
        super().__init__(model, tokenizer, kind, batch_size=3, acceptance=acceptance, progress=False)
        self.answers = answers

    def decode_batch(self, captions, rows=None):
        return [(self.answers[c], False) for c in captions]


def test_filtering_reasons_written_per_row(tiny_lm_dir, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    replace_answers = {
        "a man holding a cup": 'Sure! Here is the changed sentence:\n\n"A man grasping a cup."',
        "a dog on a bench": " a dog on a bench",
        "a white cat": "a white cat. It is sleeping.",
        "a red bus": "Output: a crimson bus\nInput: a blue car\nOutput: a sapphire car",
        "a tall tree": "a tall tree that stands alone in a very large and wide open green field",
        "a big car": "I replaced big with large: a large car",
        "a cat behind a door": "a cat to the rear of a door",
        "a small cat on a mat": "a mat under a small cat",
        "a dog in a car": "a dog within a car\n\nI replaced 'in' with 'within', a synonym.",
    }
    generator = _CannedGenerator(model, tokenizer, "replace", replace_answers)
    out = tmp_path / "replace.jsonl"
    summary = generator.generate_to_jsonl(list(replace_answers), out)
    rows = {r["input"]: r for r in _lines(out)}
    assert rows["a man holding a cup"]["output"] == "A man grasping a cup."
    assert rows["a red bus"]["output"] == "a crimson bus"
    assert {c: r["reason"] for c, r in rows.items()} == {
        "a man holding a cup": None,
        "a dog on a bench": validation.IDENTICAL,
        "a white cat": validation.SEVERAL_SENTENCES,
        "a red bus": None,
        "a tall tree": validation.TOO_LONG,
        "a big car": validation.CHATTER,
        "a cat behind a door": None,
        "a small cat on a mat": validation.SEVERAL_EDITS,
        "a dog in a car": None,
    }
    assert rows["a dog in a car"]["output"] == "a dog within a car"
    assert summary["valid"] == 4 and all(r["valid"] == (r["reason"] is None) for r in rows.values())
    # the default, the paper's acceptance, refuses only the failure modes the paper names
    paper = _CannedGenerator(model, tokenizer, "replace", replace_answers, acceptance="paper")
    paper.generate_to_jsonl(list(replace_answers), tmp_path / "paper.jsonl")
    paper_reasons = {r["input"]: r["reason"] for r in _lines(tmp_path / "paper.jsonl")}
    assert paper_reasons == {
        **{c: r["reason"] for c, r in rows.items()},
        "a tall tree": None,
        "a small cat on a mat": None,
    }

    swap_answers = {
        "a red car and a blue bus": "a blue car and a red bus",  # moves the colours: a negative
        "three giraffes and two antelope": "two antelopes and three giraffes",  # word changed
        "a cat and a dog": "a cat with a dog",
        "a sink, toilet and shower": "A sink, shower and toilet.",
    }
    generator = _CannedGenerator(model, tokenizer, "swap", swap_answers)
    generator.generate_to_jsonl([*swap_answers, "no conjunction here"], tmp_path / "swap.jsonl")
    reasons = {r["input"]: r["reason"] for r in _lines(tmp_path / "swap.jsonl")}
    assert reasons == {
        "a red car and a blue bus": validation.NOT_A_SWAP,
        "three giraffes and two antelope": validation.WORDS_CHANGED,
        "a cat and a dog": validation.AND_MISSING,
        "a sink, toilet and shower": None,
        "no conjunction here": NO_AND,
    }


def test_read_captions_txt_and_jsonl(tmp_path):
    (tmp_path / "c.txt").write_text("a dog\n\n a cat \n")
    assert read_captions(tmp_path / "c.txt") == ["a dog", None, "a cat"]
    (tmp_path / "c.jsonl").write_text('{"text": "a dog"}\n{"text": null}\n')
    assert read_captions(tmp_path / "c.jsonl", field="text") == ["a dog", None]
    with pytest.raises(ValueError, match=r"c.jsonl line 1: no field 'caption'"):
        read_captions(tmp_path / "c.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"caption": "a"}\n{"caption": 3}\n')
    with pytest.raises(ValueError, match="bad.jsonl line 2: field 'caption' is int"):
        read_captions(tmp_path / "bad.jsonl")


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hardpos")
    generate_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_generate_command_llm_resumes(tiny_lm_dir, tmp_path, capsys):
    source = tmp_path / "captions.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": c}) + "\n" for i, c in enumerate(CAPTIONS)))
    out = tmp_path / "out" / "swap.jsonl"
    argv = [
        "generate",
        "--kind",
        "swap",
        "--input",
        str(source),
        "--field",
        "text",
        "--model",
        str(tiny_lm_dir),
        "--output",
        str(out),
        "--batch-size",
        "3",
        "--max-new-tokens",
        "8",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--no-progress",
    ]
    assert _run_cli(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["method"] == "llm" and first["written"] == len(CAPTIONS)
    rows = _lines(out)
    assert [r["index"] for r in rows] == list(range(len(CAPTIONS)))
    assert all(r["raw"] is not None for r in rows if r["reason"] not in (NO_AND, validation.EMPTY_INPUT))
    assert _run_cli(argv) == 0
    assert json.loads(capsys.readouterr().out)["already_done"] == len(CAPTIONS)
    assert _lines(out) == rows


def test_generate_command_rules(tmp_path, capsys):
    from hf_hardpos.generation.rules import hard_positive_candidates

    source = tmp_path / "captions.txt"
    source.write_text("A white cat on a whiteboard.\na red car and a blue bus\nno rule here\n")
    positives, negatives = tmp_path / "hp.jsonl", tmp_path / "hn.jsonl"
    common = ["--input", str(source), "--no-progress"]
    assert _run_cli(["generate", "--kind", "replace", *common, "--output", str(positives)]) == 0
    rows = _lines(positives)
    assert rows[0]["output"] == "An ivory cat on a whiteboard."
    assert rows[1]["output"] in hard_positive_candidates("a red car and a blue bus") and rows[1]["valid"]
    assert rows[2]["reason"] == "no rule applies" and not rows[2]["valid"]
    argv = [
        "generate",
        "--kind",
        "swap",
        "--negative",
        "--method",
        "rules",
        *common,
        "--output",
        str(negatives),
    ]
    assert _run_cli(argv) == 0
    assert [r["output"] for r in _lines(negatives)] == [None, "a blue car and a red bus", None]
    capsys.readouterr()
    with pytest.raises(UserInputError, match="needs --model"):
        _run_cli(["generate", "--kind", "swap", "--method", "llm", *common, "--output", str(negatives)])


def test_hardpos_cli_lists_generate(capsys):
    cli = pytest.importorskip("hf_hardpos.cli")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert "--kind" in help_text and "replace-spatial" in help_text and "--method" in help_text
