"""`hardpos generate`: hard positives (or rule-based hard negatives) for a file of captions.

Writes an append-only JSONL keyed by input index; re-running the same command after an
interruption continues where it stopped.
"""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..generation.prompts import KINDS

    parser = subparsers.add_parser(
        "generate",
        help="generate hard positives with an LLM (paper prompts) or with rules",
        description="Generate one hard positive per caption with a causal LM (greedy, the paper's prompts) "
        "or with the rule-based generators, validate it, and append one JSON line per caption "
        '({"index", "input", "output", "valid", "reason", "raw"}) to --output. Re-running the same '
        "command resumes an interrupted run.",
    )
    parser.add_argument(
        "--kind", required=True, choices=KINDS, help="perturbation: replace, swap, or a relation-targeted replace"
    )
    parser.add_argument("--input", required=True, help="captions: .txt (one per line) or .jsonl (see --field)")
    parser.add_argument("--field", default="caption", help="caption field of a .jsonl input (default: caption)")
    parser.add_argument("--output", required=True, help="output .jsonl (appended to; resumed if it exists)")
    parser.add_argument(
        "--method", choices=("llm", "rules"), default=None, help="default: llm when --model is given, else rules"
    )
    parser.add_argument("--model", default=None, help="Hub id or local folder of a causal LM (method llm)")
    parser.add_argument(
        "--batch-size", type=int, default=None,
        help="captions per model call and per flush of --output (default: 8 with llm, 256 with rules)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: 30 for replace kinds, 20 for swap")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", default="auto", help="model dtype: auto, bfloat16, float16, float32")
    parser.add_argument("--device-map", default=None, help='e.g. "auto" to shard a large model over GPUs')
    parser.add_argument(
        "--chat-template", choices=("auto", "on", "off"), default="auto",
        help="wrap the prompt in the tokenizer's chat template (auto: when it has one)",
    )
    parser.add_argument("--negative", action="store_true", help="rules only: hard negatives instead of positives")
    parser.add_argument("--seed", type=int, default=0, help="rules only: seed of the per-caption choice")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..generation.inputs import read_captions

    method = args.method or ("llm" if args.model else "rules")
    if method == "llm" and not args.model:
        raise SystemExit("hardpos generate: --method llm needs --model")
    if method == "llm" and args.negative:
        raise SystemExit("hardpos generate: --negative is available with --method rules only")
    captions = read_captions(args.input, field=args.field)
    progress = not args.no_progress
    if method == "rules":
        from ..generation.rule_generator import RuleGenerator

        generator = RuleGenerator(
            args.kind, negative=args.negative, seed=args.seed, batch_size=args.batch_size or 256, progress=progress
        )
    else:
        from ..generation.llm import LLMGenerator

        model_kwargs = {"device_map": args.device_map} if args.device_map else {}
        generator = LLMGenerator.from_pretrained(
            args.model,
            args.kind,
            device=args.device,
            dtype=args.dtype,
            model_kwargs=model_kwargs,
            batch_size=args.batch_size or 8,
            max_new_tokens=args.max_new_tokens,
            use_chat_template={"auto": None, "on": True, "off": False}[args.chat_template],
            progress=progress,
        )
    summary = generator.generate_to_jsonl(captions, args.output)
    summary.update(method=method, kind=args.kind, output=str(args.output))
    print(json.dumps(summary, indent=2))
    return 0
