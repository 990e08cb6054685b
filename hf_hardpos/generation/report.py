"""Quality report of a generated JSONL: per kind, how many captions got a candidate, why the rest
were rejected, and a random sample to read.

Why: coverage alone hides what a generator does wrong (a masked LM that fills "man" with "person"
is refused as a synonym; a caption without an adjective has no attribute negative). Reading the
reasons and a sample lets a user judge the output before training on it. The report is computed
from the output file, so it covers every record of a resumed or merged run, not just this call.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path

from ..tables import render_table
from . import validation


def load_records(path: str | Path) -> list[dict]:
    """Every complete record of a generation JSONL (a truncated last line is ignored)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()]


def quality_summary(path: str | Path, *, samples: int = 5, seed: int = 0) -> dict[str, dict]:
    """Per kind (sorted): `captions` (rows), `valid`, `rejected` ({reason: count}, most frequent
    first), `sample`, `samples` random valid records in file order, drawn with
    `random.Random(seed)` so the report is reproducible, and for LLM hard positives `acceptance`
    (`acceptance_shares`: answers generated, and kept by each acceptance)."""
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for record in load_records(path):
        by_kind[str(record.get("kind"))].append(record)
    summary = {}
    rng = random.Random(seed)
    for kind, records in sorted(by_kind.items()):
        valid = [r for r in records if r["valid"]]
        rejected = Counter(r["reason"] for r in records if not r["valid"])
        picked = sorted(rng.sample(range(len(valid)), min(samples, len(valid))))
        summary[kind] = {
            "captions": len(records),
            "valid": len(valid),
            "rejected": dict(rejected.most_common()),
            "sample": [valid[i] for i in picked],
        }
        if records[0].get("method") == "llm" and kind in validation.VALIDATION_KIND:
            summary[kind]["acceptance"] = acceptance_shares(records)
    return summary


def acceptance_shares(records: list[dict]) -> dict[str, int]:
    """How many of an LLM hard-positive kind's generated records each acceptance keeps (`validation.ACCEPTANCES`).

    Recomputed from each record's `input` and cleaned `output` (the verdict is a function of the two),
    whatever acceptance the file was written with; "strict" also refuses a record whose answer was cut
    at max_new_tokens (`truncated`, written by the LLM generator). Rows the model never saw (no "and",
    empty input) are kept by none.
    """
    generated = [r for r in records if r.get("raw") is not None and r.get("output") is not None]
    kept = {}
    for acceptance in validation.ACCEPTANCES:
        kept[acceptance] = sum(
            validation.validate(r["kind"], r["input"], r["output"], acceptance) is None
            and not (acceptance == "strict" and r.get("truncated") and "\n" not in r["raw"].strip())
            for r in generated
        )
    return {"generated": len(generated), **kept}


def _acceptance_lines(entry: dict) -> list[str]:
    if "acceptance" not in entry:
        return []
    shares = dict(entry["acceptance"])
    generated = shares.pop("generated")
    lines = [f"  kept by each acceptance (of the {generated} answers generated; {entry['captions']} rows):"]
    for acceptance, kept in shares.items():
        share = f"{100 * kept / generated:5.1f}%" if generated else "    -"
        lines.append(f"    {acceptance:<8} {kept:>7}  {share}")
    return lines


def quality_report(path: str | Path, *, samples: int = 5, seed: int = 0) -> str:
    """Text of `quality_summary`: a counts table per kind, the rejection reasons per kind (count and
    share of the kind's rows), for LLM hard positives the share each acceptance keeps
    (`acceptance_shares`), and the random sample of valid records per kind."""
    rows, sections = [], []
    for kind, entry in quality_summary(path, samples=samples, seed=seed).items():
        captions, valid, rejected = entry["captions"], entry["valid"], entry["rejected"]
        share = f"{100 * valid / captions:.1f}" if captions else ""
        rows.append([kind, str(captions), str(valid), share, str(sum(rejected.values()))])
        lines = [f"{kind}: rejected {sum(rejected.values())} of {captions} rows"]
        lines += [
            f"  {count:>7}  {100 * count / captions:5.1f}%  {reason}" for reason, count in rejected.items()
        ]
        lines += _acceptance_lines(entry)
        lines.append(f"  random sample ({len(entry['sample'])} of {valid} valid, seed {seed}):")
        lines += [f"    [{r['index']}] {r['input']}  ->  {r['output']}" for r in entry["sample"]]
        sections.append("\n".join(lines))
    table = render_table(["kind", "captions", "with candidate", "%", "rejected"], rows)
    how = (
        f"Counts from {path}: one record per caption and kind; 'with candidate' = records marked valid; "
        "% = with candidate / captions (all input rows, empty ones included). Per kind below: the rows "
        "rejected for each reason, as a count and as a share of that kind's rows."
    )
    return "\n\n".join([table, how, *sections])
