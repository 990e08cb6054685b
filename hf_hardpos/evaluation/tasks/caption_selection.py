"""Image-caption selection: which of k captions fits the image (SugarCrepe, ARO and the registered benchmarks).

Why one task: SugarCrepe (c vs c_n), ARO's VG-Relation / VG-Attribution (true vs false caption)
and COCO/Flickr30k-Order (one true caption among 5) are the same task with a different number of
candidates, and the compositionality papers (CE-CLIP, Kamath et al.) report them side by side. Each
benchmark declares a profile (`caption_profile.CaptionSelectionProfile`: how it is recognised, how it
aggregates, its paper's columns): a benchmark with a folder of its own registers it
(`benchmark_registry`; those recognised by their own columns aggregate as their seeds do), and SugarCrepe
adds its category means (`sugarcrepe`) and ARO its macro accuracies and Order tie rule (`aro`) to the
shared aggregation below; `profiles()` lists them all. The scores and the strict rule are `selection`'s.

Tie rule: a row is correct only when the true caption scores strictly higher than every other
candidate, as SugarCrepe's `>`. ARO takes `np.argmax`, which returns the first maximum, so a tie
is wrong on VG-Relation / VG-Attribution (the true caption is listed second: the strict rule is
ARO's) but right on COCO/Flickr-Order (listed first): there `accuracy` follows ARO's code, to
compare with the paper, and `accuracy_strict` stands beside it (`true_caption_first`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from datasets import Dataset

from ... import columns
from ...benchmark_registry import BENCHMARKS, load
from ...scoring import ITMScorer
from ..section import Section
from . import aro, sugarcrepe
from .base import CARD_TASK_ID, Task, TaskData
from .caption_profile import CaptionSelectionProfile
from .selection import (
    NEGATIVES_LIST_COLUMN,
    SELECTION_TIE_RULE,
    MacroProtocol,
    macro_accuracy,
    selection_correct,
    selection_scores,
)

__all__ = [
    "CAPTION_SELECTION",
    "TASK",
    "evaluate_caption_selection",
    "mean_of_subsets",
    "profiles",
    "published_key",
    "score_caption_selection",
]

CAPTION_SELECTION = "caption_selection"

# The profiles of the caption-selection benchmarks that have no folder of their own yet.
BUILT_IN_PROFILES: tuple[CaptionSelectionProfile, ...] = (sugarcrepe.PROFILE, aro.PROFILE)


def profiles() -> tuple[CaptionSelectionProfile, ...]:
    """The caption-selection benchmarks, in the order they are tried: the registered ones (in the order
    their folders register), then the built-in ones. One with its own `evaluate` that recognises a
    dataset scores it alone; the others' options to `evaluate_caption_selection` are merged."""
    registered = (
        load(b.profile) for b in BENCHMARKS.values() if b.task == CAPTION_SELECTION and b.profile is not None
    )
    return (*registered, *BUILT_IN_PROFILES)


def mean_of_subsets(accuracies: Mapping[str, float], members: Sequence[str]) -> float:
    """The unweighted mean of the listed subsets' accuracies: SugarCrepe's category means (Hsieh et al.
    2023; CE-CLIP Table 3's group Avg) and CE-CLIP Table 5's SugarCrepe column (all 7 subsets)."""
    return float(np.mean([accuracies[m] for m in members]))


def evaluate_caption_selection(
    scorer: ITMScorer,
    subsets: Mapping[str, Dataset] | Dataset,
    *,
    caption_column: str = columns.CAPTION,
    negative_columns: Sequence[str] | None = None,
    image_column: str = columns.IMAGE,
    categories: Mapping[str, Sequence[str]] | None = None,
    macro: Mapping[str, MacroProtocol] | None = None,
    true_caption_first: Sequence[str] = (),
    max_rows: int | None = None,
) -> dict:
    """Accuracy of picking the true caption among each row's candidates, per subset and aggregated.

    `subsets` maps a subset name (a dataset config such as `replace_att`) to its rows; a single
    `Dataset` is evaluated as `default`. `categories` adds named unweighted means over subsets (e.g.
    `sugarcrepe.SUGARCREPE_CATEGORIES`). `macro` maps a subset name to a `MacroProtocol`; a subset that has the
    protocol's column also gets `macro_accuracy` (ARO reports VG-Relation / VG-Attribution this way:
    pass `aro.ARO_MACRO`). `true_caption_first` names subsets whose benchmark code takes `np.argmax`
    over a candidate list with the true caption first (ARO's COCO/Flickr30k-Order,
    `aro.ARO_TRUE_CAPTION_FIRST`): there `accuracy` follows that code (a tie is right, so the figure
    compares with the paper's) and `accuracy_strict` (a tie is wrong) stands beside it.

    Returns {"task", "results": {subset: {accuracy, num_examples, num_candidates[, macro_accuracy,
    num_groups, macro_protocol]}}, "aggregates": {"mean(a,b,...)": ..., "pooled(a,b,...)": ..., category means},
    "tie_rule", "aggregation"}.
    """
    if isinstance(subsets, Dataset):
        subsets = {"default": subsets}
    results: dict[str, dict] = {}
    outcomes: dict[str, np.ndarray] = {}
    for name, dataset in subsets.items():
        if max_rows is not None:
            dataset = dataset.select(range(min(max_rows, len(dataset))))
        scores = selection_scores(
            scorer, dataset, caption_column, negative_columns, image_column, f"subset {name!r}"
        )
        results[name], outcomes[name] = _subset_result(
            scores, dataset, name in true_caption_first, (macro or {}).get(name)
        )
    aggregates = _aggregates(results, outcomes, categories or {})
    aggregation = (
        "accuracy per subset = fraction of its rows; mean(...) = unweighted mean of subset accuracies; "
        "pooled(...) = fraction over all rows of the subsets"
    )
    if any("macro_accuracy" in r for r in results.values()):
        aggregation += "; macro_accuracy: see each subset's macro_protocol"
    tie_rule = SELECTION_TIE_RULE
    argmax_subsets = [n for n in results if n in true_caption_first]
    if argmax_subsets:
        tie_rule += (
            f"; except `accuracy` of {', '.join(argmax_subsets)}: the benchmark code's np.argmax over candidates "
            "listed true caption first, so a tie is right (comparable with the paper); `accuracy_strict` beside it"
        )
    return {
        "task": CAPTION_SELECTION,
        "results": results,
        "aggregates": aggregates,
        "tie_rule": tie_rule,
        "aggregation": aggregation,
    }


