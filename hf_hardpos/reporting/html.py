"""`hardpos report`: one self-contained HTML page per run, rendered from Jinja2 templates
(`reporting/templates/`), CSS inline, charts and thumbnails embedded, no external URL.

The page opens with a table of contents and one headline box per benchmark (`headline`: rates with
intervals and chance, the difference to each `--baseline` run with its paired test, the worst subset and
the worst replacement type). Then, per hard-positive benchmark: the table with 95% intervals, bars per
subset and per run on one 0-100 % scale with chance lines, the distributions of s_c, s_n, s_p and of the
margins, the breakdown by replacement (`breakdown`: whole phrases, a minimum row count, Wilson intervals,
roll-ups by type) and the most confidently brittle rows with their image and captions. Other tasks of a
suite get their table; a fine-tuning folder gets its loss terms and its eval rates over steps, grouped by
benchmark, with the base model (a baseline run, or the log's own step-0 evaluation) at step 0.

Nothing is re-scored: numbers come from `metrics.json` and the per-row `scores-<config>.parquet`;
captions and images are read from the evaluated dataset, located by the identity `metrics.json`
recorded and used only if its content digest still matches (otherwise the page says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import columns
from ..backends import describe_model
from ..evaluation.aggregation import describe
from ..evaluation.section import metric_stem
from ..metrics import brittle
from ..tables import TIE_RULE, metrics_cells
from . import breakdown as by_replacement
from . import charts
from .benchmark import Benchmark
from .compare import run_labels
from .headline import Headline, baseline_deltas, baseline_rates, headline, headline_sentence
from .runs import Run
from .scored_rows import ScoredRows, load_scored, with_intervals

DEFAULT_RESAMPLES = 1000
NUM_EXAMPLES = 12
TEMPLATE = "report.html.j2"


def brittle_confidence(original: np.ndarray, negative: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """How surely a row is brittle: the smaller gap between s_n and the two positives' scores around it.

    A brittle row has s_n strictly between s_c and s_p; the smaller of |s_c - s_n| and |s_p - s_n| is
    how far the scores would have to move to undo that. Non-brittle rows get -inf.
    """
    confidence = np.minimum(np.abs(original - negative), np.abs(positive - negative))
    return np.where(brittle(original, negative, positive), confidence, -np.inf)


def _environment():
    """The Jinja2 environment: templates shipped in the package, every value HTML-escaped."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    return Environment(
        loader=PackageLoader("hf_hardpos.reporting", "templates"),
        autoescape=select_autoescape(("j2",)),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def anchor(*parts: str) -> str:
    """An id for a heading: lower-case letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-") or "section"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> dict:
    return {"header": list(header), "rows": [list(r) for r in rows], "numeric_from": numeric_from}


def _replacements(
    scored: Mapping[str, ScoredRows], min_rows: int
) -> tuple[list[dict], list[str], list[by_replacement.Group]]:
    """Per config with readable data: its breakdown table and roll-up; plus all configs' types, pooled."""
    blocks, all_types, augmented, brittle_rows = [], [], [], []
    for config, r in scored.items():
        if r.dataset is None:
            continue
        keys, types, what = by_replacement.replacement_keys(r.dataset)
        aug, brit = r.scores["augmented_correct"], r.scores["brittle"]
        groups, hidden, hidden_rows = by_replacement.breakdown(keys, types, aug, brit, min_rows)
        rollup = by_replacement.rollup(types, aug, brit)
        note = (
            f"{len(set(keys))} distinct replacements; listed: the {len(groups)} most brittle with at least "
            f"{min_rows} rows (at most {by_replacement.MAX_LISTED})"
        )
        if hidden:
            note += f"; {hidden} with fewer rows ({hidden_rows} rows in all) are counted in the roll-up only"
        blocks.append(
            {
                "config": config,
                "what": what,
                "note": note,
                "table": _table(
                    ["replacement", "type", "rows", "aug acc % [95%]", "brittle % [95%]"],
                    [_group_row(g, key=True) for g in groups],
                    numeric_from=2,
                ),
                "rollup": _table(
                    ["type", "rows", "aug acc % [95%]", "brittle % [95%]"],
                    [_group_row(g, key=False) for g in rollup],
                ),
            }
        )
        all_types.extend(types)
        augmented.append(aug)
        brittle_rows.append(brit)
    pooled = (
        by_replacement.rollup(all_types, np.concatenate(augmented), np.concatenate(brittle_rows))
        if augmented
        else []
    )
    return blocks, all_types, pooled


