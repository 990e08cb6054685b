"""The demo's evaluation sets and how a model is measured on them, with the package's own scorer and metrics.

Why a module of its own: the experiment (`demo`) evaluates every model it trains on the same fixed sets,
and the tests re-score saved models with exactly the same function; neither needs the rest of the run.
The sets are drawn once with `EVAL_SEED`, whatever the training seeds are, so variants and seeds are
compared on the same rows.
"""

from __future__ import annotations

import numpy as np

from hf_hardpos.synthetic import report

# The evaluation sets are drawn once with this seed, whatever the training seeds are.
EVAL_SEED = 1000


def make_eval_sets(examples: int, image_size: int = 32) -> dict:
    """The fixed synthetic REPLACE (two subsets) and SWAP sets every model is evaluated on."""
    from hf_hardpos.synthetic import world

    return {
        "replace_attributes": world.make_replace_dataset(
            examples, EVAL_SEED, "attributes", image_size=image_size
        ),
        "replace_relations": world.make_replace_dataset(
            examples, EVAL_SEED, "relations", image_size=image_size
        ),
        "swap": world.make_swap_dataset(examples, EVAL_SEED, image_size=image_size),
    }


def evaluate_on_world(
    model, processor, eval_sets: dict
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, np.ndarray]]]:
    """Metrics on each eval set, the paper's REPLACE column and the attribute rows split by edited word.

    Returns (metrics by dataset under the demo's short names, per-row 0/1 outcomes by dataset) — the
    latter for bootstrap intervals over images. Scores come from the package's `ITMScorer` (fp32
    cosine similarity), metrics from `hf_hardpos.metrics` with its strict tie rule.
    """
    from hf_hardpos.evaluation.aggregation import REPLACE_POOLED, replace_aggregates
    from hf_hardpos.evaluation.tasks.hard_positive import score_eval_set
    from hf_hardpos.metrics import (
        augmented_correct,
        brittle,
        metrics_from_scores,
        original_correct,
    )
    from hf_hardpos.scoring import ITMScorer

    model.eval()
    scorer = ITMScorer(model, processor, batch_size=256, progress=False)
    scores = {name: score_eval_set(scorer, dataset) for name, dataset in eval_sets.items()}
    words = edited_words(eval_sets["replace_attributes"])
    for word in report.EDITED_WORDS:
        keep = words == word
        scores[f"replace_attributes[{word}]"] = {
            k: scores["replace_attributes"][k][keep] for k in ("original", "negative", "positive")
        }
    raw = {
        name: metrics_from_scores(s["original"], s["negative"], s["positive"]) for name, s in scores.items()
    }
    subsets = {"attributes": "replace_attributes", "relations": "replace_relations"}
    raw["replace"] = replace_aggregates(
        {subset: raw[name] for subset, name in subsets.items()},
        {subset: scores[name] for subset, name in subsets.items()},
    )[REPLACE_POOLED]
    metrics = {name: report.rename_metrics(raw[name]) for name in (*report.DATASETS, *report.BY_EDITED_WORD)}
    rows: dict[str, dict[str, np.ndarray]] = {}
    for name in eval_sets:
        s = scores[name]
        rows[name] = {
            "orig_acc": original_correct(s["original"], s["negative"]),
            "aug_acc": augmented_correct(s["original"], s["negative"], s["positive"]),
            "brittleness": brittle(s["original"], s["negative"], s["positive"]),
        }
    rows["replace"] = {
        rate: np.concatenate([rows["replace_attributes"][rate], rows["replace_relations"][rate]])
        for rate in report.RATE_METRICS
    }
    return metrics, rows


def edited_words(dataset) -> np.ndarray:
    """Per row of a REPLACE-attributes set: which slot ("shape", "colour", "size") its hard negative edits."""
    from hf_hardpos import columns
    from hf_hardpos.synthetic import captions as cap

    names = []
    for caption, negative in zip(dataset[columns.CAPTION], dataset[columns.HARD_NEGATIVE]):
        (slot,) = cap.changed_slots(cap.parse_caption(caption), cap.parse_caption(negative))
        names.append(slot.name)
    return np.asarray(names)


def image_groups(eval_sets: dict) -> dict[str, np.ndarray]:
    from hf_hardpos import columns

    groups = {name: np.asarray(dataset[columns.IMAGE_ID]) for name, dataset in eval_sets.items()}
    groups["replace"] = np.concatenate([groups["replace_attributes"], groups["replace_relations"]])
    return groups


def headline(metrics: dict[str, dict[str, float]]) -> str:
    return "  ".join(
        f"{name.upper()} orig {100 * metrics[name]['orig_acc']:.1f} aug {100 * metrics[name]['aug_acc']:.1f} "
        f"brittle {100 * metrics[name]['brittleness']:.1f}"
        for name in ("replace", "swap")
    )