def _subset_result(scores: np.ndarray, dataset: Dataset, ties_count: bool, protocol: MacroProtocol | None):
    """One subset's accuracy (and its strict and macro variants) from its candidates' scores, and its outcomes."""
    correct = selection_correct(scores, ties_count_as_correct=ties_count)
    counts = (~np.isnan(scores)).sum(axis=1)
    result = {
        "accuracy": float(correct.mean()),
        "num_examples": int(correct.size),
        "num_candidates": int(counts.max())
        if counts.min() == counts.max()
        else f"{counts.min()}-{counts.max()}",
    }
    if ties_count:
        result["accuracy_strict"] = float(selection_correct(scores).mean())
    if protocol is not None and protocol.column in dataset.column_names:
        result.update(macro_accuracy(correct, list(dataset[protocol.column]), protocol))
    return result, correct


def _aggregates(
    results: Mapping[str, dict], outcomes: Mapping[str, np.ndarray], categories: Mapping[str, Sequence[str]]
) -> dict[str, dict]:
    """The subsets' unweighted mean and pooled accuracy (when several), and each category's mean."""
    aggregates: dict[str, dict] = {}
    names = list(results)
    accuracies = {n: r["accuracy"] for n, r in results.items()}
    if len(names) > 1:
        aggregates[f"mean({','.join(names)})"] = {
            "accuracy": mean_of_subsets(accuracies, names),
            "num_examples": int(sum(results[n]["num_examples"] for n in names)),
        }
        pooled = np.concatenate([outcomes[n] for n in names])
        aggregates[f"pooled({','.join(names)})"] = {
            "accuracy": float(pooled.mean()),
            "num_examples": int(pooled.size),
        }
    for category, members in categories.items():
        present = [m for m in members if m in results]
        if present:
            aggregates[f"{category}=mean({','.join(present)})"] = {
                "accuracy": mean_of_subsets(accuracies, present),
                "num_examples": int(sum(results[m]["num_examples"] for m in present)),
            }
    return aggregates


def score_caption_selection(scorer: ITMScorer, data: TaskData, max_rows: int | None = None) -> Section:
    """Every subset of a caption-selection dataset, aggregated as its benchmark's profile says (`profiles()`):
    a benchmark with its own `evaluate` by its seed's rules, SugarCrepe with its categories, ARO with its
    macro accuracies; a dataset no profile recognises gets the shared aggregation alone."""
    subsets = data.subsets()
    matching = [profile for profile in profiles() if profile.recognises(subsets)]
    own = next((profile for profile in matching if profile.evaluate is not None), None)
    if own is not None:
        result = own.evaluate(scorer, subsets, max_rows)
    else:
        options: dict = {}
        for profile in matching:
            options.update(profile.selection_options(subsets))
        result = evaluate_caption_selection(scorer, subsets, max_rows=max_rows, **options)
    return Section(
        CAPTION_SELECTION,
        data.describe(),
        result["results"],
        result.get("aggregates", {}),
        result["tie_rule"],
        result["aggregation"],
    )


def _is_selection_table(names: frozenset[str]) -> bool:
    negatives = {columns.HARD_NEGATIVE, NEGATIVES_LIST_COLUMN}
    return {columns.IMAGE, columns.CAPTION} <= names and bool(
        names & negatives or any(re.match(rf"^{columns.HARD_NEGATIVE}_\d+$", n) for n in names)
    )


def published_key(row: str, metrics: Mapping[str, Any]) -> str | None:
    """``<benchmark>/<column>`` of the published figure a row of our caption-selection results stands
    beside (e.g. ``sugarcrepe/add``, ``aro/vg_relation``), from the profiles; None for any other row."""
    return next(
        (key for profile in profiles() if (key := profile.published_key(row, metrics)) is not None), None
    )


TASK = Task(
    CAPTION_SELECTION,
    score_caption_selection,
    matches_columns=_is_selection_table,
    published_benchmark=lambda dataset, row, metrics: published_key(row, metrics),
    recognition_order=2,
    card_task=(CARD_TASK_ID, "Image-caption selection among hard negatives"),
    card_metrics=("accuracy", "macro_accuracy"),
)
