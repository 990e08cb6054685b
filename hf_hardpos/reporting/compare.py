"""The cross-run table of `hardpos compare`: the paper's Table 1 layout, one row per run, paired tests.

Rows are runs, named by model; columns are one group per benchmark (REPLACE, SWAP, then any other
benchmark of the runs), each with original accuracy, augmented accuracy and brittleness (other tasks
show their own metrics). Every figure is read from the run's `metrics.json` as saved; the caption
says how each group aggregates rows.

With two or more runs, the first is the reference A and every other run B gets a difference row
`B - A`. A difference is shown only where both runs scored the same rows (same data identity) under
the same protocol, and then with the paired tests of `paired`; runs whose data identity, dtype or
protocol differ are refused, or with `allow_mismatch` shown with the mismatch named in the table
and no difference computed. Nothing is put side by side silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UserInputError
from ..metrics import METRIC_NAMES, outcomes_disagree
from ..tables import TIE_RULE
from . import paired
from .benchmark import Benchmark, Figure
from .runs import Run

ACCURACIES = ("original_accuracy", "augmented_accuracy")
GROUP_ORDER = ("REPLACE", "SWAP")


@dataclass
class Cell:
    """One number of the table: a fraction (as metrics.json holds it), its interval, its test."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None  # McNemar's exact p (difference rows, accuracies)
    excludes_zero: bool | None = None  # difference rows: the 95% interval excludes 0


@dataclass
class Row:
    label: str
    kind: str  # "run", "difference" (B - A, paired) or "published"
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)  # group -> metric -> cell
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    groups: dict[str, list[str]]  # group -> its metric names, in column order
    rows: list[Row]
    captions: list[str]


def _figures(run: Run, all_rows: bool = False) -> dict[str, tuple[Benchmark, Figure]]:
    """Column group -> the benchmark and figure it shows: the headline rows, or with `all_rows` every row."""
    found: dict[str, tuple[Benchmark, Figure]] = {}
    for bench in run.benchmarks.values():
        for fig in bench.figures(all_rows):
            found.setdefault(fig.label, (bench, fig))
    return found


def run_labels(runs: Sequence[Run]) -> list[str]:
    """Rows named by model; a model shown twice (two dtypes, two activations) adds its folder's name."""
    names = [r.short_model() for r in runs]
    return [f"{n} ({r.folder.name})" if names.count(n) > 1 else n for n, r in zip(names, runs)]


def _metric_names(figures: list[Figure], hard_positive: bool) -> list[str]:
    if hard_positive:
        return list(METRIC_NAMES)
    names: dict[str, None] = {}
    for fig in figures:
        for key, value in fig.metrics.items():
            if isinstance(value, float) and not key.startswith("num_") and "_ci_" not in key:
                names[key] = None
    return list(names)


def _cell(metrics: dict[str, Any], name: str) -> Cell:
    """Every metric the table shows is a fraction of rows (hard-positive rates, caption-selection accuracy,
    Winoground scores, zero-shot accuracy and recall), shown in percent."""
    if name not in metrics:
        return Cell()
    return Cell(float(metrics[name]), metrics.get(f"{name}_ci_low"), metrics.get(f"{name}_ci_high"))


# Why a differing setting makes two figures incomparable, said after "A vs B".
WHY = {
    "precision": "a lower precision flips near-tied outcomes, so the rates move without the model changing",
    "max_rows": "they scored different numbers of rows",
    "split": "they scored different splits",
    "protocol": "the scoring protocols differ (preprocessing, dtype and tie handling)",
    "image backend": "the images were preprocessed by different backends (pixels differ slightly)",
}


