"""`hardpos demo`: the whole pipeline on the embedded synthetic world, no downloads (paper tables in miniature)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="pretrain a tiny CLIP on a synthetic world, fine-tune with/without hard positives, evaluate",
        description="Runs offline on a CPU: builds a synthetic compositional world (two coloured shapes in a "
        "spatial relation), pretrains a tiny CLIP on it, fine-tunes the variants 'contrastive', 'hn', 'hp+hn' "
        "and the HN-weight sweep of paper Table 3 with the package's trainer, evaluates each on synthetic "
        "REPLACE and SWAP with the package's evaluator, prints the table and writes results.json, "
        "run_info.json, results.md, results.png and the models to --output-dir.",
    )
    parser.add_argument("--output-dir", required=True, help="folder for results.json, the chart and the models")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="fine-tuning seeds (default: 0 1 2; --quick: 0)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny budgets: a smoke test in well under a minute")
    parser.add_argument("--no-sweep", action="store_true", help="skip the HN-weight sweep (main variants only)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo import DemoConfig, run_demo

    seeds = tuple(args.seeds) if args.seeds else None
    if args.quick:
        config = DemoConfig.quick(seeds or (0,))
    else:
        config = DemoConfig(seeds=seeds) if seeds else DemoConfig()
    config.sweep = not args.no_sweep
    run_demo(args.output_dir, config, progress=not args.no_progress)
    return 0
