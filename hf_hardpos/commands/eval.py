"""`hardpos eval`: score a model on a hard-positive dataset and print the paper's table."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a model on REPLACE/SWAP-style data (orig/aug accuracy, brittleness)",
        description="Score image vs caption, hard negative and hard positive; print a Table-1-style "
        "table; write metrics.json and per-row scores to --output.",
    )
    parser.add_argument("--model", required=True, help="Hub id or local folder of a CLIP-like model")
    parser.add_argument("--dataset", required=True, help="Hub id or local folder (parquet + README configs)")
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
    parser.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples for 95%% intervals (0: none)")
    parser.add_argument("--output", default=None, help="folder for metrics.json and scores-<config>.parquet")
    parser.add_argument(
        "--no-resume", action="store_true", help="recompute configs already saved in --output by the same run"
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
    from ..evaluation import evaluate_model

    report = evaluate_model(
        args.model,
        args.dataset,
        args.configs,
        args.split,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        device=args.device,
        precision=args.dtype,
        allow_tf32=args.allow_tf32,
        max_rows=args.max_rows,
        bootstrap_samples=args.bootstrap,
        output_dir=args.output,
        resume=not args.no_resume,
        progress=not args.no_progress,
        cache_dir=args.cache_dir,
    )
    print(report.table())
    if args.output:
        print(f"wrote {args.output}/metrics.json and per-row scores")
    return 0