def _group_row(group: by_replacement.Group, key: bool) -> list[str]:
    def cell(value: float, bounds: tuple[float, float]) -> str:
        return f"{100 * value:.1f} [{100 * bounds[0]:.1f}, {100 * bounds[1]:.1f}]"

    first = [group.key, group.type] if key else [group.type]
    return [
        *first,
        str(group.rows),
        cell(group.augmented, group.augmented_interval),
        cell(group.brittleness, group.brittleness_interval),
    ]


def _example_cards(scored: Sequence[ScoredRows], count: int) -> list[dict]:
    candidates = []
    for rows in scored:
        if rows.dataset is None:
            continue
        s = rows.scores
        confidence = brittle_confidence(s["original_score"], s["negative_score"], s["positive_score"])
        candidates.extend((c, rows, int(i)) for i, c in enumerate(confidence) if np.isfinite(c))
    candidates.sort(key=lambda t: -t[0])
    cards = []
    for confidence, rows, index in candidates[:count]:
        record, s = rows.dataset[index], rows.scores
        image = record.get(columns.IMAGE)
        cards.append(
            {
                "config": rows.config,
                "index": index,
                "confidence": f"{confidence:.4f}",
                "image": charts.thumbnail(image) if image is not None else None,
                "lines": [
                    ("c", "c", record[columns.CAPTION], f"{s['original_score'][index]:.4f}"),
                    ("n_", "c_n", record[columns.HARD_NEGATIVE], f"{s['negative_score'][index]:.4f}"),
                    ("p", "c_p", record[columns.HARD_POSITIVE], f"{s['positive_score'][index]:.4f}"),
                ],
            }
        )
    return cards


@dataclass
class Context:
    """What one page needs besides the run: the baselines and how much work the page may do."""

    baselines: Sequence[Run]
    run_label: str
    deltas: dict
    resamples: int
    examples: int
    min_rows: int
    fetch_data: bool = False  # may download the Hub datasets the run names (`scored_rows.load_dataset_rows`)


def benchmark_section(bench: Benchmark, context: Context) -> tuple[dict, list[Headline]]:
    """Everything the page shows for one hard-positive benchmark, and its headline boxes."""
    section_id = anchor("bench", bench.name)
    scored, data_notes = load_scored(bench, context.fetch_data)
    rows, interval_notes = with_intervals(bench, scored, context.resamples)
    notes = [f"Rates in % of rows; {TIE_RULE}. s = mean cosine similarity of image and caption embeddings."]
    notes += [
        describe(name, m["aggregation"]) for name, m in rows.items() if isinstance(m.get("aggregation"), dict)
    ]
    notes += [
        f"[{c}] intervals: {how}"
        for c in bench.results
        if (
            how := bench.provenance.get(c, {}).get("interval") or bench.provenance.get(c, {}).get("bootstrap")
        )
    ]
    notes += interval_notes
    section: dict[str, Any] = {
        "id": section_id,
        "title": bench.display_name(),
        "hard_positive": True,
        "source": bench.data.get("dataset") or bench.data.get("source") or "",
        "rates": _table(*metrics_cells(rows, label="row")),
        "notes": notes,
        "subset_chart": charts.rate_bars(rows),
        "run_charts": [],
        "distributions": [],
        "replacements": [],
        "examples": [],
        "data_notes": data_notes,
        "scored": bool(scored),
    }
    blocks, _, pooled_types = _replacements(scored, context.min_rows)
    section["replacements"] = blocks
    worst_type = by_replacement.worst(pooled_types, context.min_rows)
    type_note = "" if worst_type else ("no type has enough rows" if blocks else "captions not readable here")
    boxes = []
    for fig in bench.figures():
        metrics = rows.get(fig.row, fig.metrics)
        deltas = context.deltas.get(fig.label, [])
        boxes.append(headline(section_id, bench, fig, metrics, deltas, worst_type, type_note))
        if deltas:
            section["run_charts"].append(
                charts.rate_bars(
                    baseline_rates(metrics, deltas, context.run_label),
                    f"{fig.label}: this run and its baselines (dashed: chance)",
                )
            )
    for config, r in scored.items():
        s = r.scores
        title = f"{bench.display_name()} [{config}]: {len(s['original_score'])} rows"
        section["distributions"].append(
            charts.score_distributions(s["original_score"], s["negative_score"], s["positive_score"], title)
        )
    section["examples"] = _example_cards(list(scored.values()), context.examples)
    return section, boxes


