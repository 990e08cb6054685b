"""`EvaluationReport`: one dataset's `Section` as `hardpos eval --dataset` saves and prints it, with the run it
came from (model identity, settings, environment) and where it was saved.

A thin view: the numbers, their provenance and the published rows beside them are the `Section`'s; this
adds the lines that say how they were computed (settings, model, data identity) and the `metrics.json`
layout (the section's keys, plus `model`, `dataset`, `run` and `metric_definitions` at the top).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backends import describe_model
from .definitions import SCORE_DEFINITION
from .section import Section


@dataclass
class EvaluationReport:
    """One dataset's result (`section`) for one model, the run it came from, and its output folder."""

    model: str
    dataset: str  # the dataset as given (Hub id, folder or "in-memory")
    section: Section
    run: dict = field(default_factory=dict)  # model identity, scorer settings, keys, environment
    output_dir: str | None = None  # where it was saved (a partial run may go beside --output)
    source: str = ""  # the dataset's resolved folder or Hub id (`eval_data.dataset_source`)
    saved_configs: set[str] = field(default_factory=set, repr=False)  # rows whose scores are already on disk

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
    def published(self) -> dict:
        return self.section.published

    @property
    def scores(self) -> dict[str, dict[str, np.ndarray]]:
        """Each row's per-row scores, for the tasks that keep them (`Task.row_scores`)."""
        return self.section.row_scores

    def to_dict(self) -> dict[str, Any]:
        """The `metrics.json` form: the section's keys, under the model, dataset and run they came from."""
        return {
            "model": self.model,
            "dataset": self.dataset,
            "run": self.run,
            "metric_definitions": {"score": SCORE_DEFINITION, "tie_rule": self.section.tie_rule},
            **self.section.to_dict(),
        }

    def table(self) -> str:
        return "\n".join(
            [self.section.table(), *self.settings_lines(), f"model: {self.model_line()}", *self.data_lines()]
        )

    def settings_lines(self) -> list[str]:
        """How the scores were computed (definition, precision, device, text length)."""
        settings = self.run.get("settings", {})
        if not settings:
            return []
        line = (
            f"scores: {SCORE_DEFINITION}; {settings.get('precision')} on {settings.get('device')}, "
            f"text max_length {settings.get('max_length')}"
        )
        if settings.get("image_processor"):
            line += f"; image processor: {settings['image_processor'].get('backend')} backend"
        protocol = settings.get("protocol") or {}
        if protocol.get("name") == "paper":
            line += f"; protocol paper ({'; '.join(protocol['notes'])})"
        return [line]

    def model_line(self) -> str:
        return describe_model(self.model, self.run.get("model_identity", {}))

    def data_lines(self) -> list[str]:
        """Each unit's data identity, truncation and interval method."""
        lines = []
        for unit, prov in self.provenance.items():
            data_id = prov.get("dataset") or {}
            ident = (
                data_id.get("sha256") or data_id.get("revision") or data_id.get("fingerprint") or "unknown"
            )
            source = prov.get("source", self.dataset)  # each unit names the dataset it was computed on
            line = f"data: {source} [{unit}] split {prov.get('split')} ({str(ident)[:12]}), task {self.section.task}"
            truncation = prov.get("truncation", {})
            if truncation.get("truncated_captions"):
                line += (
                    f"; {truncation['truncated_captions']} captions cut at {truncation['max_length']} tokens, "
                    f"{truncation['num_rows_made_identical_by_truncation']} rows made two captions identical"
                )
            how = prov.get("interval") or prov.get("bootstrap")  # "bootstrap": the older name
            if how:
                line += f"; CI: {how}"
            lines.append(line)
        return lines
