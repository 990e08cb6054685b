"""`hardpos report`: one self-contained HTML page per run (CSS inline, charts and thumbnails embedded).

For each hard-positive benchmark of the run: the table with 95% intervals, per-subset bars, the
distributions of s_c, s_n, s_p and of the margins s_c - s_n and s_p - s_n, the breakdown of augmented
accuracy and brittleness by the replacement the hard positive made (REPLACE: the word pair c -> c_p,
as the paper analyses which words a model is oversensitive to; SWAP: the attribute pair), and the most
confidently brittle rows with their image and captions. Other tasks of a suite get their table; a
fine-tuning folder gets each loss term and eval metric over steps.

Nothing is re-scored: numbers come from `metrics.json` and the per-row `scores-<config>.parquet`;
captions and images are read from the evaluated dataset, located by the identity `metrics.json`
recorded and used only if its content digest still matches (otherwise the page says so).
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import columns
from ..evaluation.aggregation import describe, pooled_from_scores
from ..errors import UserInputError
from ..metrics import brittle
from ..provenance import describe_model
from ..evaluation.tables import TIE_RULE, metrics_cells
from . import charts
from .runs import Benchmark, Run

DEFAULT_RESAMPLES = 1000
NUM_EXAMPLES = 12
MAX_PAIRS = 40
MIN_PAIR_ROWS = 5  # pairs with fewer rows are shown only when too few pairs reach this

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;
color:#1b1b1b;line-height:1.4;padding:0 16px}
h1{font-size:1.5em;margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
h3{margin-top:24px;font-size:1.08em}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#555;font-size:.85em;margin:2px 0}.chart{max-width:100%}
.examples{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:12px}
.example{border:1px solid #ddd;border-radius:6px;padding:8px;display:flex;gap:8px;font-size:.85em}
.example img{width:110px;height:auto;align-self:flex-start;border-radius:3px}
.c{color:#1a5fb4}.n_{color:#c01c28}.p{color:#26a269}
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{esc(c)}</td>' if i >= numeric_from else f"<td>{esc(c)}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def _chart(uri: str, alt: str) -> str:
    return f'<img class="chart" src="{uri}" alt="{esc(alt)}">'


@dataclass
class ScoredRows:
    """One config's per-row scores (from its parquet) and, when still readable, the dataset rows they score."""

    config: str
    scores: dict[str, np.ndarray]
    dataset: Any | None  # datasets.Dataset, first `len(scores)` rows of the evaluated split
    data_note: str  # why the dataset rows are missing ("" when present)


def load_dataset_rows(bench: Benchmark, config: str, num_rows: int, fetch: bool = False):
    """The evaluated rows of `config` (the first `num_rows`, as `--max-rows` takes them), or (None, why).

    A local folder is re-read by content and used only if its sha256 equals the one `metrics.json`
    recorded; a Hub dataset only at the recorded revision, and only with `fetch` (`hardpos report
    --fetch-data`): a run folder is anyone's, and opening it must not download whatever it names.
    """
    from ..evaluation.eval_data import load_local_split

    prov = bench.provenance.get(config, {})
    ident = prov.get("dataset", {})
    split = ident.get("split") or prov.get("split") or "test"
    unreadable = f"[{config}]: evaluated data not readable here ({{}}); captions not shown"
    if ident.get("path") and ident.get("sha256"):
        try:
            dataset, now = load_local_split(ident["path"], ident.get("config", config), split)
        except (UserInputError, OSError, ValueError) as err:
            return None, unreadable.format(str(err).splitlines()[0])
        if now["sha256"] != ident["sha256"]:
            return None, f"{ident['path']} [{config}] changed since the run (sha256 differs); captions not shown"
    elif ident.get("hub_id") and ident.get("revision") and not fetch:
        return None, f"[{config}]: captions not shown; --fetch-data downloads {ident['hub_id']} at the run's revision"
    elif ident.get("hub_id") and ident.get("revision"):
        from datasets import load_dataset

        try:
            dataset = load_dataset(ident["hub_id"], config, split=split, revision=ident["revision"])
        except Exception as err:  # noqa: BLE001 - offline, gated, deleted: the page goes on without captions
            return None, unreadable.format(str(err).splitlines()[0] if str(err) else type(err).__name__)
    else:
        return None, f"[{config}]: the run recorded no readable data identity; captions not shown"
    if len(dataset) < num_rows:
        return None, f"[{config}]: the data has {len(dataset)} rows, the run scored {num_rows}; captions not shown"
    return dataset.select(range(num_rows)), ""


