"""Command-line options shared by ``dataset_scripts/{replace,swap,finetune}.py``.

The three scripts differ only in their inputs; building into ``--output-dir`` and optionally pushing
that exact folder with ``--push-to-hub`` is the same for all, so it is defined once here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-dir", type=Path, required=True, help="folder to write the Hub repository layout into")
    parser.add_argument(
        "--upstream-dir",
        type=Path,
        default=None,
        help="local copy of github.com/amitakamath/hard_positives (data/, swapped_data/, hard_positives_ft/); "
        "default: download the files from GitHub",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="download/extraction cache and build work folder")
    parser.add_argument(
        "--skip-missing",
        action="store_true",
        help="skip rows whose image is missing (listed in build_report.json) instead of failing",
    )
    parser.add_argument("--max-shard-size", default="500MB", help="maximum parquet shard size, e.g. 500MB")
    parser.add_argument(
        "--push-to-hub", metavar="ORG/NAME", default=None, help="upload the built folder to this dataset repo"
    )
    parser.add_argument("--private", action="store_true", help="create the Hub repo as private")
    parser.add_argument("--token", default=None, help="Hub token (default: the logged-in one)")


def card_repo_id(args: argparse.Namespace, default: str) -> str:
    """The repo id the card's usage example should name."""
    return args.push_to_hub or default


def maybe_push(args: argparse.Namespace) -> None:
    if args.push_to_hub:
        from .hub_export import push_folder

        print(f"Uploading {args.output_dir} to https://huggingface.co/datasets/{args.push_to_hub}")
        print(push_folder(args.output_dir, args.push_to_hub, private=args.private or None, token=args.token))


def build_and_push(args: argparse.Namespace, build: Callable[[], object]) -> int:
    """Run `build`, turning data errors into a one-line message and exit code 1; then push if asked."""
    from .validation import DataValidationError

    try:
        build()
    except (DataValidationError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    maybe_push(args)
    return 0
