"""Published figures from the papers this package reproduces, with their source (paper, table, page).

This package is the only place a published number is typed. Each paper's figures live in a module of
their own (``hard_positive`` for Kamath et al., ECCV 2024; ``ce_clip`` for Zhang et al., CVPR 2024)
as tuples of :class:`PublishedFigure`; every table, ``metrics.json`` and report that shows a published
row beside ours reads it from here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedFigure:
    """One number as printed in a paper.

    ``value`` is exactly as printed (percent for rates, cosine for mean scores); ``source`` names the
    paper, table and page, so a reader can check it.
    """

    model: str  # the paper's row name, e.g. "CLIP ViT-B/32"
    benchmark: str  # e.g. "replace", "replace/attributes", "swap", "valse/existence", "imagenet1k"
    metric: str  # e.g. "original_accuracy", "augmented_accuracy", "brittleness", "acc1"
    value: float
    source: str  # e.g. "Kamath et al., ECCV 2024, Table 1 (p. 9)"


def all_figures() -> tuple[PublishedFigure, ...]:
    """Every figure of every paper module."""
    from . import hard_positive

    return hard_positive.FIGURES


def lookup(model: str, benchmark: str, metric: str) -> PublishedFigure | None:
    """The figure printed for the paper row `model` on `benchmark` / `metric`, or None if none is typed."""
    found = [f for f in all_figures() if (f.model, f.benchmark, f.metric) == (model, benchmark, metric)]
    if len(found) > 1:
        raise ValueError(f"two published figures for {model!r} / {benchmark!r} / {metric!r}: {found}")
    return found[0] if found else None


def model_row(model: str, preset: str | None = None) -> str | None:
    """The paper row whose weights `model` is: a `hardpos zoo` preset first, else a Hub id; None if unknown.

    A local folder is never matched by its name: only a preset or a Hub id says which weights it holds.
    """
    from . import hard_positive

    if preset is not None:
        return hard_positive.PRESET_ROWS.get(preset)
    return hard_positive.HUB_ROWS.get(str(model))


def comparison(model: str, rows: dict[str, dict], benchmarks: dict[str, str]) -> dict[str, dict]:
    """Published figures beside ours: per row of ours whose benchmark has figures for paper row `model`.

    `rows` maps our row names to metrics (rates as fractions); `benchmarks` maps the same names to the
    paper's benchmark. Returns `{row: {"benchmark", "published": {metric: percent}, "delta": {metric:
    ours - published, percentage points}, "sources": [...]}}` (delta rounded to 0.01 points, the
    figures' own precision being 0.1).
    """
    compared: dict[str, dict] = {}
    for row, benchmark in benchmarks.items():
        published, delta, sources = {}, {}, []
        for metric, value in rows.get(row, {}).items():
            figure = lookup(model, benchmark, metric) if isinstance(value, float) else None
            if figure is None:
                continue
            published[metric] = figure.value
            delta[metric] = round(100 * value - figure.value, 2)
            sources.append(figure.source)
        if published:
            compared[row] = {"benchmark": benchmark, "published": published, "delta": delta,
                             "sources": sorted(set(sources))}  # fmt: skip
    return compared


def beside_ours(model: str, dataset: str, rows: dict[str, dict], preset: str | None = None) -> dict:
    """What `hardpos eval` stores and prints about a known published model: its paper row and `comparison`.

    Empty when `model` (or `preset`) is no known paper row, or no row of ours has a published figure.
    """
    from .hard_positive import benchmark_of

    paper_row = model_row(model, preset)
    if paper_row is None:
        return {}
    benchmarks = {row: b for row in rows if (b := benchmark_of(dataset, row)) is not None}
    compared = comparison(paper_row, rows, benchmarks)
    if not compared:
        return {}
    return {"model_row": paper_row, "units": "published: percent as printed; delta: ours - published, "
            "percentage points", "rows": compared}  # fmt: skip
