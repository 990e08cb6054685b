"""`hardpos report`: one self-contained HTML page for a run: headline per benchmark, baselines with paired
tests, charts, breakdowns, failures.

Reads a `hardpos eval` (or --suite, or fine-tuning) output folder and writes one HTML file with no
external resources (default RUN/report.html): a table of contents; per benchmark a headline box (rates with
95% intervals and chance, the difference to each --baseline run with its paired test, the worst subset and
replacement type); the table with intervals, bars per subset and per run on one 0-100 % scale, score and
margin distributions, brittleness by replacement (whole phrases, roll-ups by type), the most confidently
brittle rows with their images; for fine-tuning, loss terms and eval rates over steps, the base model at
step 0. Nothing is re-scored.

    hardpos report out/hp_hn --baseline out/clip
    hardpos report out/clip --output clip.html
"""

from __future__ import annotations

import argparse

from ._parsers import add_command, refuse_overwriting_inputs, write_output

REPORT_NAME = "report.html"


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..reporting.breakdown import MIN_ROWS
    from ..reporting.html import DEFAULT_RESAMPLES, NUM_EXAMPLES

    parser = add_command(subparsers, __name__, run)
    parser.add_argument("run", metavar="RUN", help="output folder of hardpos eval / --suite / fine-tuning")
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="RUN0",
        help="a run to compare with (repeatable): shown beside RUN with paired tests on the same "
        "rows; for a fine-tuning RUN, the base model's eval run is drawn at step 0",
    )
    parser.add_argument("--output", default=None, help=f"the HTML file to write (default: RUN/{REPORT_NAME})")
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=DEFAULT_RESAMPLES,
        help="resamples for the paired tests and for intervals a run did not save (over images)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=NUM_EXAMPLES,
        help="how many of the most confidently brittle rows to show",
    )
    parser.add_argument(
        "--min-rows",
        type=int,
        default=MIN_ROWS,
        help="a replacement is listed (and can be the worst type) only with at least this many rows",
    )
    parser.add_argument(
        "--fetch-data",
        action="store_true",
        help="download the Hub dataset a run names (at its recorded revision) to show its captions; "
        "without it only local folders are read",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import UserInputError
    from ..reporting.html import build_report
    from ..reporting.runs import load_run

    output = args.output or Path(args.run) / REPORT_NAME
    refuse_overwriting_inputs(output, [args.run, *args.baseline])
    if args.bootstrap < 1:
        raise UserInputError(f"--bootstrap must be >= 1, got {args.bootstrap}")
    if args.min_rows < 1:
        raise UserInputError(f"--min-rows must be >= 1, got {args.min_rows}")
    if args.examples < 0:
        raise UserInputError(f"--examples must be >= 0, got {args.examples}")
    target_run = load_run(args.run)
    baselines = [load_run(folder) for folder in args.baseline]
    page = build_report(
        target_run,
        baselines=baselines,
        resamples=args.bootstrap,
        examples=args.examples,
        min_rows=args.min_rows,
        fetch_data=args.fetch_data,
    )
    target = write_output(output, page)
    print(f"wrote {target} ({len(page.encode()) / 1e6:.2f} MB, self-contained)")
    return 0