def replacement_keys(dataset) -> tuple[list[str], str]:
    """Each row's replacement, and what it is: REPLACE's `replaced_phrase -> replacement`, SWAP's attribute pair,
    else the word-level difference between c and c_p (the same diff REPLACE's builder records)."""
    names = dataset.column_names
    if "replaced_phrase" in names and "replacement" in names:
        keys = [f"{a} \u2192 {b}" for a, b in zip(dataset["replaced_phrase"], dataset["replacement"])]
        return keys, "the phrase of c the hard positive replaced \u2192 its replacement (builder's word-level diff)"
    if "attributes" in names:
        keys = [" / ".join(str(a) for a in attrs) for attrs in dataset["attributes"]]
        return keys, "the attribute pair the caption binds (SWAP: the two phrases swapped around \"and\")"
    from ..data.replace import phrase_diff  # imports datasets: on use only

    keys = [" \u2192 ".join(phrase_diff(c, p)) for c, p in zip(dataset[columns.CAPTION], dataset[columns.HARD_POSITIVE])]
    return keys, "word-level difference between c and c_p (common leading and trailing words removed)"


def breakdown(keys: Sequence[str], augmented: np.ndarray, brittle: np.ndarray) -> tuple[list[list[str]], str]:
    """Rows per replacement with counts, sorted by brittleness then count; and a note on what is shown."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        by_key[key].append(index)
    stats = [(key, len(idx), float(augmented[idx].mean()), float(brittle[idx].mean())) for key, idx in by_key.items()]
    enough = [s for s in stats if s[1] >= MIN_PAIR_ROWS]
    pool, floor = (enough, MIN_PAIR_ROWS) if len(enough) >= 10 else (stats, 1)
    pool.sort(key=lambda s: (-s[3], -s[1], s[0]))
    shown = pool[:MAX_PAIRS]
    note = (f"{len(stats)} distinct replacements; shown: the {len(shown)} with the highest brittleness among those "
            f"with at least {floor} row(s), ties by row count")
    return [[k, str(n), f"{100 * a:.1f}", f"{100 * b:.1f}"] for k, n, a, b in shown], note


def brittle_confidence(original: np.ndarray, negative: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """How surely a row is brittle: the smaller gap between s_n and the two positives' scores around it.

    A brittle row has s_n strictly between s_c and s_p; the smaller of |s_c - s_n| and |s_p - s_n| is
    how far the scores would have to move to undo that. Non-brittle rows get -inf.
    """
    confidence = np.minimum(np.abs(original - negative), np.abs(positive - negative))
    return np.where(brittle(original, negative, positive), confidence, -np.inf)


def _examples(scored: Sequence[ScoredRows], count: int) -> str:
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
        record = rows.dataset[index]
        s = rows.scores
        image = record.get(columns.IMAGE)
        img = f'<img src="{charts.thumbnail(image)}" alt="row {index}">' if image is not None else ""
        cards.append(
            f'<div class="example">{img}<div><b>[{esc(rows.config)}] row {index}</b> '
            f"(confidence {confidence:.4f})<br>"
            f'<span class="c">c: {esc(record[columns.CAPTION])} <b>{s["original_score"][index]:.4f}</b></span><br>'
            f'<span class="n_">c_n: {esc(record[columns.HARD_NEGATIVE])} <b>{s["negative_score"][index]:.4f}</b></span><br>'
            f'<span class="p">c_p: {esc(record[columns.HARD_POSITIVE])} <b>{s["positive_score"][index]:.4f}</b></span>'
            "</div></div>"
        )
    if not cards:
        return _note("no brittle row with readable captions")
    return f'<div class="examples">{"".join(cards)}</div>'


def _with_intervals(bench: Benchmark, scored: Mapping[str, ScoredRows], resamples: int) -> tuple[dict[str, dict], list[str]]:
    """The table rows (configs, then aggregates) with 95% intervals: as saved, else bootstrapped here from the
    saved per-row outcomes over images (point values always exactly as saved)."""
    from ..evaluation.tasks.hard_positive import bootstrap_description
    from ..metrics import metrics_from_scores

    rows = {name: dict(m) for name, m in {**bench.results, **bench.aggregates}.items()}
    notes = []
    for config, r in scored.items():
        m = rows[config]
        if "brittleness_ci_low" in m:
            continue
        s = r.scores
        groups = s.get("image_id")
        computed = metrics_from_scores(s["original_score"], s["negative_score"], s["positive_score"], resamples, groups=groups)
        m.update({k: v for k, v in computed.items() if "_ci_" in k})
        notes.append(f"[{config}] intervals computed for this page: {bootstrap_description(resamples, groups is not None)}")
    for name, m in rows.items():
        agg = m.get("aggregation")
        if not isinstance(agg, dict) or not agg.get("paper_column") or "brittleness_ci_low" in m:
            continue
        if all(c in scored for c in agg["configs"]):
            per_config = {c: {"original": scored[c].scores["original_score"], "negative": scored[c].scores["negative_score"],
                              "positive": scored[c].scores["positive_score"],
                              **({"image_id": scored[c].scores["image_id"]} if "image_id" in scored[c].scores else {})}
                          for c in agg["configs"]}
            computed, how = pooled_from_scores(per_config, agg["configs"], resamples)
            m.update({k: v for k, v in computed.items() if "_ci_" in k})
            notes.append(f"[{name}] intervals computed for this page: {how}")
    return rows, notes


def benchmark_section(bench: Benchmark, *, resamples: int = DEFAULT_RESAMPLES, examples: int = NUM_EXAMPLES,
                      fetch_data: bool = False) -> str:
    """Everything the page shows for one hard-positive benchmark (see the module docstring)."""
    parts = [f"<h2>{esc(bench.display_name())}</h2>"]
    source = bench.data.get("dataset") or bench.data.get("source")
    if source:
        parts.append(_note(f"data: {source}"))
    scored: dict[str, ScoredRows] = {}
    data_notes = []
    for config in bench.results:
        if bench.scores_file(config) is None:
            continue
        scores = bench.read_scores(config)
        dataset, why = load_dataset_rows(bench, config, len(scores["original_score"]), fetch_data)
        scored[config] = ScoredRows(config, scores, dataset, why)
        if why:
            data_notes.append(why)
    rows, interval_notes = _with_intervals(bench, scored, resamples)
    parts.append("<h3>Rates (95% intervals)</h3>" + _table(*metrics_cells(rows, label="row")))
    parts.append(_note(f"Rates in % of rows; {TIE_RULE}. s = mean cosine similarity of image and caption embeddings."))
    for name, m in rows.items():
        agg = m.get("aggregation")
        if isinstance(agg, dict):
            parts.append(_note(describe(name, agg)))
    for config in bench.results:
        how = bench.provenance.get(config, {}).get("bootstrap")
        if how:
            parts.append(_note(f"[{config}] intervals: {how}"))
    parts.extend(_note(n) for n in interval_notes)
    parts.append("<h3>Per subset</h3>" + _chart(charts.rate_bars(rows), "rates per subset with 95% intervals"))
    if not scored:
        parts.append(_note("per-row scores were not saved with this run: no distributions, breakdown or examples"))
        return "\n".join(parts)
    parts.append("<h3>Score distributions</h3>")
    for config, r in scored.items():
        s = r.scores
        title = f"{bench.display_name()} [{config}]: {len(s['original_score'])} rows"
        parts.append(_chart(charts.score_distributions(s["original_score"], s["negative_score"], s["positive_score"], title),
                            f"score distributions of {config}"))
    parts.append("<h3>By replacement</h3>")
    for config, r in scored.items():
        if r.dataset is None:
            continue
        keys, what = replacement_keys(r.dataset)
        table, note = breakdown(keys, r.scores["augmented_correct"].astype(float), r.scores["brittle"].astype(float))
        parts.append(f"<p><b>[{esc(config)}]</b> grouped by {esc(what)}</p>")
        parts.append(_table(["replacement", "rows", "aug acc %", "brittle %"], table))
        parts.append(_note(note))
    parts.extend(_note(n) for n in data_notes)
    parts.append(f"<h3>The {examples} most confidently brittle rows</h3>")
    parts.append(_note("Brittle: s_n strictly between s_c and s_p. Confidence: min(|s_c - s_n|, |s_p - s_n|), how far "
                       "the scores would have to move to undo it."))
    parts.append(_examples(list(scored.values()), examples))
    return "\n".join(parts)


def other_section(bench: Benchmark) -> str:
    """A suite's caption-selection / Winoground / zero-shot dataset: its rows and metrics as saved."""
    rows = {**bench.results, **bench.aggregates}
    names = list(dict.fromkeys(k for m in rows.values() for k, v in m.items() if isinstance(v, (int, float))))
    table = [[name, *(f"{m[k]:.4f}" if isinstance(m.get(k), float) else str(m.get(k, "")) for k in names)]
             for name, m in rows.items()]
    parts = [f"<h2>{esc(bench.display_name())} ({esc(bench.task)})</h2>", _table(["row", *names], table)]
    for key in ("tie_rule", "aggregation"):
        if bench.data.get(key):
            parts.append(_note(f"{key.replace('_', ' ')}: {bench.data[key]}"))
    return "\n".join(parts)