def _mismatches(
    a: Run, b: Run, bench_a: Benchmark, bench_b: Benchmark, fig_a: Figure, fig_b: Figure, notes: list[str]
) -> list[str]:
    """Why `b`'s figure is not comparable with `a`'s, each in words (empty: comparable); differences that are
    allowed but must be said are appended to `notes`.

    Under `--protocol paper` the dtype is the protocol's choice per model (OpenAI weights in float16 on
    CUDA, every other checkpoint in float32, as the paper's code scored them), so two such runs are
    compared and the dtypes named; under any other protocol a dtype difference is refused. A setting only
    one run records (a fine-tuning folder's evaluations record their dtype, not a split or protocol) is
    named, not refused.
    """
    problems = []
    la, lb = a.short_model(), b.short_model()
    pa, pb = a.protocol(), b.protocol()
    both_paper = pa.get("protocol") == pb.get("protocol") == "paper"
    for key in sorted(set(pa) | set(pb)):
        va, vb = pa.get(key), pb.get(key)
        if va == vb:
            continue
        what = "dtype" if key == "precision" else key
        if key not in pa or key not in pb:
            known, missing, value = (la, lb, va) if key in pa else (lb, la, vb)
            if value is not None:
                notes.append(f"{what}: {missing} does not record it ({known}: {value}); taken as the same")
            continue
        if key == "precision" and both_paper:
            notes.append(f"dtype {va} vs {vb}, each as --protocol paper sets it for its model")
            continue
        problems.append(
            f"{what} {va} vs {vb} ({la}: {va}, {lb}: {vb}; {WHY.get(key, 'the setting differs')})"
        )
    defs_a = bench_a.data.get("metric_definitions", {})
    defs_b = bench_b.data.get("metric_definitions", {})
    if defs_a and defs_b and defs_a != defs_b:
        problems.append("score definition or tie rule differs (the same scores would give other rates)")
    if fig_a.row != fig_b.row or fig_a.configs != fig_b.configs:
        rows_a, rows_b = fig_a.metrics.get("num_examples"), fig_b.metrics.get("num_examples")
        if len(fig_a.configs) == len(fig_b.configs) == 1 and rows_a == rows_b:
            notes.append(
                f"{fig_a.label}: {la} names its only table {fig_a.row!r}, {lb} {fig_b.row!r} "
                f"({rows_a} rows each)"
            )
        else:
            problems.append(
                f"figure {fig_a.row!r} vs {fig_b.row!r} ({la}'s {fig_a.label} counts {rows_a} rows of "
                f"{', '.join(fig_a.configs)}, {lb}'s {rows_b} rows of {', '.join(fig_b.configs)})"
            )
    for config in fig_a.configs:
        ia, ib = bench_a.data_identity(config), bench_b.data_identity(config)
        if ia is not None and ib is not None and ia != ib:
            problems.append(
                f"data [{config}] {ia[0][:12]} ({ia[2]} rows) vs {ib[0][:12]} ({ib[2]} rows) "
                "(the two runs scored different content)"
            )
    return problems


def _check_agrees(fig: Figure, outcomes: dict[str, np.ndarray], where: str) -> None:
    """The per-row outcomes must reproduce the saved figure; otherwise the folder was edited or mixed."""
    why = outcomes_disagree(fig.metrics, outcomes)
    if why is not None:
        raise UserInputError(
            f"{where}: {why} for {fig.row!r}; the folder mixes two runs (rerun hardpos eval)"
        )


def compare_runs(
    runs: Sequence[Run],
    *,
    allow_mismatch: bool = False,
    resamples: int = paired.DEFAULT_RESAMPLES,
    published: Sequence[Row] = (),
    all_rows: bool = False,
) -> Comparison:
    """Build the table (see the module docstring). `published` rows (from `--paper`) are appended as given;
    `all_rows` (`--rows all`) adds every config, subset and piece beside the headline figures."""
    if not runs:
        raise UserInputError("give at least one run folder")
    figures = [_figures(r, all_rows) for r in runs]
    for run, figs in zip(runs, figures):
        if not figs:
            raise UserInputError(
                f"{run.folder}: no evaluated benchmark to compare (a fine-tuning folder without "
                "evaluations; run hardpos eval on its saved model)"
            )
    labels = run_labels(runs)
    all_groups = list(dict.fromkeys(g for figs in figures for g in figs))
    ordered = [g for g in GROUP_ORDER if g in all_groups] + [g for g in all_groups if g not in GROUP_ORDER]
    groups = {}
    for g in ordered:
        present = [figs[g] for figs in figures if g in figs]
        groups[g] = _metric_names([f for _, f in present], present[0][0].carries_rates)

    rows = [_run_row(label, figs, groups) for label, figs in zip(labels, figures)]
    mismatched: list[str] = []
    by_image = True
    for run, label, figs in zip(runs[1:], labels[1:], figures[1:]):
        diff, grouped = _difference_row(
            runs[0],
            run,
            figures[0],
            figs,
            labels=(labels[0], label),
            groups=groups,
            resamples=resamples,
            mismatched=mismatched,
        )
        by_image = by_image and grouped
        rows.append(diff)
    if mismatched and not allow_mismatch:
        raise UserInputError(
            "runs are not comparable (pass --allow-mismatch to show them side by side, flagged): "
            + " | ".join(mismatched)
        )
    rows.extend(published)
    captions = _captions(runs, labels, figures, groups, resamples=resamples, by_image=by_image)
    captions.extend(f"{row.label}: {n}" for row in rows for n in row.notes)
    return Comparison(groups, rows, captions)


