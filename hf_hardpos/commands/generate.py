"""`hardpos generate`: hard positives (LLM, rules) or hard negatives (rules, masked LM) for a file of captions.

Generates one hard positive per caption with a causal LM (by default as the paper's released
generate_hard_positives.py: its prompts, no chat template, the model's own generation config) or with
the rule-based generators, or typed hard negatives (CE-CLIP's relation / attribute / action / object)
with a masked LM at spaCy part-of-speech positions (by default CE-CLIP's released procedure);
validates each and appends one JSON line per caption and kind ({"index", "input", "output", "valid",
"reason", "raw", "method", "kind", "polarity"}) to --output.

The output is append-only, keyed by input index, and owns its run (under `accelerate launch` /
`torchrun`, one shard per rank, merged at the end; with `--num-shards N --shard-index I`, one shard
per process started by hand, e.g. one per machine for a model that needs a machine, merged by a
later run without those options): a manifest of the options and the input's sha256,
and a lock against a second writer. Every check that can fail (options, input, output, lock,
manifest) runs before a model is loaded; re-running the same command after an interruption continues
where it stopped, and a different command on the same --output is refused.

The manifest records the command's options as given (e.g. `dtype: auto`), the model's fingerprint
(a local folder's file digest or a Hub id's resolved commit) and, once the model is loaded, the
settings resolved from it (`settings`: the generation config in force, the seed, the prompt's
digest); a resume that differs in any of them is refused. A run started from the Python API records
the generator's own `options()`, so resume a run through the interface that started it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from ._parsers import add_command

METHODS = ("rules", "llm", "mlm")
MLM_DEFAULT_MODEL = "distilroberta-base"
MLM_PROCEDURES = ("ce-clip", "ours")


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..generation.mlm import MLM_KINDS
    from ..generation.validation import KINDS

    parser = add_command(subparsers, __name__, run)
    parser.add_argument(
        "--kind",
        required=True,
        choices=(*KINDS, *MLM_KINDS),
        help=f"llm/rules: {', '.join(KINDS)}; mlm (with --negative): {', '.join(MLM_KINDS)}",
    )
    parser.add_argument(
        "--input", required=True, help="captions: .txt (one per line) or .jsonl (see --field)"
    )
    parser.add_argument(
        "--field", default="caption", help="caption field of a .jsonl input (default: caption)"
    )
    parser.add_argument("--output", required=True, help="output .jsonl (appended to; resumed if it exists)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing --output (and its manifest) and start again",
    )
    parser.add_argument(
        "--method", choices=METHODS, default=None, help="default: llm when --model is given, else rules"
    )
    parser.add_argument(
        "--model",
        default=None,
        help=f"Hub id or local folder: a causal LM (llm) or a masked LM (mlm, default {MLM_DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="captions per model call and per flush of --output (default: 32 with llm, the released script's; 32 with "
        "mlm, 256 with rules); the records do not depend on it",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="llm: default 30 for replace kinds, 20 for swap (paper Appendix C; the released script's default is 20)",
    )
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument(
        "--dtype",
        default=None,
        help="model dtype: auto (the checkpoint's), bfloat16, float16, float32; default: llm float16 on CUDA "
        "(as the released script) and float32 on CPU, mlm auto",
    )
    parser.add_argument(
        "--device-map",
        default=None,
        help='llm: "auto" spreads a model too large for one GPU over this machine\'s GPUs (one process per machine; '
        "see --num-shards to spread the captions over machines)",
    )
    parser.add_argument(
        "--attn-implementation",
        default=None,
        help="llm: the model's attention (e.g. sdpa, eager, flash_attention_2 as the released script; default: "
        "transformers' choice)",
    )
    parser.add_argument(
        "--fidelity",
        choices=("paper", "current-pipeline"),
        default="paper",
        help="llm: paper (default: the token ids and text of the released script's pipeline call in transformers "
        "4.36-4.42: no special tokens, so no <s> for Llama-2; tokenisation spaces cleaned up) or current-pipeline "
        "(the same call in transformers >= 4.45: the tokenizer's special tokens)",
    )
    parser.add_argument(
        "--acceptance",
        choices=("paper", "strict"),
        default="paper",
        help="llm: both rules are ours (the paper's script keeps every output): paper (default, lenient: refuse "
        "only empty, chatter, several sentences, identical, an and-swap that moved attributes) or strict "
        "(one short replacement, "
        "exactly the same words swapped, symbols and names kept, no cut-off answer); --report gives both shares",
    )
    parser.add_argument(
        "--num-shards",
        type=int,
        default=None,
        help="spread the captions over N independent processes (e.g. one per machine with --device-map auto): "
        "with --shard-index I this process generates rows I, I+N, ... into --output's shard folder; a run "
        "without them (any machine, after all shards) merges the shards into --output",
    )
    parser.add_argument(
        "--shard-index", type=int, default=None, help="this process's shard, 0 .. N-1 (with --num-shards)"
    )
    parser.add_argument(
        "--verify-weights",
        action="store_true",
        help="re-hash every weight file of a local --model instead of trusting the digest cached by "
        "(path, size, mtime) from an earlier run",
    )
    parser.add_argument(
        "--chat-template",
        choices=("off", "on"),
        default="off",
        help="llm: off (default, the released script: the raw prompt) or on (ours: the tokenizer's chat template)",
    )
    parser.add_argument(
        "--decoding",
        choices=("model", "greedy"),
        default="model",
        help="llm: model (default, the released script: no decoding arguments, the model's generation_config "
        "decides, e.g. Llama-2-chat samples at temperature 0.6, top-p 0.9) or greedy (ours)",
    )
    parser.add_argument(
        "--negative", action="store_true", help="hard negatives (rules, mlm) instead of positives"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of every random choice: rules/mlm per-caption draws, llm sampling per row (seed, row index) "
        "(and --report's sample)",
    )
    parser.add_argument(
        "--mlm-procedure",
        choices=MLM_PROCEDURES,
        default="ce-clip",
        help="mlm: ce-clip (default, CE-CLIP's released TextAugment: 4th of the top-5 fills, relation swap of the "
        "first two nouns when there are more than two) or ours (filtered fills, LM-ranked relation swaps)",
    )
    parser.add_argument(
        "--spacy-model",
        default="en_core_web_sm",
        help="mlm: spaCy pipeline (name or folder) for the POS tags",
    )
    parser.add_argument(
        "--num-candidates",
        type=int,
        default=None,
        help="mlm with --mlm-procedure ours: ranked candidates kept per record (the first is the output; default 5)",
    )
    parser.add_argument("--report", action="store_true", help="print a quality report of --output when done")
    parser.add_argument(
        "--report-samples", type=int, default=5, help="random records shown per kind by --report"
    )
    parser.add_argument("--no-progress", action="store_true")


def check_arguments(args: argparse.Namespace) -> str:
    """The method, after refusing every combination of options that cannot work (before any I/O)."""
    from ..errors import UserInputError
    from ..generation.mlm import MLM_KINDS
    from ..generation.rule_generator import NEGATIVE_KINDS
    from ..generation.sharding import world_size

    method = args.method or ("llm" if args.model else "rules")
    for option, value in (
        ("--batch-size", args.batch_size),
        ("--max-new-tokens", args.max_new_tokens),
        ("--num-candidates", args.num_candidates),
    ):
        if value is not None and value < 1:
            raise UserInputError(f"{option} must be a positive integer, got {value}")
    if args.report_samples < 0:
        raise UserInputError(f"--report-samples must be >= 0, got {args.report_samples}")
    if args.num_candidates is not None and (method != "mlm" or args.mlm_procedure != "ours"):
        raise UserInputError(
            "--num-candidates applies to --method mlm --mlm-procedure ours (CE-CLIP's procedure keeps its top 5)"
        )
    if (args.num_shards is None) != (args.shard_index is None):
        raise UserInputError("--num-shards and --shard-index go together (this process's shard I of N)")
    if args.num_shards is not None:
        if args.num_shards < 1 or not 0 <= args.shard_index < args.num_shards:
            raise UserInputError(
                f"--shard-index must be 0 .. {args.num_shards - 1} for --num-shards {args.num_shards}, got {args.shard_index}"
            )
        if world_size() > 1:
            raise UserInputError(
                "--num-shards is for processes started one by one; under accelerate launch / torchrun "
                "each rank already takes its shard"
            )
    llm_only = [flag for flag, given in (("--attn-implementation", args.attn_implementation),
                                          ("--device-map", args.device_map)) if given]  # fmt: skip
    if method != "llm" and llm_only:
        raise UserInputError(f"{', '.join(llm_only)} apply to --method llm")
    if method == "llm" and not args.model:
        raise UserInputError("--method llm needs --model (a causal LM: Hub id or local folder)")
    if method == "llm" and args.negative:
        raise UserInputError(
            "--negative is available with --method rules or mlm; the llm method makes hard positives"
        )
    if method == "mlm" and not args.negative:
        raise UserInputError("--method mlm makes hard negatives only: add --negative")
    if (method == "mlm") != (args.kind in MLM_KINDS):
        valid = MLM_KINDS if method == "mlm" else (NEGATIVE_KINDS if args.negative else None)
        what = ", ".join(valid) if valid else "replace, swap, replace-verb, replace-spatial"
        raise UserInputError(f"--kind {args.kind} does not exist for --method {method}; use one of {what}")
    if method == "rules" and args.negative and args.kind not in NEGATIVE_KINDS:
        raise UserInputError(
            f"--kind {args.kind} exists for hard positives only; use {' or '.join(NEGATIVE_KINDS)}"
        )
    return method


def command_options(args: argparse.Namespace, method: str) -> dict:
    """What decides the records of this command (the manifest's `options`; batch size and device do not)."""
    options = {"method": method, "polarity": "negative" if args.negative else "positive", "kind": args.kind}
    if method == "llm":
        from ..generation.llm import MAX_NEW_TOKENS, default_dtype
        from ..generation.models import model_fingerprint

        dtype = args.dtype or str(default_dtype(None if args.device_map else args.device)).removeprefix(
            "torch."
        )
        options.update(
            model=args.model,
            model_fingerprint=model_fingerprint(
                args.model, verify=args.verify_weights, progress=not args.no_progress
            ),
            dtype=dtype,
            max_new_tokens=args.max_new_tokens or MAX_NEW_TOKENS[args.kind],
            chat_template=args.chat_template == "on",
            decoding=args.decoding,
            fidelity=args.fidelity,
            acceptance=args.acceptance,
            seed=args.seed,
        )
        if args.attn_implementation:
            options.update(attn_implementation=args.attn_implementation)
    elif method == "mlm":
        from ..generation.models import model_fingerprint

        model = args.model or MLM_DEFAULT_MODEL
        options.update(
            procedure=args.mlm_procedure,
            model=model,
            model_fingerprint=model_fingerprint(model),
            dtype=args.dtype or "auto",
            spacy_model=args.spacy_model,
            seed=args.seed,
        )
        if args.mlm_procedure == "ours":
            options.update(num_candidates=args.num_candidates or 5)
    else:
        options.update(seed=args.seed)
    return options


def build_generator(args: argparse.Namespace, method: str, device: str | None = None):
    """The generator for the command (loads the model: call after the output is opened).

    `device` (this rank's device under a distributed launch) applies when --device is not given.
    """
    progress = not args.no_progress
    device = args.device or device
    if method == "rules":
        from ..generation.rule_generator import RuleGenerator

        return RuleGenerator(
            args.kind,
            negative=args.negative,
            seed=args.seed,
            batch_size=args.batch_size or 256,
            progress=progress,
        )
    if method == "mlm":
        from ..generation.mlm import MLMNegativeGenerator, spacy_tagger

        common = dict(
            tagger=spacy_tagger(args.spacy_model),
            device=device,
            dtype=args.dtype or "auto",
            seed=args.seed,
            batch_size=args.batch_size or 32,
            progress=progress,
        )
        if args.mlm_procedure == "ours":
            return MLMNegativeGenerator.from_pretrained(
                args.model or MLM_DEFAULT_MODEL, args.kind, num_candidates=args.num_candidates or 5, **common
            )
        from ..generation.ce_clip import CEClipNegativeGenerator

        return CEClipNegativeGenerator.from_pretrained(args.model or MLM_DEFAULT_MODEL, args.kind, **common)
    from ..generation.llm import DEFAULT_BATCH_SIZE, LLMGenerator

    model_kwargs = {"device_map": args.device_map, "attn_implementation": args.attn_implementation}
    return LLMGenerator.from_pretrained(
        args.model,
        args.kind,
        device=device,
        dtype=args.dtype,
        model_kwargs={key: value for key, value in model_kwargs.items() if value},
        batch_size=args.batch_size or DEFAULT_BATCH_SIZE,
        max_new_tokens=args.max_new_tokens,
        use_chat_template=args.chat_template == "on",
        decoding=args.decoding,
        fidelity=args.fidelity,
        acceptance=args.acceptance,
        seed=args.seed,
        progress=progress,
    )


def run(args: argparse.Namespace) -> int:
    from ..generation.caption_file import read_captions
    from ..generation.report import quality_report
    from ..generation.resumable import generate_into
    from ..generation.run_output import GenerationOutput
    from ..generation.sharding import adopt_shards, generate_sharded, run_shard, shard_dir, world_size

    method = check_arguments(args)
    captions = read_captions(args.input, field=args.field)
    options = command_options(args, method)
    if args.num_shards is not None:
        # one process of many started by hand (e.g. one per machine): this shard only; a later run
        # without --num-shards merges the shards
        summary, _ = run_shard(
            lambda: build_generator(args, method),
            captions,
            args.output,
            options,
            args.shard_index,
            args.num_shards,
            overwrite=args.overwrite,
        )
    elif world_size() > 1:
        # accelerate launch / torchrun: one resumable shard per rank, merged by the main process
        summary = generate_sharded(
            lambda state: build_generator(
                args, method, device=str(state.device) if method != "rules" else None
            ),
            captions,
            args.output,
            options,
            overwrite=args.overwrite,
        )
    else:
        with GenerationOutput(args.output, options, captions, overwrite=args.overwrite) as output:
            if args.overwrite:
                shutil.rmtree(shard_dir(args.output), ignore_errors=True)
            # a stopped sharded launch continued in one process: its finished rows are kept, not redone
            adopted = adopt_shards(output, options, captions)
            summary = generate_into(build_generator(args, method), captions, output)
            summary["adopted_from_shards"] = adopted
    empty = summary.pop("empty_rows")
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (", ..." if len(empty) > 10 else "")
        print(
            f"warning: {len(empty)} empty caption(s) in {args.input} at index {shown}: written as "
            "'empty input' records so that every later index stays aligned with the input",
            file=sys.stderr,
        )
    summary.update(method=method, kind=args.kind, output=str(args.output), empty_inputs=len(empty))
    print(json.dumps(summary, indent=2))
    if args.num_shards is not None and args.report:  # this shard's records (the merge comes later)
        print(quality_report(summary["shard"], samples=args.report_samples, seed=args.seed))
    elif args.report and summary.get("rank", 0) == 0:
        print(quality_report(args.output, samples=args.report_samples, seed=args.seed))
    return 0
