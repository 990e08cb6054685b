"""The paper's controlled comparisons on the demo's runs, each with a paired test and the seed spread.

Why these two and no other: Kamath et al. (ECCV 2024) Table 1 (c) compares "Our HN" with "Our HP+HN",
two fine-tunes that differ only in the hard-positive term; hard negatives' own effect is "HN" against
plain contrastive fine-tuning on the same captions. Comparing a fine-tuned model with the pretrained
one would credit everything fine-tuning does (new captions, new data) to the loss term under study, so
the demo never reports that difference.

Two measures of each difference `B - A` (percentage points, on the same evaluation rows):
- the **seed spread**: the difference of the means over seeds against twice the larger of the two
  sample standard deviations over seeds (is it larger than what re-running the fine-tuning moves?);
- a **paired bootstrap over images** of the per-row outcome averaged over seeds (an image drawn
  brings all its rows; `reporting.paired.paired_difference`): the uncertainty the finite evaluation
  set leaves on that difference.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hf_hardpos.reporting.paired import DEFAULT_RESAMPLES, paired_difference

# (A, B, what B adds to A): paper Table 1 (c) and the hard-negative effect it builds on.
COMPARISONS = (
    (
        "hn",
        "hp+hn",
        "hard positives added to hard-negative fine-tuning (paper Table 1 (c): Our HN vs Our HP+HN)",
    ),
    ("contrastive", "hn", "hard negatives added to contrastive fine-tuning"),
)
COMPARED_DATASETS = ("replace", "swap")
COMPARED_RATES = ("orig_acc", "aug_acc", "brittleness")
SCORES = ("mean_original_score", "mean_negative_score", "mean_positive_score")
METHOD = (
    "difference of the means over seeds (B - A, points); 'seed std' = the larger sample std over seeds of A and B; "
    "clear = |difference| > 2 x seed std; [low, high] = 95% paired percentile bootstrap over images "
    f"({DEFAULT_RESAMPLES} resamples, seed 0) of the per-row outcome averaged over seeds"
)

Outcomes = Mapping[int, Mapping[str, Mapping[str, np.ndarray]]]  # seed -> dataset -> rate -> per-row 0/1


def compare(
    results: Mapping[str, Mapping[str, Mapping[str, float]]],
    outcomes: Mapping[str, Outcomes],
    groups: Mapping[str, np.ndarray],
) -> list[dict]:
    """Every comparison of `COMPARISONS` whose two variants ran: one record per (dataset, rate).

    Each record: a, b, dataset, metric, a_mean, b_mean, difference, a_std, b_std, twice_larger_std,
    clear (|difference| > twice_larger_std), ci_low, ci_high (fractions, like results.json).
    """
    records = []
    for a, b, _ in COMPARISONS:
        if a not in results or b not in results:
            continue
        for dataset in COMPARED_DATASETS:
            for rate in COMPARED_RATES:
                entry_a, entry_b = results[a][dataset], results[b][dataset]
                difference = float(entry_b[rate] - entry_a[rate])
                twice = 2.0 * max(float(entry_a[f"{rate}_std"]), float(entry_b[f"{rate}_std"]))
                paired = paired_difference(
                    _seed_mean(outcomes[a], dataset, rate),
                    _seed_mean(outcomes[b], dataset, rate),
                    groups[dataset],
                    accuracy=False,
                )
                records.append({
                    "a": a, "b": b, "dataset": dataset, "metric": rate,
                    "a_mean": float(entry_a[rate]), "b_mean": float(entry_b[rate]), "difference": difference,
                    "a_std": float(entry_a[f"{rate}_std"]), "b_std": float(entry_b[f"{rate}_std"]),
                    "twice_larger_std": twice, "clear": abs(difference) > twice,
                    "ci_low": paired.ci_low, "ci_high": paired.ci_high,
                })  # fmt: skip
    return records


def _seed_mean(runs: Outcomes, dataset: str, rate: str) -> np.ndarray:
    return np.mean([np.asarray(runs[seed][dataset][rate], dtype=np.float64) for seed in runs], axis=0)


_RATE_NAMES = {"orig_acc": "orig acc", "aug_acc": "aug acc", "brittleness": "brittleness"}


def format_comparisons(
    records: list[dict], results: Mapping[str, Mapping[str, Mapping[str, float]]]
) -> list[str]:
    """Lines for the terminal and results.md: one per record, then the mean-score pattern of paper Table 2."""
    lines = [f"Controlled comparisons ({METHOD}):"]
    titles = {(a, b): title for a, b, title in COMPARISONS}
    current = None
    for r in records:
        if (r["a"], r["b"]) != current:
            current = (r["a"], r["b"])
            lines.append(f"{r['b']} - {r['a']}: {titles[current]}")
        verdict = "clear" if r["clear"] else "NOT clear"
        lines.append(
            f"  {r['dataset'].upper():<7} {_RATE_NAMES[r['metric']]:<11} {100 * r['a_mean']:5.1f} -> {100 * r['b_mean']:5.1f}  "
            f"{100 * r['difference']:+5.1f} [{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}]  "
            f"seed std {100 * max(r['a_std'], r['b_std']):.1f}: {verdict}"
        )
    if "contrastive" in results and "hn" in results:
        lines.append(
            "Mean scores s_c / s_n / s_p (paper Table 2: does hard-negative training lower s_p along with s_n?):"
        )
        for dataset in COMPARED_DATASETS:
            cells = [
                f"{variant} " + " / ".join(f"{results[variant][dataset][score]:.3f}" for score in SCORES)
                for variant in ("contrastive", "hn", "hp+hn")
                if variant in results
            ]
            lines.append(f"  {dataset.upper():<7} " + ";  ".join(cells))
    return lines