def other_section(bench: Benchmark) -> dict:
    """A suite's caption-selection / Winoground / zero-shot dataset: its rows and metrics as saved."""
    rows = {**bench.results, **bench.aggregates}
    names = list(dict.fromkeys(k for m in rows.values() for k, v in m.items() if isinstance(v, (int, float))))
    table = [
        [name, *(f"{m[k]:.4f}" if isinstance(m.get(k), float) else str(m.get(k, "")) for k in names)]
        for name, m in rows.items()
    ]
    notes = [
        f"{key.replace('_', ' ')}: {bench.data[key]}"
        for key in ("tie_rule", "aggregation")
        if bench.data.get(key)
    ]
    return {
        "id": anchor("bench", bench.name),
        "title": f"{bench.display_name()} ({bench.task})",
        "hard_positive": False,
        "table": _table(["row", *names], table),
        "notes": notes,
    }


def _step_zero(run: Run, baselines: Sequence[Run]) -> tuple[dict[str, dict], str]:
    """The base model's rates per eval panel stem (`eval_<set>[_<row>]`), from the first baseline that has them."""
    stems = charts.eval_panels(run.log_history)
    for baseline in baselines:
        found = {}
        for bench in baseline.benchmarks.values():
            rows = {**bench.results, **bench.aggregates}
            only = next(iter(bench.results)) if len(bench.results) == 1 else None
            for row, metrics in rows.items():
                stem = metric_stem("eval", bench.name, row, only)
                if stem in stems:
                    found[stem] = metrics
        if found:
            return found, f"step 0: the base model, from the baseline run {baseline.folder}"
    return {}, ""


def training_section(run: Run, baselines: Sequence[Run]) -> dict:
    loss_chart, loss_keys = charts.loss_curves(run.log_history)
    step_zero, step_zero_note = _step_zero(run, baselines)
    eval_chart, panels = charts.eval_curves(run.log_history, step_zero)
    notes = [f"log: {run.trainer_state_file} ({len(run.log_history)} entries)"]
    if step_zero_note:
        notes.append(step_zero_note)
    elif eval_chart and not any(
        e.get("step") == 0 for e in run.log_history if any(k.startswith("eval_") for k in e)
    ):
        notes.append(
            "no step-0 evaluation in the log: pass the base model's eval run as --baseline to draw it"
        )
    return {
        "id": "training",
        "title": "Training",
        "notes": notes,
        "loss_chart": loss_chart,
        "eval_chart": eval_chart,
        "loss_table": _table(
            ["key", "entries", "first step", "first", "last step", "last"],
            _curve_rows(run.log_history, charts.curve_keys(run.log_history, "loss")),
        ),
        "eval_table": _table(
            ["key", "entries", "first step", "first", "last step", "last"],
            _curve_rows(run.log_history, charts.curve_keys(run.log_history, "eval_")),
        ),
        "panels": len(panels),
        "has_loss": bool(loss_keys),
    }


def _curve_rows(log_history: Sequence[Mapping], keys: Sequence[str]) -> list[list[str]]:
    """Per logged key: how often it was logged and its first and last values, as logged."""
    rows = []
    for key in keys:
        points = [(e["step"], e[key]) for e in log_history if key in e and "step" in e]
        rows.append(
            [
                key,
                str(len(points)),
                str(points[0][0]),
                f"{points[0][1]:.6g}",
                str(points[-1][0]),
                f"{points[-1][1]:.6g}",
            ]
        )
    return rows


SPREAD_METRICS = (("orig_acc", "orig acc"), ("aug_acc", "aug acc"), ("brittleness", "brittleness"))


