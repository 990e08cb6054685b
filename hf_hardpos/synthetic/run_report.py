"""`hardpos compare` and `hardpos report` on the demo's models, as a user runs them on their own evaluations.

The demo's eval sets are saved as REPLACE- and SWAP-layout folders (`eval_data/`); the first seed's
`contrastive`, `hn` and `hp+hn` models are scored on them by the package's suite (`eval/<variant>/`,
the output folder of `hardpos eval --suite`); then `compare.md` holds the paper's two controlled
comparisons, each with the package's paired tests over images (`hardpos compare`):

- `hp+hn` against `hn`: what adding hard positives to hard-negative fine-tuning changes (Kamath et al.,
  Table 1 (c), Our HN vs Our HP+HN);
- `hn` against `contrastive`: what adding hard negatives to contrastive fine-tuning changes.

Never a fine-tuned model against the pretrained one: that difference holds everything fine-tuning
does and would credit it to the loss term. `report.html` is `hardpos report` of the `hp+hn` model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from hf_hardpos.synthetic.findings import COMPARISONS
from hf_hardpos.synthetic.runtime import quiet_libraries, torch_threads

REPORTED_VARIANT = "hp+hn"
REPORT_BASELINE = (
    "hn"  # the report shows hp+hn beside hn, with paired tests: hard positives added, nothing else
)


def write_run_report(
    output_dir: Path,
    eval_sets: dict,
    seed: int,
    eval_seed: int,
    threads: int,
    log: Callable[[str], None],
    seed_spread: dict | None = None,
) -> list[str]:
    """Write `compare.md` (and `report.html` with matplotlib) from suite runs of seed `seed`'s models;
    `seed_spread` (the demo's results: every variant, mean and std over seeds) is shown in the report too.

    Returns the names of the files written.
    """
    import datasets

    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # "Creating parquet", "Generating test split": one line per stage instead
    began = time.perf_counter()
    try:
        with torch_threads(threads), quiet_libraries():
            runs = _suite_runs(output_dir, eval_sets, seed, eval_seed)
        return _pages(output_dir, runs, seed, log, seed_spread)
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
        log(f"[report] {time.perf_counter() - began:.1f} s (not in the experiment's total)")


def _suite_runs(output_dir: Path, eval_sets: dict, seed: int, eval_seed: int) -> dict:
    """Save the eval sets in the benchmarks' layout and score each compared variant on them with the suite."""
    from hf_hardpos import columns
    from hf_hardpos.evaluation.suite import SuiteEntry, run_suite
    from hf_hardpos.evaluation.tasks import HARD_POSITIVE
    from hf_hardpos.reporting.runs import load_run

    data = output_dir / "eval_data"
    layout = {
        "replace": {subset: f"replace_{subset}" for subset in columns.REPLACE_SUBSETS},
        "swap": {"default": "swap"},
    }
    for folder, configs in layout.items():
        for config_name, name in configs.items():
            eval_sets[name].to_parquet(
                str(data / folder / "data" / config_name / "test-00000-of-00001.parquet")
            )
        (data / folder / "README.md").write_text("---\nconfigs:\n" + "".join(
            f"- config_name: {c}\n  data_files:\n  - split: test\n    path: data/{c}/test-*.parquet\n" for c in configs
        ) + f"---\nThe demo's synthetic {folder.upper()} set (seed {eval_seed}).\n")  # fmt: skip
    entries = [SuiteEntry(folder, str(data / folder), HARD_POSITIVE) for folder in layout]
    variants = sorted({name for a, b, _ in COMPARISONS for name in (a, b)})
    runs = {}
    for variant in variants:
        model = output_dir / "models" / variant / f"seed-{seed}"
        run_suite(
            str(model), entries, output_dir=output_dir / "eval" / variant, progress=False, log=lambda _: None
        )
        runs[variant] = load_run(output_dir / "eval" / variant)
    return runs


def _pages(
    output_dir: Path, runs: dict, seed: int, log: Callable[[str], None], seed_spread: dict | None
) -> list[str]:
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.reporting.compare import compare_runs
    from hf_hardpos.reporting.compare_formats import render
    from hf_hardpos.reporting.html import build_report

    sections = [
        f"# The demo's controlled comparisons (seed {seed}'s models, `hardpos compare`)",
        "",
        (
            "Each table compares two fine-tunes from the same pretrained model on the same captions that differ in "
            "one loss term; the row `B - A` carries the paired tests over images. The spread over seeds of the same "
            "differences is in results.md."
        ),
    ]
    for a, b, title in COMPARISONS:
        sections += ["", f"## {b} vs {a}: {title}", "", render(compare_runs([runs[a], runs[b]]), "markdown")]
    (output_dir / "compare.md").write_text("\n".join(sections) + "\n")
    try:
        page = build_report(
            runs[REPORTED_VARIANT],
            baselines=[runs[REPORT_BASELINE]],  # the paper's Table 1 (c)
            seed_spread=seed_spread,
            seed_spread_note=f"The page's runs are seed {seed}'s models; the demo's results.json.",
        )
    except UserInputError as err:  # matplotlib is missing (an incomplete install)
        (output_dir / "report.html").unlink(missing_ok=True)
        log(f"[report] no report.html: {err}")
        return ["compare.md"]
    (output_dir / "report.html").write_text(page, encoding="utf-8")
    log(
        f"[report] seed {seed}'s models scored by the suite into {output_dir / 'eval'}; compare.md (hp+hn vs hn, "
        f"hn vs contrastive, paired tests over images) and report.html ({REPORTED_VARIANT}) read from there"
    )
    return ["compare.md", "report.html"]
