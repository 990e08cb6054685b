"""`hardpos zoo`: the baselines of the paper's Table 1 (and CE-CLIP, CLIP-COCO: weights, architecture,
activation, LoRA, citation, license) and the pretrained models of its Table 8 (route, --model, figures).

Presets for `hardpos convert --preset NAME --checkpoint FILE --output-dir DIR`, and the `--model` that
scores each Table 8 model, and the model backend (`hf_hardpos.backends`) that scores it. Facts read from
each project's public code (not from the weight files); published figures from `hf_hardpos.published`.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap

from ._parsers import add_command

TABLE8_HEADER = (
    "preset",
    "Table 8 row",
    "route",
    "--model",
    "weights",
    "paper loaded it with",
    "published REPLACE",
    "published SWAP",
    "cite",
    "license",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    add_command(subparsers, __name__, run).add_argument(
        "--markdown", action="store_true", help="print a Markdown table"
    )


def run(args: argparse.Namespace) -> int:
    from ..backends import BACKENDS
    from ..conversion.presets import PRETRAINED_PRESETS, ZOO_HEADER, zoo_rows
    from ..tables import render_table

    width = shutil.get_terminal_size().columns  # prose wrapped to the terminal (80 columns off one)

    def say(text: str) -> None:
        print("\n".join(textwrap.fill(part, width, break_on_hyphens=False) if part else part
                        for part in text.split("\n")))  # fmt: skip

    print(render_table(ZOO_HEADER, zoo_rows(), markdown=args.markdown))
    say(
        "\n'trained act.' is the activation the model was trained with; 'paper evaluated' is what the paper's code "
        "built (open_clip ViT-B-32 + a file path = GELU). A preset converts with the paper's activation, to reproduce "
        "Table 1; add --activation quick_gelu for the model as trained. Convert: hardpos convert --preset NAME "
        "--checkpoint FILE --output-dir DIR"
    )
    say("\nTable 8 (more pretrained models): evaluate with hardpos eval --model <--model column>\n")
    print(render_table(TABLE8_HEADER, table8_rows(), markdown=args.markdown))
    say("\nroute: the model backend that scores the row (hardpos eval --backend NAME):")
    for backend in BACKENDS.values():
        say(f"- {backend.name}: {backend.summary}")
    say(
        "Published figures: original / augmented accuracy / brittleness, percent, from hf_hardpos.published "
        "('not typed': no checked reading of that row yet)."
    )
    for preset in PRETRAINED_PRESETS.values():
        extra = f"; other route: --model {preset.other_route}" if preset.other_route else ""
        if preset.note or extra:
            say(f"- {preset.name}: {preset.note}{extra}")
    return 0


def table8_rows() -> list[list[str]]:
    """One row per Table 8 model; published figures read from `hf_hardpos.published`, never typed here."""
    from ..conversion.presets import PRETRAINED_PRESETS

    return [
        [
            p.name,
            p.row,
            p.route,
            p.model or "-",
            p.weights,
            p.paper_loader,
            _published(p.row, "replace"),
            _published(p.row, "swap"),
            p.citation,
            p.license,
        ]
        for p in PRETRAINED_PRESETS.values()
    ]


def _published(row: str, benchmark: str) -> str:
    """The paper's orig / aug / brittleness for `row` (percent, from `hf_hardpos.published`), or why not."""
    from ..published import lookup

    figures = [
        lookup(row, benchmark, metric)
        for metric in ("original_accuracy", "augmented_accuracy", "brittleness")
    ]
    if any(f is None for f in figures):
        return "not typed"
    return " / ".join(f"{f.value:.1f}" for f in figures)
