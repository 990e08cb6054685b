"""Reading finished runs back: `hardpos compare` (Table 1 across runs, paired tests) and `hardpos report`
(one self-contained HTML page per run, against its baselines).

Both read only what `hardpos eval`, `hardpos eval --suite` and fine-tuning wrote (`metrics.json`, the
per-row `scores-<config>.parquet`, `trainer_state.json`); nothing is re-scored. Modules:

- `runs`: recognise an output folder and load its benchmarks;
- `benchmark`: one evaluated dataset of a run: the figures the table shows, its per-row outcomes;
- `paired`: the paired bootstrap over images and McNemar's exact test between two runs;
- `compare`: the cross-run table (runs, paired differences, published rows);
- `compare_formats`: its text / markdown / LaTeX / CSV / JSON renderings;
- `breakdown`: rows grouped by the whole phrase replaced (or pair swapped), with Wilson intervals and type roll-ups;
- `headline`: the report's first screen per benchmark (rate, interval, chance, baseline delta and its test);
- `charts`: the report's matplotlib figures, as embedded PNG;
- `scored_rows`: a benchmark's per-row scores, the dataset rows they score, and the page's intervals;
- `html`: the report page itself, rendered from the Jinja2 templates in `templates/`.
"""