def training_section(run: Run) -> str:
    parts = ["<h2>Training</h2>", _note(f"log: {run.trainer_state_file} ({len(run.log_history)} entries)")]
    for prefix, title in (("loss", "Loss terms (mean over each logging interval)"), ("eval_", "Eval metrics")):
        uri, total = charts.training_curves(run.log_history, prefix)
        if uri is None:
            parts.append(_note(f"no {title.lower()} in the log"))
            continue
        parts.append(f"<h3>{esc(title)}</h3>" + _chart(uri, title))
        if total > 24:
            parts.append(_note(f"{total} keys logged; the first 24 are shown"))
        parts.append(_table(["key", "entries", "first step", "first", "last step", "last"],
                            _curve_rows(run.log_history, prefix)))
    return "\n".join(parts)


def _curve_rows(log_history: Sequence[Mapping], prefix: str) -> list[list[str]]:
    """Per logged key of a chart: how often it was logged and its first and last values, as logged."""
    rows = []
    for key in charts.curve_keys(log_history, prefix):
        points = [(e["step"], e[key]) for e in log_history if key in e and "step" in e]
        rows.append([key, str(len(points)), str(points[0][0]), f"{points[0][1]:.6g}", str(points[-1][0]), f"{points[-1][1]:.6g}"])
    return rows