def _run_row(label: str, figs: dict, groups: dict[str, list[str]]) -> Row:
    """One run's figures in every group it has, with its intervals and recomputations noted."""
    row = Row(label, "run")
    for g, metrics in groups.items():
        if g in figs:
            _, fig = figs[g]
            row.cells[g] = {m: _cell(fig.metrics, m) for m in metrics}
            if fig.interval:
                row.notes.append(f"{g} intervals: {fig.interval}")
            if fig.recomputed:
                row.notes.append(
                    f"{g}: {fig.row} recomputed from the saved per-subset rates (older metrics.json)"
                )
    return row


def _difference_row(
    reference: Run,
    run: Run,
    ref_figs: dict,
    figs: dict,
    *,
    labels: tuple[str, str],
    groups: dict[str, list[str]],
    resamples: int,
    mismatched: list[str],
) -> tuple[Row, bool]:
    """`run` minus the reference run, paired per row, in every group both have and can prove on the same
    rows; a group that cannot be compared is noted (and added to `mismatched`). Also whether every
    paired group was resampled by image (False: by row)."""
    ref_label, label = labels
    diff = Row(f"{label} - {ref_label}", "difference")
    by_image = True
    for g, metrics in groups.items():
        if g not in figs or g not in ref_figs:
            continue
        (bench_a, fig_a), (bench_b, fig_b) = ref_figs[g], figs[g]
        said: list[str] = []
        problems = _mismatches(reference, run, bench_a, bench_b, fig_a, fig_b, said)
        diff.notes.extend(f"{g}: {note}" for note in said)
        if problems:
            mismatched.append(f"{label} vs {ref_label}, {g}: {'; '.join(problems)}")
            diff.notes.append(f"{g}: not comparable ({'; '.join(problems)}); no difference shown")
            continue
        if not bench_a.carries_rates:
            diff.notes.append(f"{g}: this task's per-row outcomes are not saved; no paired difference")
            continue
        known = all(
            bench_a.data_identity(c) is not None and bench_b.data_identity(c) is not None
            for c in fig_a.configs
        )
        out_a, out_b = bench_a.outcomes(fig_a.configs), bench_b.outcomes(fig_b.configs)
        if not known or out_a is None or out_b is None:
            why = "data identity unknown" if not known else "per-row scores not saved"
            diff.notes.append(f"{g}: {why}, so the same rows cannot be proven; no paired test")
            continue
        (rates_a, groups_a), (rates_b, groups_b) = out_a, out_b
        _check_agrees(fig_a, rates_a, str(bench_a.folder))
        _check_agrees(fig_b, rates_b, str(bench_b.folder))
        if groups_a is None or groups_b is None or not np.array_equal(groups_a, groups_b):
            groups_a = None
            by_image = False
        differences = paired.paired_differences(
            {m: rates_a[m] for m in metrics},
            {m: rates_b[m] for m in metrics},
            groups_a,
            accuracies=ACCURACIES,
            resamples=resamples,
        )
        diff.cells[g] = {
            m: Cell(d.difference, d.ci_low, d.ci_high, d.mcnemar_p, d.excludes_zero)
            for m, d in differences.items()
        }
    return diff, by_image


def _captions(
    runs: Sequence[Run],
    labels: Sequence[str],
    figures: Sequence[dict],
    groups: dict[str, list[str]],
    *,
    resamples: int,
    by_image: bool,
) -> list[str]:
    """The table's captions: the tie rule, each group's aggregation, the paired test's method, and each run."""
    captions = [
        f"Rates in % of rows; hard positives: {TIE_RULE}. Rows: one per run (model; folder if a model repeats)."
    ]
    for g in groups:
        lines = dict.fromkeys(figs[g][1].aggregation for figs in figures if g in figs)
        for line in lines:
            captions.append(line if len(lines) == 1 else f"{line} (differs between runs: flagged)")
    if len(runs) > 1:
        captions.append(paired.method_line(resamples, by_image))
    for run, label in zip(runs, labels):
        s = run.settings
        if run.kind == "finetune":
            steps = sorted({b.data["step"] for b in run.benchmarks.values() if "step" in b.data})
            captions.append(
                f"{label}: fine-tuning run in {run.folder}; figures from the trainer's latest evaluation"
                + (f" (step {', '.join(map(str, steps))})" if steps else "")
            )
            continue
        captions.append(
            f"{label}: {run.kind} run in {run.folder}; {s.get('precision', '?')} on {s.get('device', '?')}"
            + (f", max_rows {s['max_rows']}" if s.get("max_rows") else "")
        )
    return captions


