"""The per-row scores of a hard-positive benchmark as `hardpos report` shows them: each config's saved
scores, the dataset rows they score when those can still be proven the same, and 95% intervals for the
page's tables (as saved, else bootstrapped from the saved per-row outcomes).

Nothing is re-scored: scores come from `scores-<config>.parquet`; the evaluated data is located by the
identity `metrics.json` recorded and used only if its content digest still matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UserInputError
from ..evaluation.aggregation import pooled_from_scores
from .benchmark import Benchmark


@dataclass
class ScoredRows:
    """One config's per-row scores (from its parquet) and, when still readable, the dataset rows they score."""

    config: str
    scores: dict[str, np.ndarray]
    dataset: Any | None  # datasets.Dataset, first `len(scores)` rows of the evaluated split
    data_note: str  # why the dataset rows are missing ("" when present)


def load_dataset_rows(bench: Benchmark, config: str, num_rows: int, fetch: bool = False):
    """The evaluated rows of `config` (the first `num_rows`, as `--max-rows` takes them), or (None, why).

    A local folder is re-read by content and used only if its sha256 equals the one `metrics.json`
    recorded; a Hub dataset only at the recorded revision, and only with `fetch` (`hardpos report
    --fetch-data`): a run folder is anyone's, and opening it must not download whatever it names.
    """
    from ..evaluation.eval_data import load_local_split

    prov = bench.provenance.get(config, {})
    ident = prov.get("dataset", {})
    split = ident.get("split") or prov.get("split") or "test"
    unreadable = f"[{config}]: evaluated data not readable here ({{}}); captions not shown"
    if ident.get("path") and ident.get("sha256"):
        try:
            dataset, now = load_local_split(ident["path"], ident.get("config", config), split)
        except (UserInputError, OSError, ValueError) as err:
            return None, unreadable.format(str(err).splitlines()[0])
        if now["sha256"] != ident["sha256"]:
            return (
                None,
                f"{ident['path']} [{config}] changed since the run (sha256 differs); captions not shown",
            )
    elif ident.get("hub_id") and ident.get("revision") and not fetch:
        return (
            None,
            f"[{config}]: captions not shown; --fetch-data downloads {ident['hub_id']} at the run's revision",
        )
    elif ident.get("hub_id") and ident.get("revision"):
        from datasets import load_dataset

        try:
            dataset = load_dataset(ident["hub_id"], config, split=split, revision=ident["revision"])
        except Exception as err:  # noqa: BLE001 - offline, gated, deleted: the page goes on without captions
            return None, unreadable.format(str(err).splitlines()[0] if str(err) else type(err).__name__)
    else:
        return None, f"[{config}]: the run recorded no readable data identity; captions not shown"
    if len(dataset) < num_rows:
        return (
            None,
            f"[{config}]: the data has {len(dataset)} rows, the run scored {num_rows}; captions not shown",
        )
    return dataset.select(range(num_rows)), ""


def with_intervals(
    bench: Benchmark, scored: Mapping[str, ScoredRows], resamples: int
) -> tuple[dict[str, dict], list[str]]:
    """The table rows (configs, then aggregates) with 95% intervals: as saved, else bootstrapped here from the
    saved per-row outcomes over images (point values always exactly as saved)."""
    from ..evaluation.tasks.hard_positive import bootstrap_description
    from ..metrics import metrics_from_scores

    rows = {name: dict(m) for name, m in {**bench.results, **bench.aggregates}.items()}
    notes = []
    for config, r in scored.items():
        m = rows[config]
        if "brittleness_ci_low" in m:
            continue
        s = r.scores
        groups = s.get("image_id")
        computed = metrics_from_scores(
            s["original_score"], s["negative_score"], s["positive_score"], resamples, groups=groups
        )
        m.update({k: v for k, v in computed.items() if "_ci_" in k})
        notes.append(
            f"[{config}] intervals computed for this page: {bootstrap_description(resamples, groups is not None)}"
        )
    for name, m in rows.items():
        agg = m.get("aggregation")
        if not isinstance(agg, dict) or not agg.get("paper_column") or "brittleness_ci_low" in m:
            continue
        if all(c in scored for c in agg["configs"]):
            per_config = {
                c: {
                    "original": scored[c].scores["original_score"],
                    "negative": scored[c].scores["negative_score"],
                    "positive": scored[c].scores["positive_score"],
                    **({"image_id": scored[c].scores["image_id"]} if "image_id" in scored[c].scores else {}),
                }
                for c in agg["configs"]
            }
            computed, how = pooled_from_scores(per_config, agg["configs"], resamples)
            m.update({k: v for k, v in computed.items() if "_ci_" in k})
            notes.append(f"[{name}] intervals computed for this page: {how}")
    return rows, notes


def load_scored(bench: Benchmark, fetch: bool) -> tuple[dict[str, ScoredRows], list[str]]:
    scored, notes = {}, []
    for config in bench.results:
        if bench.scores_file(config) is None:
            continue
        scores = bench.read_scores(config)
        dataset, why = load_dataset_rows(bench, config, len(scores["original_score"]), fetch)
        scored[config] = ScoredRows(config, scores, dataset, why)
        if why:
            notes.append(why)
    return scored, notes
