"""Reading finished runs back: `hardpos compare` (Table 1 across runs, paired tests) and `hardpos report`
(one self-contained HTML page per run, against its baselines).

Both read only what `hardpos eval`, `hardpos eval --suite` and fine-tuning wrote (`metrics.json`, the
per-row `scores-<config>.parquet`, `trainer_state.json`); nothing is re-scored. Modules:

- `runs`: recognise an output folder and load its benchmarks, per-row outcomes and identities;
- `paired`: the paired bootstrap over images and McNemar's exact test between two runs;
- `compare`: the cross-run table and its text / markdown / LaTeX / CSV / JSON renderings;
- `breakdown`: rows grouped by the whole phrase replaced (or pair swapped), with Wilson intervals and type roll-ups;
- `headline`: the report's first screen per benchmark (rate, interval, chance, baseline delta and its test);
- `charts`: the report's matplotlib figures, as embedded PNG;
- `html`: the report page itself, rendered from the Jinja2 templates in `templates/`.
"""
