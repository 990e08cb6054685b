"""The report's charts, drawn with matplotlib and returned as `data:image/png;base64,...` URIs.

Embedding keeps the page one file that opens offline and never requests anything. matplotlib (a dependency) is
imported here only; `require_matplotlib` turns its absence (an incomplete install) into one clear error
before any work.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import UserInputError
from ..metrics import METRIC_NAMES
from ..text_escaping import mathtext_literal

LABELS = {"original_accuracy": "orig acc", "augmented_accuracy": "aug acc", "brittleness": "brittleness"}
CHANCE = {"original_accuracy": 0.5, "augmented_accuracy": 1 / 3, "brittleness": 1 / 3}
# Trainer log keys that are bookkeeping, not a loss term or an eval metric.
# Logged metrics that are fractions of rows (drawn in percent on one scale), longest suffix first.
RATE_SUFFIXES = ("original_accuracy", "augmented_accuracy", "brittleness", "text_only_accuracy", "accuracy")
_NOT_CURVES = ("runtime", "samples_per_second", "steps_per_second", "epoch", "total_flos", "num_examples")


def require_matplotlib():
    """matplotlib with a file-only backend, or a one-line error naming the install command."""
    try:
        import matplotlib
    except ImportError as err:
        raise UserInputError(
            "hardpos report draws its charts with matplotlib: pip install matplotlib"
        ) from err
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _uri(fig) -> str:
    plt = require_matplotlib()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def rate_bars(
    rows: Mapping[str, Mapping[str, float]], title: str = "Rates with 95% intervals (dashed: chance)"
) -> str:
    """One group of bars per rate, one bar per row (config, aggregate or run), 95% interval whiskers where known.

    Rows without an interval get no whisker (never a made-up one); chance is a dashed line per rate. The
    scale is 0-100 % on every chart of the page, so two charts compare by eye.
    """
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    names = list(rows)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        m = rows[name]
        x = np.arange(len(METRIC_NAMES)) + (i - (len(names) - 1) / 2) * width
        values = np.array([100 * m.get(k, np.nan) for k in METRIC_NAMES])
        yerr = None
        if all(f"{k}_ci_low" in m for k in METRIC_NAMES):
            low = np.array([100 * m[f"{k}_ci_low"] for k in METRIC_NAMES])
            high = np.array([100 * m[f"{k}_ci_high"] for k in METRIC_NAMES])
            yerr = np.vstack([values - low, high - values])
        label = (
            f"{mathtext_literal(name)} ({m.get('num_examples', '?')} rows"
            + ("" if yerr is not None else "; no interval")
            + ")"
        )
        ax.bar(x, values, width, label=label, yerr=yerr, capsize=3)
    for j, k in enumerate(METRIC_NAMES):
        ax.hlines(100 * CHANCE[k], j - 0.45, j + 0.45, colors="grey", linestyles="dashed", linewidth=1)
    ax.set_xticks(np.arange(len(METRIC_NAMES)), [LABELS[k] for k in METRIC_NAMES])
    ax.set_xlabel("rate (brittleness: lower is better)")
    ax.set_ylabel("% of rows")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(mathtext_literal(title), fontsize=10)
    return _uri(fig)


def score_distributions(original: np.ndarray, negative: np.ndarray, positive: np.ndarray, title: str) -> str:
    """Histograms of s_c, s_n, s_p, and of the margins s_c - s_n and s_p - s_n (right of 0 = caption wins)."""
    plt = require_matplotlib()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.0))
    bins = np.histogram_bin_edges(np.concatenate([original, negative, positive]), bins=30)
    for values, name in (
        (original, "s_c (original)"),
        (negative, "s_n (hard negative)"),
        (positive, "s_p (hard positive)"),
    ):
        left.hist(values, bins=bins, histtype="step", linewidth=1.5, label=name)
    left.set_xlabel("cosine similarity")
    left.set_ylabel("rows")
    left.legend(fontsize=7)
    margins = (original - negative, positive - negative)
    bins = np.histogram_bin_edges(np.concatenate(margins), bins=30)
    for values, name in zip(margins, ("s_c - s_n", "s_p - s_n")):
        right.hist(values, bins=bins, histtype="step", linewidth=1.5, label=name)
    right.axvline(0, color="grey", linestyle="dashed", linewidth=1)
    right.set_xlabel("margin over the hard negative")
    right.locator_params(axis="x", nbins=6)
    right.legend(fontsize=7)
    fig.suptitle(mathtext_literal(title), fontsize=10)
    return _uri(fig)


def curve_keys(log_history: Sequence[Mapping], prefix: str) -> list[str]:
    """The logged numeric keys starting with `prefix`, in first-logged order, bookkeeping keys left out."""
    return list(
        dict.fromkeys(
            k
            for entry in log_history
            for k, v in entry.items()
            if k.startswith(prefix)
            and isinstance(v, (int, float))
            and not any(k.endswith(n) for n in _NOT_CURVES)
        )
    )


def _rate_of(key: str) -> tuple[str, str] | None:
    """`eval_<set>[_<row>]_<rate>` as (stem, rate) when it ends in a rate (a fraction of rows), else None."""
    for rate in RATE_SUFFIXES:
        if key.endswith("_" + rate):
            return key[: -len(rate) - 1], rate
    return None


def _panel_rank(stem: str, first_seen: int) -> tuple:
    """REPLACE first (its pooled paper column before its subsets), then SWAP, then the rest as logged."""
    name = stem.lower()
    bench = 0 if "replace" in name else 1 if "swap" in name else 2
    return bench, 0 if "pooled" in name else 1, first_seen


def eval_panels(log_history: Sequence[Mapping]) -> dict[str, list[str]]:
    """The logged rate keys grouped into one panel per eval set and row (`stem`), panels in `_panel_rank` order."""
    panels: dict[str, list[str]] = {}
    for key in curve_keys(log_history, "eval_"):
        found = _rate_of(key)
        if found:
            panels.setdefault(found[0], []).append(key)
    order = sorted(panels, key=lambda stem: _panel_rank(stem, list(panels).index(stem)))
    return {stem: panels[stem] for stem in order}


def _points(log_history: Sequence[Mapping], key: str) -> tuple[list[int], list[float]]:
    points = [(e["step"], e[key]) for e in log_history if key in e and "step" in e]
    steps, values = zip(*points) if points else ((), ())
    return list(steps), list(values)


def loss_curves(log_history: Sequence[Mapping]) -> tuple[str | None, list[str]]:
    """Every loss term over steps in one panel (one shared axis: the terms add up to the loss)."""
    keys = curve_keys(log_history, "loss")
    if not keys:
        return None, []
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    for key in keys:
        steps, values = _points(log_history, key)
        ax.plot(
            steps,
            values,
            marker="o" if len(steps) < 20 else None,
            markersize=3,
            label=mathtext_literal(key),
            linewidth=2 if key == "loss" else 1,
        )
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (mean over each logging interval)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("Loss terms", fontsize=10)
    return _uri(fig), keys


def eval_curves(
    log_history: Sequence[Mapping],
    step_zero: Mapping[str, Mapping[str, float]] | None = None,
    max_panels: int = 12,
) -> tuple[str | None, dict[str, list[str]]]:
    """One panel per eval set and row, its rates over steps in percent on one 0-100 scale, chance dashed.

    `step_zero` maps a panel's stem to the base model's rates (fractions), drawn at step 0 with a hollow
    marker when the log has no step-0 evaluation of its own. Returns the chart and the panels drawn.
    """
    panels = dict(list(eval_panels(log_history).items())[:max_panels])
    if not panels:
        return None, {}
    plt = require_matplotlib()
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False, sharey=True)
    colours = {rate: f"C{i}" for i, rate in enumerate(RATE_SUFFIXES)}
    for ax, (stem, keys) in zip(axes.flat, panels.items()):
        for key in keys:
            rate = _rate_of(key)[1]
            steps, values = _points(log_history, key)
            base = (step_zero or {}).get(stem, {})
            if rate in base and 0 not in steps:
                steps, values = [0, *steps], [base[rate], *values]
                ax.plot(
                    [0],
                    [100 * base[rate]],
                    marker="o",
                    markerfacecolor="white",
                    color=colours[rate],
                    zorder=3,
                )
            ax.plot(
                steps,
                [100 * v for v in values],
                marker="o" if len(steps) < 20 else None,
                markersize=3,
                color=colours[rate],
                label=LABELS.get(rate, rate),
            )
            if rate in CHANCE:
                ax.axhline(100 * CHANCE[rate], color=colours[rate], linestyle="dashed", linewidth=0.8)
        ax.set_title(mathtext_literal(stem.removeprefix("eval_")), fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_xlabel("training step (0: base model)", fontsize=7)
        ax.set_ylabel("% of rows", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle("Eval rates over training (dashed: chance; hollow marker: base model)", fontsize=10)
    fig.tight_layout()
    return _uri(fig), panels


def thumbnail(image, size: int = 160) -> str:
    """A PIL image as a small embedded JPEG (the report must stay a few MB even for large photos)."""
    image = image.convert("RGB")
    image.thumbnail((size, size))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
