"""`hardpos zoo`: the baselines of the paper's Table 1 (and CE-CLIP, CLIP-COCO: weights, architecture,
activation, LoRA, citation, license) and the pretrained models of its Table 8 (route, --model, figures).

Presets for `hardpos convert --preset NAME --checkpoint FILE --output-dir DIR`, and the `--model` that
scores each Table 8 model (HF copy or open_clip-native). Facts read from each project's public code
(not from the weight files).
"""

from __future__ import annotations

import argparse

from ..command_parsers import add_command


def register(subparsers: argparse._SubParsersAction) -> None:
    add_command(subparsers, __name__, run).add_argument("--markdown", action="store_true", help="print a Markdown table")


def run(args: argparse.Namespace) -> int:
    from ..conversion.presets import PRETRAINED_PRESETS, TABLE8_HEADER, ZOO_HEADER, table8_rows, zoo_rows
    from ..tables import render_table

    print(render_table(ZOO_HEADER, zoo_rows(), markdown=args.markdown))
    print(
        "\n'trained act.' is the activation the model was trained with; 'paper evaluated' is what the paper's code "
        "built (open_clip ViT-B-32 + a file path = GELU). A preset converts with the paper's activation, to reproduce "
        "Table 1; add --activation quick_gelu for the model as trained. Convert: hardpos convert --preset NAME "
        "--checkpoint FILE --output-dir DIR"
    )
    print("\nTable 8 (more pretrained models): evaluate with hardpos eval --model <--model column>\n")
    print(render_table(TABLE8_HEADER, table8_rows(), markdown=args.markdown))
    print(
        "\nroute: 'HF CLIPModel' loads a Hub copy in transformers' format; 'open_clip-native' needs the [openclip] "
        "extra (pip install -e \".[openclip]\") and scores the model with open_clip's own transforms and tokenizer. "
        "Published figures: original / augmented accuracy / brittleness, percent, from hf_hardpos.published "
        "('not typed': no checked reading of that row yet)."
    )
    for preset in PRETRAINED_PRESETS.values():
        extra = f"; other route: --model {preset.alternative}" if preset.alternative else ""
        if preset.note or extra:
            print(f"- {preset.name}: {preset.note}{extra}")
    return 0
