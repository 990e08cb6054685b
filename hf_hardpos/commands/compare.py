"""`hardpos compare`: one table across runs (REPLACE / SWAP / other benchmarks), with paired tests and the
paper's rows.

Puts finished `hardpos eval` (or --suite, or fine-tuning) output folders in one table in the layout of
the paper's Table 1. The first RUN is the reference A: every other run gets a difference row B - A with
a paired bootstrap interval over images and McNemar's exact test, where both scored the same rows.
Runs whose data, dtype or protocol differ are refused unless --allow-mismatch. Reads each run's
`metrics.json` (and, for the paired tests, its per-row scores); nothing is re-scored.

    hardpos compare out/clip out/negclip --paper
    hardpos compare out/clip out/negclip --format latex --output table1.tex
"""

from __future__ import annotations

import argparse

from ..cli import add_command, refuse_overwriting_inputs, write_output


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..reporting.compare import FORMATS
    from ..reporting.paired import DEFAULT_RESAMPLES

    parser = add_command(subparsers, __name__, run)
    parser.add_argument("runs", nargs="+", metavar="RUN", help="output folder of hardpos eval / --suite / fine-tuning")
    parser.add_argument("--paper", action="store_true",
                        help="add the published rows of the models the paper reports, and each run's delta to them")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), markdown, latex; csv and json give one record per number, as fractions")
    parser.add_argument("--output", default=None, help="write the table to this file instead of printing it")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES,
                        help=f"paired bootstrap resamples (default {DEFAULT_RESAMPLES})")
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="show runs with different data, dtype or protocol side by side, flagged, without differences")


def run(args: argparse.Namespace) -> int:
    from ..errors import UserInputError
    from ..reporting.compare import compare_runs, published_rows, render
    from ..reporting.runs import load_run

    if args.output is not None:
        refuse_overwriting_inputs(args.output, args.runs)
    if args.bootstrap < 1:
        raise UserInputError(f"--bootstrap must be >= 1, got {args.bootstrap}")
    runs = [load_run(folder) for folder in args.runs]
    extra = published_rows(runs) if args.paper else []
    text = render(compare_runs(runs, allow_mismatch=args.allow_mismatch, resamples=args.bootstrap,
                               published=extra), args.format)
    if args.output is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return 0
    target = write_output(args.output, text if text.endswith("\n") else text + "\n")
    print(f"wrote the {args.format} table of {len(runs)} run(s) to {target}")
    return 0
