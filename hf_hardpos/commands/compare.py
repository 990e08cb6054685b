"""`hardpos compare`: one table across runs (REPLACE / SWAP / other benchmarks), with paired tests and the
paper's rows.

Puts finished `hardpos eval` (or --suite, or fine-tuning) output folders in one table in the layout of
the paper's Table 1. The reference A (--reference, else the first RUN) comes first: every other run gets a
difference row B - A with a paired bootstrap interval over images and McNemar's exact test, where both
scored the same rows. Runs whose data, dtype or protocol differ are refused, with the reason in words,
unless --allow-mismatch. On a terminal the table is cut to its width. Reads each run's `metrics.json` (and,
for the paired tests, its per-row scores); nothing is re-scored.

    hardpos compare out/clip out/negclip --paper
    hardpos compare out/negclip out/hp_hn --reference out/clip --paper
    hardpos compare out/my-model --paper NegCLIP --paper "Our HP+HN"
    hardpos compare out/ce-clip --paper CE-CLIP --rows all      # SugarCrepe's subsets, VALSE's pieces too
    hardpos compare out/clip out/negclip --format latex --output table1.tex
"""

from __future__ import annotations

import argparse

from ._parsers import add_command, refuse_overwriting_inputs, write_output


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..reporting.compare_formats import FORMATS
    from ..reporting.paired import DEFAULT_RESAMPLES

    parser = add_command(subparsers, __name__, run)
    parser.add_argument(
        "runs", nargs="+", metavar="RUN", help="output folder of hardpos eval / --suite / fine-tuning"
    )
    parser.add_argument(
        "--reference",
        metavar="RUN",
        default=None,
        help="the run every other is compared with (one of the RUNs, or another; default: the first RUN)",
    )
    parser.add_argument(
        "--paper",
        nargs="?",
        action="append",
        const="",
        metavar="ROW",
        help="add published rows and each run's delta to them: alone, the row of each run whose "
        "weights a paper reports (Hub id or --preset); with ROW (repeatable), that printed row of "
        "Kamath et al. or CE-CLIP for every run, e.g. --paper NegCLIP --paper CE-CLIP",
    )
    parser.add_argument(
        "--rows",
        choices=("headline", "all"),
        default="headline",
        help="headline (default): each benchmark's paper column or aggregates; all: every config, "
        "subset and piece as well (SugarCrepe's 7 subsets, VALSE's pieces, REPLACE's two subsets)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), markdown, latex; csv and json give one record per number, as fractions",
    )
    parser.add_argument("--output", default=None, help="write the table to this file instead of printing it")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES, help="paired bootstrap resamples")
    parser.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="show runs with different data, dtype or protocol side by side, flagged, without differences",
    )
    parser.add_argument(
        "--width",
        type=int,
        default=None,
        help="cut the text table to this many columns (default: the terminal's, when printing to one)",
    )


def run(args: argparse.Namespace) -> int:
    import shutil
    import sys
    from pathlib import Path

    from ..errors import UserInputError
    from ..reporting.compare import compare_runs, published_rows
    from ..reporting.compare_formats import render
    from ..reporting.runs import load_run

    if args.output is not None:
        refuse_overwriting_inputs(args.output, args.runs)
    if args.bootstrap < 1:
        raise UserInputError(f"--bootstrap must be >= 1, got {args.bootstrap}")
    folders = list(args.runs)
    if args.reference is not None:  # the reference first, once
        chosen = Path(args.reference).expanduser().resolve()
        folders = [args.reference, *(f for f in folders if Path(f).expanduser().resolve() != chosen)]
    runs = [load_run(folder) for folder in folders]
    all_rows = args.rows == "all"
    extra = published_rows(runs, [name for name in args.paper if name], all_rows) if args.paper else []
    width = args.width
    if width is None and args.output is None and sys.stdout.isatty():
        width = shutil.get_terminal_size().columns
    text = render(
        compare_runs(
            runs,
            allow_mismatch=args.allow_mismatch,
            resamples=args.bootstrap,
            published=extra,
            all_rows=all_rows,
        ),
        args.format,
        width,
    )
    if args.output is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return 0
    target = write_output(args.output, text if text.endswith("\n") else text + "\n")
    print(f"wrote the {args.format} table of {len(runs)} run(s) to {target}")
    return 0
