"""`hardpos demo`: the whole pipeline on the embedded synthetic world, no downloads (paper tables in
miniature).

Runs offline on a CPU (about 2 minutes on 2 cores): builds a synthetic compositional world (two
coloured shapes in a spatial relation), pretrains a tiny CLIP on alt-text-like captions (cached in
--output-dir), fine-tunes 'contrastive', 'hn' and 'hp+hn' on precise captions with hard negatives and
positives using the package's trainer, evaluates each on synthetic REPLACE and SWAP with the
package's scorer, prints the tables and writes results.json, run_info.json, results.md, results.png
and the models to --output-dir, and prints the paper's controlled comparisons
(hp+hn vs hn, hn vs contrastive) with paired tests over images and the seed spread. --full: 5 seeds,
the HN-weight sweep of paper Table 3 and bootstrap intervals.
"""

from __future__ import annotations

import argparse

from ..errors import UserInputError
from ._parsers import add_command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, __name__, run)
    parser.add_argument(
        "--output-dir", required=True, help="folder for results.json, the chart and the models"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full experiment: 5 seeds, HN-weight sweep, 1000-row eval sets, 95%% bootstrap intervals",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="fine-tuning seeds (default: 0 1; --full: 0 1 2 3 4)",
    )
    parser.add_argument(
        "--sweep", action="store_true", help="add the HN-weight sweep of paper Table 3 (on with --full)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny budgets: a smoke test in seconds (numbers meaningless)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="fine-tunes run at a time, each in a forked process (default: one per core on a Linux CPU; 1: one after "
        "another, with progress bars on a terminal); the numbers are the same either way",
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="progress bars"
    )
    progress.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no bars, one line per stage (the default off a terminal)",
    )


def run(args: argparse.Namespace) -> int:
    from ..synthetic.demo import DemoConfig, run_demo

    if args.full and args.quick:
        raise UserInputError("--full and --quick contradict each other: pick one")
    seeds = tuple(args.seeds) if args.seeds else None
    if seeds is not None and len(set(seeds)) != len(seeds):
        raise UserInputError(f"--seeds has repeated values {list(seeds)}: give each seed once")
    if args.full:
        config = DemoConfig.full(seeds) if seeds else DemoConfig.full()
    elif args.quick:
        config = DemoConfig.quick(seeds) if seeds else DemoConfig.quick()
    else:
        config = DemoConfig(seeds=seeds) if seeds else DemoConfig()
    if args.sweep:
        config.sweep = True
    if args.processes is not None:
        if args.processes < 1:
            raise UserInputError(f"--processes must be at least 1, got {args.processes}")
        config.processes = args.processes
    run_demo(args.output_dir, config, progress=args.progress)
    return 0
