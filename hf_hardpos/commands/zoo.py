"""`hardpos zoo`: the baselines of the paper's Table 1 (and CE-CLIP, CLIP-COCO) and how to convert each."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "zoo",
        help="list the Table 1 baselines: where their weights are, architecture, activation, LoRA, citation, license",
        description="Presets for `hardpos convert --preset NAME --checkpoint FILE --output-dir DIR`. Facts read from "
        "each project's public code (not from the weight files).",
    )
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..conversion.presets import ZOO_HEADER, zoo_rows
    from ..tables import render_table

    print(render_table(ZOO_HEADER, zoo_rows(), markdown=args.markdown))
    print(
        "\n'trained act.' is the activation the model was trained with; 'paper evaluated' is what the paper's code "
        "built (open_clip ViT-B-32 + a file path = GELU). A preset converts with the paper's activation, to reproduce "
        "Table 1; add --activation quick_gelu for the model as trained. Convert: hardpos convert --preset NAME "
        "--checkpoint FILE --output-dir DIR"
    )
    return 0