def seed_spread_section(summary: Mapping[str, Mapping[str, Mapping]], note: str) -> dict:
    """Every variant of an experiment run over several seeds (`hardpos demo`'s results.json: variant -> dataset ->
    rate, `<rate>_std`, `num_seeds`), as mean ± sample std over the seeds: a page about one seed's models
    must show how far another seed moves them."""
    first = next(iter(summary.values()))
    datasets = [name for name in first if "[" not in name and all(name in v for v in summary.values())]
    header = ["variant", "set", "seeds", *(label for _, label in SPREAD_METRICS)]
    rows = []
    for variant, by_set in summary.items():
        for name in datasets:
            m = by_set[name]
            cells = [
                f"{100 * m[k]:.1f}" + (f" ± {100 * m[f'{k}_std']:.1f}" if m.get("num_seeds", 1) > 1 else "")
                for k, _ in SPREAD_METRICS
            ]
            rows.append([variant, name, str(m.get("num_seeds", 1)), *cells])
    notes = [
        note,
        "Rates in %: mean ± sample std over the seeds (a variant trained once shows its one value).",
    ]
    return {
        "id": "seed-spread",
        "title": "All variants over seeds",
        "table": _table(header, rows, numeric_from=2),
        "notes": [n for n in notes if n],
    }


def build_report(
    run: Run,
    *,
    baselines: Sequence[Run] = (),
    resamples: int = DEFAULT_RESAMPLES,
    examples: int = NUM_EXAMPLES,
    min_rows: int = by_replacement.MIN_ROWS,
    fetch_data: bool = False,
    seed_spread: Mapping[str, Mapping[str, Mapping]] | None = None,
    seed_spread_note: str = "",
) -> str:
    """The whole page for one run, each of `baselines` compared with it (paired, on the same rows);
    `fetch_data` lets it download the Hub datasets the run names (see `scored_rows.load_dataset_rows`);
    `seed_spread` (`hardpos demo`'s results: variant -> set -> rates with their std over seeds) adds every
    variant's spread, with `seed_spread_note` saying where the page's own run sits in it."""
    charts.require_matplotlib()
    deltas, baseline_notes = baseline_deltas(run, baselines, resamples)
    for delta in (d for found in deltas.values() for d in found):
        if delta.bench.carries_rates:  # the baseline's interval as this page computes the run's
            scored = {
                c: ScoredRows(c, delta.bench.read_scores(c), None, "")
                for c in delta.bench.results
                if delta.bench.scores_file(c) is not None
            }
            delta.metrics.update(with_intervals(delta.bench, scored, resamples)[0].get(delta.row, {}))
    label = run_labels([*baselines, run])[-1] if baselines else run.short_model()
    context = Context(baselines, label, deltas, resamples, examples, min_rows, fetch_data)
    s = run.settings
    notes = [
        f"{run.kind} run in {run.folder}",
        f"model: {describe_model(run.model, run.run['model_identity'])}"
        if run.run.get("model_identity")
        else f"model: {run.model}",
    ]
    if s:
        notes.append(
            "settings: " + ", ".join(f"{k} {v}" for k, v in s.items() if isinstance(v, (str, int, float)))
        )
    sections, boxes = [], []
    training = training_section(run, baselines) if run.kind == "finetune" else None
    for bench in run.benchmarks.values():
        if bench.carries_rates:
            section, found = benchmark_section(bench, context)
            sections.append(section)
            boxes.extend(found)
        else:
            sections.append(other_section(bench))
    means = [
        f"{group}: unweighted mean of {mean['metric']} over {mean['num_datasets']} datasets = "
        f"{100 * mean['value']:.1f}%"
        for group, mean in run.group_means.items()
    ]
    toc = [{"id": "at-a-glance", "title": "At a glance"}] if boxes else []
    spread = seed_spread_section(seed_spread, seed_spread_note) if seed_spread else None
    if spread:
        toc.append({"id": spread["id"], "title": spread["title"]})
    if training:
        toc.append({"id": training["id"], "title": training["title"]})
    toc += [{"id": sec["id"], "title": sec["title"]} for sec in sections]
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            title=label,
            sentence=headline_sentence(label, boxes),
            notes=notes,
            baseline_notes=baseline_notes,
            toc=toc,
            headlines=boxes,
            seed_spread=spread,
            training=training,
            sections=sections,
            means=means,
        )
    )
