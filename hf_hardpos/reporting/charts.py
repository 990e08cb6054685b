"""The report's charts, drawn with matplotlib and returned as `data:image/png;base64,...` URIs.

Embedding keeps the page one file that opens offline and never requests anything. matplotlib is
imported here only (the `demo` and `test` extras install it); `require_matplotlib` turns its absence
into one clear error before any work.
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
_NOT_CURVES = ("runtime", "samples_per_second", "steps_per_second", "epoch", "total_flos", "num_examples")


def require_matplotlib():
    """matplotlib with a file-only backend, or a one-line error naming the install command."""
    try:
        import matplotlib
    except ImportError as err:
        raise UserInputError("hardpos report draws its charts with matplotlib: pip install 'hf_hardpos[demo]'") from err
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _uri(fig) -> str:
    plt = require_matplotlib()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def rate_bars(rows: Mapping[str, Mapping[str, float]]) -> str:
    """One group of bars per rate, one bar per row (config or aggregate), 95% interval whiskers where known.

    Rows without an interval get no whisker (never a made-up one); chance is a dashed line per rate.
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
        label = f"{mathtext_literal(name)} ({m.get('num_examples', '?')} rows" + ("" if yerr is not None else "; no interval") + ")"
        ax.bar(x, values, width, label=label, yerr=yerr, capsize=3)
    for j, k in enumerate(METRIC_NAMES):
        ax.hlines(100 * CHANCE[k], j - 0.45, j + 0.45, colors="grey", linestyles="dashed", linewidth=1)
    ax.set_xticks(np.arange(len(METRIC_NAMES)), [LABELS[k] for k in METRIC_NAMES])
    ax.set_ylabel("% of rows")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("Rates with 95% intervals (dashed: chance)", fontsize=10)
    return _uri(fig)


def score_distributions(original: np.ndarray, negative: np.ndarray, positive: np.ndarray, title: str) -> str:
    """Histograms of s_c, s_n, s_p, and of the margins s_c - s_n and s_p - s_n (right of 0 = caption wins)."""
    plt = require_matplotlib()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.0))
    bins = np.histogram_bin_edges(np.concatenate([original, negative, positive]), bins=30)
    for values, name in ((original, "s_c (original)"), (negative, "s_n (hard negative)"), (positive, "s_p (hard positive)")):
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
    return list(dict.fromkeys(
        k for entry in log_history for k, v in entry.items()
        if k.startswith(prefix) and isinstance(v, (int, float)) and not any(k.endswith(n) for n in _NOT_CURVES)
    ))


def training_curves(log_history: Sequence[Mapping], prefix: str, max_panels: int = 24) -> tuple[str | None, int]:
    """Small multiples, one per logged key starting with `prefix` ("loss" terms or "eval_" metrics), over steps.

    Returns the chart (None when nothing was logged) and how many keys there were (panels beyond
    `max_panels` are left out; the caller says so).
    """
    keys = curve_keys(log_history, prefix)
    if not keys:
        return None, 0
    shown = keys[:max_panels]
    plt = require_matplotlib()
    cols = min(3, len(shown))
    rows = -(-len(shown) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.3 * rows), squeeze=False)
    for ax, key in zip(axes.flat, shown):
        points = [(e["step"], e[key]) for e in log_history if key in e and "step" in e]
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o" if len(points) < 20 else None, markersize=3)
        ax.set_title(mathtext_literal(key), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.tight_layout()
    return _uri(fig), len(keys)


def thumbnail(image, size: int = 160) -> str:
    """A PIL image as a small embedded JPEG (the report must stay a few MB even for large photos)."""
    image = image.convert("RGB")
    image.thumbnail((size, size))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
