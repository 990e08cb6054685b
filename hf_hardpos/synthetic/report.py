"""Tables, seed aggregation, intervals and the chart of the embedded demo (paper Tables 1-3 in miniature).

Why separate from the run: the same numbers go to the terminal, to `results.md` and to the PNG, and
every table must say how it aggregates (micro vs macro left implicit is a known complaint, sugar-crepe issue #3),
so the wording lives in one place. Tables are drawn by the package's one renderer
(`hf_hardpos.tables.render_table`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from hf_hardpos.metrics import bootstrap_interval

from ..tables import TIE_RULE, render_table

CHART_NAME = "results.png"
# Paper-facing datasets first; the two REPLACE subsets are reported too (docs/reference.md, Scores and metrics), then the
# attribute subset split by the adjective its hard negative edits.
DATASETS = ("replace", "swap", "replace_attributes", "replace_relations")
EDITED_WORDS = ("colour", "size")
BY_EDITED_WORD = tuple(f"replace_attributes[{word}]" for word in EDITED_WORDS)
RATE_METRICS = ("orig_acc", "aug_acc", "brittleness")
SCORE_METRICS = ("mean_original_score", "mean_negative_score", "mean_positive_score")
# The evaluator's metric names -> the demo's short names.
RENAME = {
    "original_accuracy": "orig_acc",
    "augmented_accuracy": "aug_acc",
    **{name: name for name in ("brittleness", *SCORE_METRICS, "num_examples")},
}
_MAIN_ORDER = ("pretrained", "contrastive", "hn", "hp+hn")
AGGREGATION_NOTE = (
    "REPLACE = fraction over all rows of the attributes and relations subsets, each row once (the paper's "
    "pooled REPLACE column; the demo's subsets are equally large, so it equals their unweighted mean here)."
)
CHANCE_NOTE = "Chance: orig acc 50, aug acc 33.3, brittleness 33.3 (lower is better)."
SCORE_NOTE = "s = cosine similarity of the L2-normalised image and text embeddings (fp32, no logit scale)."

Runs = Mapping[int, Mapping[str, Mapping[str, float | int]]]  # seed -> dataset -> metric -> value


def rename_metrics(metrics: Mapping[str, float | int]) -> dict[str, float | int]:
    """The evaluator's metric dict under the demo's short names (orig_acc, aug_acc, ...)."""
    return {short: metrics[name] for name, short in RENAME.items()}


def mean_over_seeds(runs: Runs) -> dict[str, dict[str, float | int]]:
    """Per dataset: each metric's mean over seeds, `<metric>_std` (sample std, 0 for one seed), `num_seeds`."""
    seeds = list(runs)
    if not seeds:
        raise ValueError("no runs to aggregate")
    summary: dict[str, dict[str, float | int]] = {}
    for dataset in runs[seeds[0]]:
        entry: dict[str, float | int] = {}
        for metric in (*RATE_METRICS, *SCORE_METRICS):
            values = [float(runs[s][dataset][metric]) for s in seeds]
            entry[metric] = statistics.fmean(values)
            entry[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        entry["num_examples"] = int(runs[seeds[0]][dataset]["num_examples"])
        entry["num_seeds"] = len(seeds)
        summary[dataset] = entry
    return summary


def add_intervals(
    summary: dict[str, dict[str, float | int]],
    outcomes: Mapping[int, Mapping[str, Mapping[str, np.ndarray]]],
    groups: Mapping[str, np.ndarray],
    samples: int,
    confidence_level: float = 0.95,
) -> None:
    """Add `<rate>_ci_low/_ci_high` to `summary`: a bootstrap over images of the mean over seeds.

    Every seed is evaluated on the same rows, so the per-row outcome averaged over seeds has, as its
    mean over rows, the reported mean over seeds; resampling the images (`groups`, one id per row)
    gives the interval that the finite evaluation set leaves on that figure. The spread *between*
    seeds is the `_std` next to it. `outcomes[seed][dataset][rate]` are per-row 0/1 arrays.
    """
    seeds = list(outcomes)
    for dataset, entry in summary.items():
        if dataset not in groups:
            continue
        for rate in RATE_METRICS:
            per_row = np.mean(
                [np.asarray(outcomes[s][dataset][rate], dtype=np.float64) for s in seeds], axis=0
            )
            low, high = bootstrap_interval(per_row, samples, confidence_level, seed=0, groups=groups[dataset])
            entry[f"{rate}_ci_low"], entry[f"{rate}_ci_high"] = low, high


def interval_note(samples: int) -> str:
    return (
        f"[low, high] = 95% percentile bootstrap over images ({samples} resamples) of the mean over seeds; "
        "REPLACE's interval resamples the images of both subsets together (equal sizes)."
    )


def sweep_weight(variant: str) -> float | None:
    """The HN weight of a sweep entry `hn_weight=<w>`, else None."""
    prefix = "hn_weight="
    return float(variant[len(prefix) :]) if variant.startswith(prefix) else None


def ordered_variants(results: Mapping[str, object]) -> list[str]:
    """Main variants in the paper's order, then the sweep by increasing HN weight, then anything else."""
    main = [v for v in _MAIN_ORDER if v in results]
    sweep = sorted((v for v in results if sweep_weight(v) is not None), key=lambda v: sweep_weight(v))
    rest = [v for v in results if v not in main and v not in sweep]
    return main + sweep + rest


def _cell(entry: Mapping[str, float], metric: str, percent: bool) -> str:
    scale, digits = (100.0, 1) if percent else (1.0, 3)
    value = f"{scale * entry[metric]:.{digits}f}"
    if entry.get("num_seeds", 1) > 1:
        value += f" ± {scale * entry[f'{metric}_std']:.{digits}f}"
    if f"{metric}_ci_low" in entry:
        value += f" [{scale * entry[f'{metric}_ci_low']:.{digits}f}, {scale * entry[f'{metric}_ci_high']:.{digits}f}]"
    return value


# Short column names for the tables (results.json keeps the full dataset names).
_COLUMN_NAMES = {
    "replace": "REPLACE",
    "swap": "SWAP",
    "replace_attributes": "attributes",
    "replace_relations": "relations",
    **{f"replace_attributes[{word}]": f"edits {word}" for word in EDITED_WORDS},
}


def _table(results, variants, datasets, metrics, labels, percent, markdown) -> str:
    header = [
        "variant",
        *(f"{_COLUMN_NAMES.get(d, d)} {label}".rstrip() for d in datasets for label in labels),
    ]
    rows = [[v, *(_cell(results[v][d], m, percent) for d in datasets for m in metrics)] for v in variants]
    return render_table(header, rows, markdown=markdown)


def format_tables(
    results: Mapping[str, Mapping[str, Mapping[str, float]]],
    seeds: Sequence[int],
    eval_examples: int,
    markdown: bool = False,
    bootstrap_samples: int = 0,
) -> str:
    """Table 1 (REPLACE/SWAP rates), the REPLACE subsets, and Table 2 (mean scores), with their notes."""
    variants = ordered_variants(results)
    spread = (
        f"mean ± sample std over {len(seeds)} seeds {list(seeds)}" if len(seeds) > 1 else f"seed {seeds[0]}"
    )
    heading = (lambda t: f"### {t}") if markdown else (lambda t: f"== {t} ==")
    notes = [
        f"Fine-tuned variants: {spread}; 'pretrained' is the single starting model (trained once). "
        f"Each eval set has {eval_examples} rows (REPLACE: {eval_examples} per subset), the same rows for "
        f"every model. {CHANCE_NOTE} Comparisons are {TIE_RULE}.",
        AGGREGATION_NOTE,
    ]
    if bootstrap_samples:
        notes.append(interval_note(bootstrap_samples))
    parts = [
        heading("Synthetic world: accuracy and brittleness, percent (paper Table 1 / Table 3)"),
        *notes,
        "",
        _table(
            results, variants, ("replace", "swap"), RATE_METRICS, ("orig", "aug", "brittle"), True, markdown
        ),
    ]
    subsets = ("replace_attributes", "replace_relations")
    if all(d in results[v] for v in variants for d in subsets):
        parts += [
            "",
            heading("REPLACE subsets, percent"),
            _table(results, variants, subsets, RATE_METRICS, ("orig", "aug", "brittle"), True, markdown),
        ]
    if all(d in results[v] for v in variants for d in BY_EDITED_WORD):
        parts += [
            "",
            heading("REPLACE attributes by the adjective the hard negative edits: orig acc, percent"),
            "A replaced colour or size is absent from the image, or present on the other object (then only "
            "attribute binding tells the captions apart).",
            _table(results, variants, BY_EDITED_WORD, ("orig_acc",), ("",), True, markdown),
        ]
    parts += [
        "",
        heading("Mean scores s(c|i), s(c_n|i), s(c_p|i) (paper Table 2)"),
        SCORE_NOTE,
        _table(results, variants, ("replace", "swap"), SCORE_METRICS, ("s_c", "s_n", "s_p"), False, markdown),
    ]
    return "\n".join(parts)


def plot_results(
    results: Mapping[str, Mapping[str, Mapping[str, float]]], path: str | Path, seeds: Sequence[int]
) -> Path:
    """Bar charts of the main variants on REPLACE and SWAP, plus the HN-weight sweep when present.

    Needs matplotlib (a dependency); ImportError when an incomplete install lacks it, which the caller reports.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = [v for v in ordered_variants(results) if sweep_weight(v) is None]
    sweep = [v for v in ordered_variants(results) if sweep_weight(v) is not None]
    panels = 3 if sweep else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2))
    labels = {"orig_acc": "orig acc", "aug_acc": "aug acc", "brittleness": "brittleness"}
    width = 0.8 / len(RATE_METRICS)
    for ax, dataset in zip(axes, ("replace", "swap")):
        for k, metric in enumerate(RATE_METRICS):
            xs = [i + (k - 1) * width for i in range(len(variants))]
            ax.bar(
                xs,
                [100 * results[v][dataset][metric] for v in variants],
                width,
                yerr=[100 * results[v][dataset].get(f"{metric}_std", 0.0) for v in variants],
                capsize=2,
                label=labels[metric],
            )
        ax.set_xticks(range(len(variants)), variants)
        ax.set_ylim(0, 100)
        ax.set_title("REPLACE (subsets pooled)" if dataset == "replace" else "SWAP")
        ax.set_ylabel("percent (error bars: seed std)")
        ax.legend(fontsize=8)
    if sweep:
        ax = axes[2]
        weights = [sweep_weight(v) for v in sweep]
        for dataset, style in (("replace", "-"), ("swap", "--")):
            for metric in RATE_METRICS:
                ax.errorbar(
                    weights,
                    [100 * results[v][dataset][metric] for v in sweep],
                    yerr=[100 * results[v][dataset].get(f"{metric}_std", 0.0) for v in sweep],
                    linestyle=style,
                    marker="o",
                    capsize=2,
                    label=f"{dataset.upper()} {labels[metric]}",
                )
        ax.set_xlabel("hard-negative loss weight (hard-positive weight 1)")
        ax.set_ylim(0, 100)
        ax.set_title("HN-weight sweep (paper Table 3)")
        ax.legend(fontsize=7, loc="center")  # the band between the accuracy and brittleness curves
    fig.suptitle(f"Synthetic world, {len(seeds)} seed(s): tiny CLIP fine-tuned with/without hard positives")
    fig.tight_layout()
    path = Path(path)
    # Fixed metadata so the PNG bytes depend only on the figures (matplotlib stamps its version otherwise).
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
