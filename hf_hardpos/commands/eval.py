"""`hardpos eval`: score a model on one benchmark or a suite and print how every number was obtained."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..suite import SUITES, TASKS

    parser = subparsers.add_parser(
        "eval",
        help="evaluate a model: hard positives (orig/aug accuracy, brittleness), SugarCrepe/ARO, Winoground, "
        "zero-shot retention, or a whole suite",
        description="Recognise what --dataset is (our hard-positive schema, caption + negatives, Winoground, or "
        "clip_benchmark's webdataset layout) and run its task; or run a --suite. Prints tables that name their "
        "aggregation and tie rule; writes metrics.json (with provenance) and per-row scores to --output.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="Hub id or local folder (parquet + README configs, or a clip_benchmark webdataset)")
    source.add_argument("--suite", help=f"one of {sorted(SUITES)}, or a YAML file listing datasets (README: Benchmarks)")
    parser.add_argument("--model", required=True, help="Hub id or local folder of a CLIP-like model")
    parser.add_argument("--task", choices=TASKS, default=None, help="override the task recognised from the data")
    parser.add_argument(
        "--config", action="append", dest="configs", help="config to evaluate (repeatable; default: all)"
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers decoding images")
    parser.add_argument("--device", default=None, help="default: cuda, then mps, then cpu")
    parser.add_argument(
        "--dtype",
        choices=["fp32", "bf16", "fp16"],
        default="fp32",
        help="fp32 (default on every device) or bf16/fp16 autocast; lower precision flips near-tied "
        "outcomes (README: Precision), and the choice is recorded in metrics.json",
    )
    parser.add_argument("--allow-tf32", action="store_true", help="allow TF32 matmuls/convolutions on CUDA")
    parser.add_argument("--max-rows", type=int, default=None, help="evaluate only the first N rows per config")
    parser.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples (over images) for 95%% intervals")
    parser.add_argument("--output", default=None, help="folder for metrics.json and per-row scores (required for --suite)")
    parser.add_argument(
        "--no-resume", action="store_true", help="recompute what --output already holds from the same inputs"
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="keep image/text embeddings on disk by content, per model and settings, so every distinct "
        "input is encoded once across datasets and runs",
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import UserInputError
    from ..evaluation import check_run_options, evaluate_model
    from ..suite import HARD_POSITIVE, SuiteEntry, detect_task, load_suite, run_suite

    check_run_options(args.batch_size, args.num_workers, args.max_rows, args.bootstrap)
    common = dict(
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        device=args.device,
        precision=args.dtype,
        allow_tf32=args.allow_tf32,
        max_rows=args.max_rows,
        cache_dir=args.cache_dir,
        resume=not args.no_resume,
        progress=not args.no_progress,
    )
    if args.suite is None:
        task = args.task or detect_task(args.dataset, args.split, args.configs)
        if task == HARD_POSITIVE:
            report = evaluate_model(
                args.model, args.dataset, args.configs, args.split, bootstrap_samples=args.bootstrap,
                output_dir=args.output, **common,
            )
            print(report.table())
            if args.output:
                print(f"wrote {args.output}/metrics.json and per-row scores")
            return 0
        entries = [SuiteEntry(Path(args.dataset).name or args.dataset, args.dataset, task, args.configs, args.split)]
    else:
        entries = load_suite(args.suite)
    if args.output is None:
        raise UserInputError("--output is required for this task (results are saved per dataset, to resume)")
    if args.bootstrap:
        raise UserInputError("--bootstrap applies to hard-positive datasets evaluated on their own")
    report = run_suite(args.model, entries, output_dir=args.output, **common)
    print(report.table())
    print(f"wrote {args.output}/metrics.json")
    return 0
