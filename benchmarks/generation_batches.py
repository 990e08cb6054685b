"""Model time of a SWAP generation run: batches cut from the rows that need the model vs cut first.

Why: SWAP needs an "and"; in COCO about one caption in five is a SWAP candidate (119,071 of 591,753,
the Hard Positive paper's count). Cutting batches of B from all rows and then dropping the rows
without "and" (what `generate_into` did before) hands the model batches of about B/5 rows; cutting
them from the rows that need the model hands it full batches. Both arms run the same generator (a
random 2-layer Llama built here, greedy, `max_new_tokens` 8, on the paper's SWAP prompt) over the
same captions; only the model calls are timed (`LLMGenerator.generate` wrapped), so the figure is the
model's own cost:

* ``cut_first``: the previous loop, restated here: chunks of B input rows, the rows `precheck`
  refuses removed, the rest generated;
* ``full_batches``: `generate_to_jsonl` as it runs now (records written to a temporary file).

    python benchmarks/generation_batches.py [--rows 400] [--share-with-and 0.2] [--batch-size 8] [--threads 1]

Prints and records (``benchmarks/results.json``): model calls and rows per call of each arm, model
seconds of each arm (median of ``--repeats``), and the ratio cut_first / full_batches. On a GPU the
ratio approaches B over the mean rows per call of ``cut_first`` (a batch costs about the same whatever
its size); on a CPU it is smaller, since the work grows with the rows.

``--throughput`` measures prompts per second of the LLM path as `hardpos generate` runs it (the
paper's REPLACE prompt, every row to the model, `max_new_tokens` 20, float16 on CUDA) at each
``--throughput-batches`` (default 8, the old default, and 32, the paper's), with a larger random Llama
(``--hidden-size``, ``--layers``), and records it as ``generation_throughput``:

    python benchmarks/generation_batches.py --throughput --device cuda [--rows 512]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from results import on_device, record  # benchmarks/results.py: one results file for every benchmark


def build_generator(
    batch_size: int,
    device: str,
    kind: str = "swap",
    hidden_size: int = 64,
    layers: int = 2,
    max_new_tokens: int = 8,
):
    """A random Llama over a word-level vocabulary of the prompt and the captions' words (greedy; float16 on CUDA)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from hf_hardpos.generation import llm

    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    corpus = [*llm.PROMPTS.values(), " ".join(WORDS)]
    tokenizer.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["<unk>", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device=device, dtype=llm.default_dtype(device))
    return llm.LLMGenerator(model, fast, kind, batch_size=batch_size, max_new_tokens=max_new_tokens,
                            decoding="greedy", progress=False)  # fmt: skip


WORDS = ["a", "the", "dog", "cat", "man", "woman", "red", "blue", "car", "bus", "on", "near", "table", "and",
         "sitting", "holding", "two", "three", "plate", "of", "food", "with", "street"]  # fmt: skip


def make_captions(rows: int, share_with_and: float, seed: int = 0) -> list[str]:
    """COCO-like captions; `share_with_and` of them contain "and" (the SWAP candidates)."""
    rng = random.Random(seed)
    nouns = ["dog", "cat", "man", "woman", "car", "bus", "table", "plate"]
    captions = []
    for _ in range(rows):
        first, second = rng.sample(nouns, 2)
        if rng.random() < share_with_and:
            captions.append(f"a {first} and a {second} near the street")
        else:
            captions.append(f"a {first} sitting near a {second} on the street")
    return captions


def timed(generator) -> dict:
    """Wrap `generator.generate` so every model call is counted and timed."""
    stats = {"calls": 0, "rows": 0, "seconds": 0.0}
    real = generator.generate

    def generate(captions, rows=None):
        start = time.perf_counter()
        result = real(captions) if rows is None else real(captions, rows)
        stats["seconds"] += time.perf_counter() - start
        stats["calls"] += 1
        stats["rows"] += len(captions)
        return result

    generator.generate = generate
    return stats


def cut_first(generator, captions: list[str]) -> None:
    """The previous loop: chunks of `batch_size` input rows, refused rows removed after cutting."""
    for start in range(0, len(captions), generator.batch_size):
        chunk = [c for c in captions[start : start + generator.batch_size] if generator.precheck(c) is None]
        if chunk:
            generator.generate(chunk)


def full_batches(generator, captions: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        generator.generate_to_jsonl(captions, Path(folder) / "out.jsonl")


def throughput(
    batch_sizes: list[int], device: str, rows: int, hidden_size: int, layers: int
) -> dict[str, str]:
    """Prompts per second of `generate_to_jsonl` (REPLACE: every row goes to the model) at each batch size;
    a warm-up batch first, and on CUDA the clock read after `torch.cuda.synchronize()`."""
    captions = make_captions(rows, 0.2)
    figures = {"rows": str(rows), "device": device, "hidden_size": str(hidden_size), "layers": str(layers),
               "max_new_tokens": "20"}  # fmt: skip
    if device.startswith("cuda"):
        figures["gpu"] = torch.cuda.get_device_name(torch.device(device))
    for batch_size in batch_sizes:
        generator = build_generator(batch_size, device, "replace", hidden_size, layers, max_new_tokens=20)
        figures["dtype"] = str(generator.model.dtype).removeprefix("torch.")
        generator.generate(captions[:batch_size], list(range(batch_size)))  # warm-up: kernels, allocator
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        full_batches(generator, captions)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        figures[f"batch_{batch_size}_seconds"] = f"{seconds:.3g}"
        figures[f"batch_{batch_size}_prompts_per_second"] = f"{rows / seconds:.1f}"
        print(
            f"batch {batch_size:>3}: {rows} prompts in {seconds:.2f} s = {rows / seconds:.1f} prompts/s ({device})"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--share-with-and", type=float, default=0.2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--throughput", action="store_true", help="prompts/s at --throughput-batches instead")
    parser.add_argument("--throughput-batches", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--hidden-size", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.throughput:
        figures = throughput(args.throughput_batches, args.device, args.rows, args.hidden_size, args.layers)
        record(on_device("generation_throughput", torch.device(args.device).type), figures)
        return
    captions = make_captions(args.rows, args.share_with_and)
    arms = {"cut_first": cut_first, "full_batches": full_batches}
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    shape: dict[str, dict] = {}
    for _ in range(args.repeats):
        for name, run in arms.items():  # interleaved, so drift in machine load hits both arms
            generator = build_generator(args.batch_size, args.device)
            stats = timed(generator)
            run(generator, captions)
            seconds[name].append(stats["seconds"])
            shape[name] = stats
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    ratio = medians["cut_first"] / medians["full_batches"]
    figures = {"rows": str(args.rows), "share_with_and": f"{args.share_with_and:.2f}",
               "batch_size": str(args.batch_size), "device": args.device}  # fmt: skip
    for name in arms:
        rows_per_call = shape[name]["rows"] / max(shape[name]["calls"], 1)
        figures[f"{name}_model_calls"] = str(shape[name]["calls"])
        figures[f"{name}_rows_per_call"] = f"{rows_per_call:.2f}"
        figures[f"{name}_model_seconds"] = f"{medians[name]:.3f}"
        print(f"{name:>13}: {shape[name]['calls']} model calls, {rows_per_call:.2f} rows per call, "
              f"{medians[name]:.3f} s of model time (median of {args.repeats})")  # fmt: skip
    figures["ratio_cut_first_over_full_batches"] = f"{ratio:.2f}"
    print(
        f"model time ratio cut_first / full_batches: {ratio:.2f}x ({args.device}, {args.threads} thread(s))"
    )
    record("generation_batches", figures)


if __name__ == "__main__":
    main()
