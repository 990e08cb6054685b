"""One evaluated dataset of a finished run (a *benchmark*) and the rows of it the cross-run table shows.

A *benchmark* is one evaluated dataset of a run (`runs.load_run` finds them); a *figure* is one row of it
that the cross-run table shows (REPLACE's pooled paper column, SWAP's only config, ...), with the rows it
covers, so the paired test can draw exactly those rows from both runs. Its per-row scores
(`scores-<config>.parquet`) are read here, each checked against the figures saved beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..columns import REPLACE_SUBSETS
from ..errors import UserInputError
from ..evaluation.aggregation import describe, replace_aggregates
from ..evaluation.section import Section
from ..metrics import METRIC_NAMES, outcomes_disagree
from ..output_folder import METRICS_FILE

OUTCOME_COLUMNS = {
    "original_accuracy": "original_correct",
    "augmented_accuracy": "augmented_correct",
    "brittleness": "brittle",
}
KNOWN_NAMES = {"replace": "REPLACE", "swap": "SWAP"}  # the paper's column names
SCORE_COLUMNS = ("original_score", "negative_score", "positive_score")


@dataclass
class Figure:
    """One row of a benchmark as the cross-run table shows it: its metrics and how they were obtained."""

    label: str  # the column group: "REPLACE", "SWAP", "sugarcrepe_pp [swap_att]"
    row: str  # the metrics.json row it is, e.g. "pooled(attributes,relations)" or "default"
    metrics: dict[str, Any]
    configs: list[str]  # the configs whose rows it counts (what a paired test draws)
    aggregation: str  # the caption line: how the figure aggregates rows (the same for every run of it)
    interval: str | None = None  # how this run's saved interval was obtained, if it has one
    recomputed: bool = False  # True: computed here from saved per-config rates (an older metrics.json)


@dataclass
class Benchmark:
    """One evaluated dataset of a run: its saved results and, for hard positives, its per-row scores."""

    name: str
    data: dict[str, Any]  # a `hardpos eval` metrics.json, or a suite / trainer section, as saved
    section: Section  # its result, read (upgraded and checked) by `Section.from_dict`
    folder: Path | None = None  # where scores-<config>.parquet live (None: no per-row scores)
    _scores: dict[str, dict[str, np.ndarray]] = field(
        default_factory=dict, repr=False
    )  # read_scores, once each

    @property
    def task(self) -> str:
        return self.section.task or "other"

    @property
    def results(self) -> dict[str, dict]:
        return self.section.results

    @property
    def aggregates(self) -> dict[str, dict]:
        return self.section.aggregates

    @property
    def provenance(self) -> dict[str, dict]:
        return self.section.provenance

    @property
    def carries_rates(self) -> bool:
        """Whether its rows are the hard-positive rates (Original/Augmented Accuracy, Brittleness), whose
        per-row outcomes `scores-<config>.parquet` keeps (`Section.carries_rates`)."""
        return self.section.carries_rates

    def display_name(self) -> str:
        return KNOWN_NAMES.get(self.name.lower(), self.name)

    def cross_check(self, where: Path) -> None:
        """Refuse a benchmark whose figures are not those of its rows (`where`: the file that holds it): each
        config's saved rates and row count against its per-row outcomes (when saved; `read_scores`), and
        REPLACE's pooled column and macro mean against what the configs' rates give (`replace_aggregates`).
        A folder edited after the run, or mixing two runs, would otherwise be shown as a result."""
        if not self.carries_rates:
            return
        for config in self.results:
            if self.scores_file(config) is not None:
                self.read_scores(config)
        for name, expected in replace_aggregates(self.results).items():
            saved = self.aggregates.get(name)
            if saved is None:
                continue
            for metric in (*METRIC_NAMES, "num_examples"):
                if metric in saved and not abs(float(saved[metric]) - float(expected[metric])) <= 1e-9:
                    raise UserInputError(
                        f"{where}: field aggregates.{name}.{metric} is {saved[metric]!r} but its configs' results give "
                        f"{expected[metric]!r}; the folder was edited or mixes two runs (rerun hardpos eval)"
                    )

    def figures(self, all_rows: bool = False) -> list[Figure]:
        """The rows the cross-run table shows: the paper's column where the data has one, else each config;
        with `all_rows`, every config (and every other task's every row) as well.

        REPLACE's paper column is the aggregate row marked `paper_column` (the pooled fraction over
        both subsets); a metrics.json written before that row existed gets it recomputed here from the
        saved per-subset rates and row counts (exact: each rate is a count over rows), flagged as such.
        """
        if not self.carries_rates:
            return self._other_task_figures(all_rows)
        paper = [
            (name, row)
            for name, row in self.aggregates.items()
            if isinstance(row.get("aggregation"), dict) and row["aggregation"].get("paper_column")
        ]
        recomputed = False
        if not paper and all(s in self.results for s in REPLACE_SUBSETS):
            paper = [
                (n, r)
                for n, r in replace_aggregates(self.results).items()
                if r["aggregation"]["paper_column"]
            ]
            recomputed = True
        if paper:
            name, row = paper[0]
            how = {k: v for k, v in row["aggregation"].items() if k != "interval"}
            column = Figure(
                self.display_name(),
                name,
                row,
                list(row["aggregation"]["configs"]),
                describe(name, how),
                row["aggregation"].get("interval"),
                recomputed,
            )
            return [column, *(self._config_figures() if all_rows else [])]
        return self._config_figures()

    def _config_figures(self) -> list[Figure]:
        """One figure per config of a hard-positive set, each the fraction of its own rows."""
        tie_rule = self.section.tie_rule
        figures = []
        for config, row in self.results.items():
            label = self.display_name() if len(self.results) == 1 else f"{self.display_name()} [{config}]"
            how = f"{label} = fraction of the {row.get('num_examples', '?')} rows of config {config!r}"
            figures.append(
                Figure(
                    label,
                    config,
                    row,
                    [config],
                    how + (f" ({tie_rule})" if tie_rule else ""),
                    self.provenance.get(config, {}).get("interval")
                    or self.provenance.get(config, {}).get("bootstrap"),
                )
            )
        return figures

    def _other_task_figures(self, all_rows: bool = False) -> list[Figure]:
        """Caption selection, Winoground, zero-shot: the aggregates (e.g. a category mean), else each row; with
        `all_rows`, every row (SugarCrepe's subsets, VALSE's pieces) and then the aggregates."""
        rows = {**self.results, **self.aggregates} if all_rows else (self.aggregates or self.results)
        how = self.section.aggregation
        return [
            Figure(
                self.display_name() if len(rows) == 1 else f"{self.display_name()} [{name}]",
                name,
                row,
                [name],
                f"{self.display_name()}: {how}" if how else self.display_name(),
            )
            for name, row in rows.items()
        ]

    def data_identity(self, config: str) -> tuple | None:
        """What proves two runs scored the same rows of `config`: content digest (or Hub commit), split and
        row count; None when unknown (a Hub revision unknown offline, or no provenance saved)."""
        prov = self.provenance.get(config, {})
        dataset = prov.get("dataset", {})
        ident = dataset.get("sha256") or dataset.get("revision") or dataset.get("fingerprint")
        if not ident:
            return None
        return (str(ident), prov.get("split"), self.results.get(config, {}).get("num_examples"))

    def scores_file(self, config: str) -> Path | None:
        if self.folder is None:
            return None
        if any(char in config for char in "/\\\0"):  # it names a file in this folder, never a path out of it
            raise UserInputError(
                f"{self.folder / METRICS_FILE}: config name {config!r} holds a path separator"
            )
        path = self.folder / f"scores-{config}.parquet"
        return path if path.is_file() else None

    def read_scores(self, config: str) -> dict[str, np.ndarray]:
        """The saved per-row table of one config as arrays (scores, outcomes, image ids when present); a file
        that is no parquet, or lacks a column or has one of the wrong type, is one line naming it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if config in self._scores:
            return self._scores[config]
        path = self.scores_file(config)
        if path is None:
            raise UserInputError(
                f"{self.folder}: no scores-{config}.parquet (per-row scores of config {config!r})"
            )
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as err:
            raise UserInputError(f"{path}: cannot read as parquet ({str(err).splitlines()[0]})") from err
        columns = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
        for column in (*SCORE_COLUMNS, *OUTCOME_COLUMNS.values()):
            values = columns.get(column)
            if values is None or values.dtype.kind not in "biuf":
                found = "missing" if values is None else f"of type {values.dtype}"
                raise UserInputError(f"{path}: column {column!r} is {found}, expected numbers")
            if values.dtype.kind == "f" and not np.isfinite(values).all():
                raise UserInputError(
                    f"{path}: column {column!r} holds NaN or infinity in row "
                    f"{int(np.flatnonzero(~np.isfinite(values))[0])}"
                )
        if config in self.results:  # the saved figures must be those of these rows (not edited, not mixed)
            why = outcomes_disagree(self.results[config], self.outcome_arrays(columns))
            if why is not None:
                raise UserInputError(
                    f"{path}: {why} for config {config!r} in {self.folder / METRICS_FILE}; the "
                    "folder was edited or mixes two runs (rerun hardpos eval)"
                )
        self._scores[config] = columns
        return columns

    @staticmethod
    def outcome_arrays(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each rate's per-row 0/1 outcome from a scores table read by `read_scores`."""
        return {name: columns[column].astype(np.float64) for name, column in OUTCOME_COLUMNS.items()}

    def outcomes(self, configs: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray | None] | None:
        """The per-row 0/1 outcome of each rate over `configs`' rows (in order), and the rows' image ids.

        None when a config's per-row scores were not saved. Image ids are None unless every config has
        them; an id shared by two configs is one image (REPLACE's subsets share Visual Genome images).
        """
        if any(self.scores_file(c) is None for c in configs):
            return None
        tables = [self.read_scores(c) for c in configs]
        each = [self.outcome_arrays(t) for t in tables]
        outcomes = {name: np.concatenate([o[name] for o in each]) for name in OUTCOME_COLUMNS}
        groups = None
        if all("image_id" in t for t in tables):
            groups = np.concatenate([t["image_id"].astype(str) for t in tables])
        return outcomes, groups
