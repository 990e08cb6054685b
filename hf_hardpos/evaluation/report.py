"""`EvaluationReport`: what `evaluate_model` measured, its table, its `metrics.json` and resume merge."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..metrics import augmented_correct, brittle, original_correct
from ..provenance import describe_model
from .. import output_folder
from .aggregation import describe_all
from .definitions import SCORE_DEFINITION
from ..tables import TIE_RULE, metrics_table, published_table


@dataclass
class EvaluationReport:
    """What `evaluate_model` measured: per-config metrics, their provenance, aggregates, per-row scores.

    `provenance[config]` holds the resume key of that config and the inputs it was computed from; a
    saved config is reused only when a rerun would compute the same key.
    """

    model: str
    dataset: str
    source: str = ""  # the dataset's resolved folder or Hub id (`dataset_source`)
    output_dir: str | None = None  # where it was saved (a partial run may go beside --output)
    run: dict = field(default_factory=dict)  # model identity, scorer settings, environment
    results: dict[str, dict] = field(default_factory=dict)
    provenance: dict[str, dict] = field(default_factory=dict)
    aggregates: dict[str, dict] = field(default_factory=dict)
    published: dict = field(default_factory=dict)  # a known paper row beside ours (`evaluation.published_rows.beside_ours`)
    scores: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    saved_configs: set[str] = field(default_factory=set, repr=False)  # scores already on disk

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "dataset": self.dataset,
            "run": self.run,
            "metric_definitions": {"score": SCORE_DEFINITION, "tie_rule": TIE_RULE},
            "results": self.results,
            "provenance": self.provenance,
            "aggregates": self.aggregates,
            "aggregation": dict(zip(self.aggregates, describe_all(self.aggregates))),
            "published": self.published,
        }

    def table(self) -> str:
        lines = [metrics_table({**self.results, **self.aggregates}), f"rates: {TIE_RULE}", *self.settings_lines()]
        if self.published:
            lines.insert(1, published_table(self.published))
        lines.append(f"model: {self.model_line()}")
        return "\n".join([*lines, *self.data_lines()])

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
        """Each config's data identity, truncation and interval method, then the aggregation rule."""
        lines = []
        for config, prov in self.provenance.items():
            data_id = prov.get("dataset", {})
            ident = data_id.get("sha256") or data_id.get("revision") or data_id.get("fingerprint") or "unknown"
            source = prov.get("source", self.dataset)  # each config names the dataset it was computed on
            line = f"data: {source} [{config}] split {prov.get('split')} ({str(ident)[:12]})"
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
        lines.extend(describe_all(self.aggregates))
        return lines

    def save(self, output_dir: str | Path) -> Path:
        """Write one `scores-<config>.parquet` per config (row, s_c, s_n, s_p, outcomes), then `metrics.json`.

        Every file is written under a temporary name and renamed (`output_folder`), `metrics.json`
        last, so an interrupted save never leaves a config listed whose scores are missing. Callers
        hold the folder's lock (`evaluate_model` does, from reading what is saved to its last write).
        """
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        for config, s in self.scores.items():
            if config in self.saved_configs:
                continue
            target = output_dir / f"scores-{config}.parquet"
            table = {
                "row": np.arange(len(s["original"])),
                "original_score": s["original"],
                "negative_score": s["negative"],
                "positive_score": s["positive"],
                "original_correct": original_correct(s["original"], s["negative"]),
                "augmented_correct": augmented_correct(s["original"], s["negative"], s["positive"]),
                "brittle": brittle(s["original"], s["negative"], s["positive"]),
            }
            if "image_id" in s:
                table["image_id"] = s["image_id"]
            with output_folder.atomic_path(target) as partial:
                pq.write_table(pa.table(table), partial)
            self.saved_configs.add(config)
        output_folder.write_json(output_dir / "metrics.json", self.to_dict())
        return output_dir

    def merge_saved(self, output_dir: str | Path, keys: dict[str, str | None], log=print) -> None:
        """Take over the configs saved in `output_dir` that are still valid.

        A requested config is reused when its saved key equals `keys[config]`; otherwise it is
        recomputed, and the reason is logged. Configs saved earlier but not requested now are kept
        (one output folder collects a model's configs across runs) if they were computed with the
        same model content and scorer settings on the same dataset (`source`); otherwise they are
        dropped, with a message, so a config of another dataset is never reported as this one's.
        """
        saved_file = Path(output_dir) / "metrics.json"
        if not saved_file.exists():
            return
        saved = json.loads(saved_file.read_text())
        same_run = saved.get("run", {}).get("key") == self.run.get("key") and self.run.get("key") is not None
        for config, metrics in saved.get("results", {}).items():
            prov = saved.get("provenance", {}).get(config, {})
            if config in keys:
                if keys[config] is None or prov.get("key") != keys[config]:
                    log(f"{config}: saved scores in {output_dir} came from other inputs or settings "
                        f"({_what_differs(prov, self.run, keys[config])}); recomputing")
                    continue
            elif not same_run:
                log(f"{config}: dropped from {saved_file.name}: computed with another model or other settings")
                continue
            elif prov.get("source") != self.source:
                log(f"{config}: dropped from {saved_file.name}: computed on {prov.get('source', saved.get('dataset'))}, "
                    f"not on {self.source}")
                continue
            scores_file = Path(output_dir) / f"scores-{config}.parquet"
            if not scores_file.exists():
                log(f"{config}: {scores_file.name} is missing; recomputing")
                continue
            table = pq.read_table(scores_file).to_pydict()
            self.results[config] = metrics
            self.provenance[config] = prov
            self.scores[config] = {
                "original": np.asarray(table["original_score"]),
                "negative": np.asarray(table["negative_score"]),
                "positive": np.asarray(table["positive_score"]),
            }
            if "image_id" in table:
                self.scores[config]["image_id"] = np.asarray(table["image_id"])
            self.saved_configs.add(config)
            why = "same model, dataset content and settings" if config in keys else "kept from an earlier run, same model and settings"
            log(f"{config}: reusing the scores saved in {output_dir} ({why})")


def _what_differs(saved_provenance: dict, run: dict, new_key: str | None) -> str:
    if new_key is None:
        return "a Hub revision is unknown offline, so equality cannot be proven"
    saved_parts = saved_provenance.get("key_parts", {})
    current_parts = {"model": run.get("model_identity"), "settings": run.get("settings_key")}
    differing = [name for name, value in current_parts.items() if saved_parts.get(name) != value]
    return ", ".join(f"{name} changed" for name in differing) or "the dataset's content changed"
