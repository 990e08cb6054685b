"""`hardpos report`: one self-contained HTML page for a run: tables with intervals, charts, breakdowns,
failures.

Reads a `hardpos eval` (or --suite, or fine-tuning) output folder and writes one HTML file with no
external resources: the table with 95% intervals, per-subset bars, score and margin distributions,
augmented accuracy and brittleness by replacement, the most confidently brittle rows with their
images; for fine-tuning, each loss term and eval metric over steps. Nothing is re-scored.

    hardpos report out/clip --output clip.html
"""

from __future__ import annotations

import argparse

from ..cli import add_command, refuse_overwriting_inputs, write_output


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..reporting.html import DEFAULT_RESAMPLES, NUM_EXAMPLES

    parser = add_command(subparsers, __name__, run)
    parser.add_argument("run", metavar="RUN", help="output folder of hardpos eval / --suite / fine-tuning")
    parser.add_argument("--output", required=True, help="the HTML file to write")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES,
                        help="resamples for intervals a run did not save (over images; default %(default)s)")
    parser.add_argument("--examples", type=int, default=NUM_EXAMPLES,
                        help="how many of the most confidently brittle rows to show (default %(default)s)")
    parser.add_argument("--fetch-data", action="store_true",
                        help="download the Hub dataset a run names (at its recorded revision) to show its captions; "
                             "without it only local folders are read")


def run(args: argparse.Namespace) -> int:
    from ..errors import UserInputError
    from ..reporting.html import build_report
    from ..reporting.runs import load_run

    refuse_overwriting_inputs(args.output, [args.run])
    if args.bootstrap < 1:
        raise UserInputError(f"--bootstrap must be >= 1, got {args.bootstrap}")
    if args.examples < 0:
        raise UserInputError(f"--examples must be >= 0, got {args.examples}")
    page = build_report(load_run(args.run), resamples=args.bootstrap, examples=args.examples, fetch_data=args.fetch_data)
    target = write_output(args.output, page)
    print(f"wrote {target} ({len(page.encode()) / 1e6:.2f} MB, self-contained)")
    return 0