def published_rows(runs: Sequence[Run], paper_rows: Sequence[str] = (), all_rows: bool = False) -> list[Row]:
    """`--paper [ROW]`: printed rows of the papers (`hf_hardpos.published`) and each run minus them.

    Without `paper_rows`, each run whose weights are a published system gets that system's rows: the
    system is found from the Hub id or a `hardpos zoo` preset recorded by the run, never from a local
    folder's name (`hf_hardpos.published.model_row`). With `paper_rows` (any printed row or system name
    of either paper, e.g. "NegCLIP", "Our HP+HN", "CE-CLIP", "DAC-LLM"; case-insensitive), every run is
    put beside each named row, whatever its weights. Cells are the figures printed for the benchmark and
    metric of each column group (`evaluation.published_rows.benchmarks_of`). A difference to a published row is
    shown only for a group the run measured on the paper's benchmark (`evaluation.paper_data`); elsewhere the
    published row's note says what differs ("120 of 27,443 rows", "not built from the paper's sources").
    Differences have no interval: the paper's per-row outcomes are not available to pair.
    """
    from ..published import find_model, model_row, systems

    named = []
    for name in paper_rows:
        system = find_model(name)
        if system is None:
            raise UserInputError(f"--paper {name!r}: no printed row of that name; the printed systems are: "
                                 + "; ".join(systems()))  # fmt: skip
        named.append(system)
    rows, seen = [], set()
    for run, label in zip(runs, run_labels(runs)):
        own = model_row(run.model, run.run.get("preset"))
        for system in named or ([own] if own is not None else []):
            published, delta = _published_pair(run, system, f"{label} - {system} (published)", all_rows)
            if not published.cells:
                continue
            if system not in seen:
                rows.append(published)
                seen.add(system)
            else:  # the row is shown once; what differs for this run is said on it too
                shown = next(r for r in rows if r.kind == "published" and r.label == published.label)
                shown.notes.extend(n for n in published.notes if n not in shown.notes)
            if delta.cells:
                rows.append(delta)
    return rows


def _published_pair(run: Run, system: str, delta_label: str, all_rows: bool = False) -> tuple[Row, Row]:
    """The printed row of `system` over `run`'s column groups, and `run` minus it, as fractions (cosine for
    mean scores). A group gets a difference only when the run measured it on the paper's benchmark (all its
    rows, built from the paper's sources: `evaluation.paper_data`); otherwise the published row says what
    differs. A printed figure the paper's own cells contradict is flagged (`published.slip_note`)."""
    from ..evaluation.paper_data import data_differs
    from ..evaluation.published_rows import benchmarks_of
    from ..published import PERCENT, lookup, slip_note

    published, delta, sources = (
        Row(f"{system} (published)", "published"),
        Row(delta_label, "difference"),
        set(),
    )
    for g, (bench, fig) in _figures(run, all_rows).items():
        dataset = str(bench.data.get("dataset") or bench.data.get("source") or bench.name)
        benchmark = benchmarks_of(dataset, {fig.row: fig.metrics}, bench.task, bench.provenance).get(fig.row)
        if benchmark is None:
            continue
        differs = data_differs(
            benchmark,
            fig.configs,
            {**bench.results, **bench.aggregates},
            bench.provenance,
            run.settings.get("max_rows"),
        )
        metrics = (
            METRIC_NAMES
            if bench.carries_rates
            else [k for k, v in fig.metrics.items() if isinstance(v, float)]
        )
        for metric in metrics:
            figure = lookup(system, benchmark, metric)
            if figure is None:
                continue
            value = figure.value / 100 if figure.unit == PERCENT else figure.value
            published.cells.setdefault(g, {})[metric] = Cell(value)
            if metric in fig.metrics and differs is None:
                delta.cells.setdefault(g, {})[metric] = Cell(float(fig.metrics[metric]) - value)
            sources.add(figure.source)
            if (note := slip_note(figure)) is not None:
                published.notes.append(f"{g}: slip: {note}")
        if g in published.cells and differs is not None:
            published.notes.append(
                f"{g}: {run_labels([run])[0]}'s data are not the paper's benchmark ({differs}); "
                "no difference shown"
            )
    if published.cells:
        published.notes.insert(0, "as printed in " + "; ".join(sorted(sources)))
        delta.notes.append(
            "difference to the published row, no interval (the paper's per-row outcomes are not public)"
        )
    return published, delta
