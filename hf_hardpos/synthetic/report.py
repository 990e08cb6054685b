"""Tables, seed aggregation and the chart of the embedded demo (paper Tables 1-3 in miniature).

Why separate from the run: the same numbers go to the terminal, to `results.md` and to the PNG, and
every table must say how it aggregates (SPEC §9: micro vs macro left implicit is a known complaint),
so the wording lives in one place.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

CHART_NAME = "results.png"
# Paper-facing datasets first; the two REPLACE subsets are reported too (SPEC §2).
DATASETS = ("replace", "swap", "replace_attributes", "replace_relations")
RATE_METRICS = ("orig_acc", "aug_acc", "brittleness")
SCORE_METRICS = ("mean_original_score", "mean_negative_score", "mean_positive_score")
_RENAME = {
    "original_accuracy": "orig_acc",
    "augmented_accuracy": "aug_acc",
    "brittleness": "brittleness",
    "mean_original_score": "mean_original_score",
    "mean_negative_score": "mean_negative_score",
    "mean_positive_score": "mean_positive_score",
    "num_examples": "num_examples",
}
_MAIN_ORDER = ("pretrained", "contrastive", "hn", "hp+hn")
AGGREGATION_NOTE = (
    "REPLACE = unweighted mean of the attributes and relations subsets (the paper's REPLACE column, "
    "not the pooled fraction)."
)
CHANCE_NOTE = "Chance: orig acc 50, aug acc 33.3, brittleness 33.3 (lower is better)."


def rename_metrics(metrics: Mapping[str, float | int]) -> dict[str, float | int]:
    """The evaluator's metric dict under the demo's short names (orig_acc, aug_acc, ...)."""
    return {short: metrics[name] for name, short in _RENAME.items()}


def mean_over_seeds(runs: Mapping[int, Mapping[str, Mapping[str, float | int]]]) -> dict[str, dict[str, float | int]]:
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


def sweep_weight(variant: str) -> float | None:
    """The HN weight of a sweep entry `hn_weight=<w>`, else None."""
    prefix = "hn_weight="
    return float(variant[len(prefix):]) if variant.startswith(prefix) else None


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
    return value


def _render(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:  # variant names left-aligned, numbers right-aligned
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "-" * len(line(header)), *(line(r) for r in rows)])


def _table(results, variants, datasets, metrics, labels, percent, markdown) -> str:
    header = ["variant", *(f"{d} {label}" for d in datasets for label in labels)]
    rows = [[v, *(_cell(results[v][d], m, percent) for d in datasets for m in metrics)] for v in variants]
    return _render(header, rows, markdown)


def brittleness_comparison(
    per_seed: Mapping[str, Mapping[int, Mapping[str, Mapping[str, float]]]], dataset: str
) -> tuple[int, int] | None:
    """(seeds where `hn` is more brittle than `hp+hn` on `dataset`, seeds compared); None without both."""
    if "hn" not in per_seed or "hp+hn" not in per_seed:
        return None
    seeds = [s for s in per_seed["hn"] if s in per_seed["hp+hn"]]
    more = sum(per_seed["hn"][s][dataset]["brittleness"] > per_seed["hp+hn"][s][dataset]["brittleness"] for s in seeds)
    return more, len(seeds)


def format_tables(
    results: Mapping[str, Mapping[str, Mapping[str, float]]],
    per_seed: Mapping[str, Mapping[int, Mapping[str, Mapping[str, float]]]],
    seeds: Sequence[int],
    eval_examples: int,
    markdown: bool = False,
) -> str:
    """Table 1 (REPLACE/SWAP rates), the REPLACE subsets, and Table 2 (mean scores), with their notes."""
    variants = ordered_variants(results)
    spread = f"mean ± sample std over {len(seeds)} seeds {list(seeds)}" if len(seeds) > 1 else f"seed {seeds[0]}"
    heading = (lambda t: f"### {t}") if markdown else (lambda t: f"== {t} ==")
    parts = [
        heading("Synthetic world: accuracy and brittleness, percent (paper Table 1 / Table 3)"),
        f"Fine-tuned variants: {spread}; 'pretrained' is the single starting model. "
        f"Each eval set has {eval_examples} rows (REPLACE: {eval_examples} per subset). {CHANCE_NOTE}",
        AGGREGATION_NOTE,
        "",
        _table(results, variants, ("replace", "swap"), RATE_METRICS, ("orig", "aug", "brittle"), True, markdown),
    ]
    subsets = ("replace_attributes", "replace_relations")
    if all(d in results[v] for v in variants for d in subsets):
        parts += [
            "",
            heading("REPLACE subsets, percent"),
            _table(results, variants, subsets, RATE_METRICS, ("orig", "aug", "brittle"), True, markdown),
        ]
    parts += [
        "",
        heading("Mean cosine scores s(c|i), s(c_n|i), s(c_p|i) (paper Table 2)"),
        _table(results, variants, ("replace", "swap"), SCORE_METRICS, ("s_c", "s_n", "s_p"), False, markdown),
    ]
    comparisons = []
    for dataset in ("replace", "swap"):
        counted = brittleness_comparison(per_seed, dataset)
        if counted is not None:
            comparisons.append(f"{dataset.upper()} {counted[0]}/{counted[1]}")
    if comparisons:
        parts += ["", "Seeds in which HN-only is more brittle than HP+HN: " + ", ".join(comparisons) + "."]
    return "\n".join(parts)


def plot_results(
    results: Mapping[str, Mapping[str, Mapping[str, float]]], path: str | Path, seeds: Sequence[int]
) -> Path:
    """Bar charts of the main variants on REPLACE and SWAP, plus the HN-weight sweep when present."""
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
        ax.set_title("REPLACE (mean of subsets)" if dataset == "replace" else "SWAP")
        ax.set_ylabel("percent")
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
        ax.legend(fontsize=7)
    fig.suptitle(f"Synthetic world, {len(seeds)} seed(s): tiny CLIP fine-tuned with/without hard positives")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