def build_report(run: Run, *, resamples: int = DEFAULT_RESAMPLES, examples: int = NUM_EXAMPLES,
                 fetch_data: bool = False) -> str:
    """The whole page for one run; `fetch_data` lets it download the Hub datasets the run names (see
    `load_dataset_rows`)."""
    charts.require_matplotlib()
    s = run.settings
    head = [f"<h1>hardpos report: {esc(run.short_model())}</h1>",
            _note(f"{run.kind} run in {run.folder}"),
            _note(f"model: {describe_model(run.model, run.run['model_identity'])}" if run.run.get("model_identity")
                  else f"model: {run.model}")]
    if s:
        head.append(_note("settings: " + ", ".join(f"{k} {v}" for k, v in s.items() if isinstance(v, (str, int, float)))))
    body = []
    if run.kind == "finetune":
        body.append(training_section(run))
    for bench in run.benchmarks.values():
        body.append(benchmark_section(bench, resamples=resamples, examples=examples, fetch_data=fetch_data)
                    if bench.is_hard_positive
                    else other_section(bench))
    for group, mean in run.group_means.items():
        body.append(_note(f"{group}: unweighted mean of {mean['metric']} over {mean['num_datasets']} datasets = "
                          f"{100 * mean['value']:.1f}%"))
    if not body:
        body.append(_note("nothing evaluated in this folder"))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>hardpos report: {esc(run.short_model())}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(head + body) + "\n</body></html>\n")
