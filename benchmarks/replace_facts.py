"""Facts about the upstream REPLACE files that the docs quote (docs/datasets.md), computed here rather than typed.

    python benchmarks/replace_facts.py --upstream-dir hard_positives

`--upstream-dir` is a clone of github.com/amitakamath/hard_positives (the files the REPLACE builder reads:
`data/vl_checklist_{attributes,relations}.json` and `swapped_data/` beside it). Prints and records in
`benchmarks/results.json`: distinct images per subset, in both and shared; the relation rows whose hard
positive reads "within front of"; and how many upstream hard positives the rule method's synonym table
reproduces, over every row of each subset (a/an ignored).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from results import record  # benchmarks/results.py: one results file for every benchmark

from hf_hardpos.columns import REPLACE_SUBSETS
from hf_hardpos.generation.rules import hard_positive_candidates


def _article_blind(text: str) -> str:
    return re.sub(r"\ban\b", "a", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--upstream-dir", type=Path, required=True, help="a clone of amitakamath/hard_positives"
    )
    args = parser.parse_args()
    figures: dict[str, str] = {}
    images: dict[str, set[str]] = {}
    for subset in REPLACE_SUBSETS:
        originals = json.loads((args.upstream_dir / "data" / f"vl_checklist_{subset}.json").read_text())
        positives = json.loads(
            (args.upstream_dir / "swapped_data" / f"vl_checklist_{subset}.json").read_text()
        )
        images[subset] = {str(row["image_id"]) for row in originals}
        hits = sum(
            _article_blind(p["true_caption"])
            in {_article_blind(c) for c in hard_positive_candidates(o["true_caption"], include_extra=False)}
            for o, p in zip(originals, positives)
        )
        figures[f"{subset}_rows"] = f"{len(originals):,}"
        figures[f"{subset}_images"] = f"{len(images[subset]):,}"
        figures[f"{subset}_rule_reproduced_percent"] = f"{100 * hits / len(originals):.1f}"
        if subset == "relations":
            figures["within_front_of_rows"] = (
                f"{sum('within front of' in p['true_caption'] for p in positives):,}"
            )
    a, b = images.values()
    figures["distinct_images"] = f"{len(a | b):,}"
    figures["shared_images"] = f"{len(a & b):,}"
    for name, text in figures.items():
        print(f"{name}={text}")
    record("replace_facts", figures)


if __name__ == "__main__":
    main()
