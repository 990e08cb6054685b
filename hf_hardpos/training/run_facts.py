"""What a model card says beyond the latest evaluation: the base model beside the fine-tuned one (with
chance flags), and what the run ran on and for how long, with which global batch.

Why: a rate alone does not say whether fine-tuning helped, nor whether the model is better than a coin.
The base model's figures come from the trainer's own step-0 evaluation (`eval_on_start=True`, logged like
every other evaluation as `eval_<set>[_<row>]_<metric>`), so both rows are measured by the same evaluator
on the same rows. Chance is 1/2 for original accuracy and 1/3 for augmented accuracy and brittleness
(Kamath et al. 2024, Sec. 3); a rate at or past chance (brittleness: at or above) is flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..evaluation.section import Section, metric_stem
from ..metrics import METRIC_NAMES
from ..tables import render_table
from .recipe import batch_layout

CHANCE = {"original_accuracy": 1 / 2, "augmented_accuracy": 1 / 3, "brittleness": 1 / 3}
SHORT = {"original_accuracy": "orig acc", "augmented_accuracy": "aug acc", "brittleness": "brittleness"}


def at_chance(metric: str, value: float) -> bool:
    """The rate is no better than chance (accuracies: at or below it; brittleness: at or above it)."""
    return value >= CHANCE[metric] if metric == "brittleness" else value <= CHANCE[metric]


def _cells(values: Mapping[str, float]) -> list[str]:
    cells = [f"{100 * values[m]:.1f}" if m in values else "" for m in METRIC_NAMES]
    flagged = [SHORT[m] for m in METRIC_NAMES if m in values and at_chance(m, values[m])]
    return [*cells, ("at or past chance: " + ", ".join(flagged)) if flagged else "better than chance"]


def base_vs_tuned(
    log_history: Sequence[Mapping[str, Any]], sections: Mapping[str, Mapping]
) -> tuple[str, int | None]:
    """A markdown table: per hard-positive set and row, the base model (the log's step-0 evaluation) and the
    fine-tuned model (the latest evaluation), rates in percent with a chance flag; and the base step (None
    when the log has no step-0 evaluation: then only the fine-tuned rows, flagged)."""
    start = next(
        (e for e in log_history if e.get("step") == 0 and any(k.startswith("eval_") for k in e)), None
    )
    rows: list[list[str]] = []
    for set_name, saved in sections.items():
        section = Section.from_dict(saved)
        if not section.carries_rates:
            continue
        unnamed = section.unnamed_row()
        for row, metrics in section.rows().items():
            label = set_name if row == unnamed else f"{set_name} / {row}"
            stem = metric_stem("eval", set_name, row, unnamed)
            if start is not None:
                base = {m: start[f"{stem}_{m}"] for m in METRIC_NAMES if f"{stem}_{m}" in start}
                if base:
                    rows.append([label, "base model (step 0)", *_cells(base)])
            tuned = {m: float(metrics[m]) for m in METRIC_NAMES if m in metrics}
            rows.append([label, f"fine-tuned (step {section.step})", *_cells(tuned)])
    if not rows:
        return "", None
    header = ["eval set", "model", *(f"{SHORT[m]} %" for m in METRIC_NAMES), "vs chance (50 / 33.3 / 33.3 %)"]
    return render_table(header, rows, markdown=True), (0 if start is not None else None)


def compute_facts(args, log_history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Where and for how long the run trained: device kind and name, processes, mixed precision, wall time."""
    import torch

    device = getattr(args, "device", None)
    kind = getattr(device, "type", str(device or "cpu"))
    name = torch.cuda.get_device_name(device) if kind == "cuda" and torch.cuda.is_available() else None
    runtime = next((e["train_runtime"] for e in reversed(log_history) if "train_runtime" in e), None)
    precision = (
        "bf16 mixed precision"
        if getattr(args, "bf16", False)
        else "fp16 mixed precision"
        if getattr(args, "fp16", False)
        else "fp32"
    )
    if kind == "cpu":
        name = _cpu_name()
    return {
        "device": f"{kind}" + (f" ({name})" if name else ""),
        "processes": int(getattr(args, "world_size", 1) or 1),
        "precision": precision,
        "runtime": f"{runtime:,.0f} s" if isinstance(runtime, (int, float)) else None,
        "steps": next((e.get("step") for e in reversed(log_history) if "train_runtime" in e), None),
    }


def _cpu_name() -> str | None:
    """The CPU's model name and the cores this process may use (Linux: /proc/cpuinfo), else the platform's."""
    import os
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(
                (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), None
            )
    except OSError:
        model = None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = model or platform.processor() or None
    return f"{model}, {cores} cores" if model else None


def global_batch(args, rows: int | None = None) -> dict[str, int]:
    """The batch one optimiser step sees: per-device batch x processes x gradient-accumulation steps,
    and (given the training set's `rows`) how many rows each epoch trains twice (`padded_rows`).

    Why on every card: the per-device batch alone makes a 2-process run's card read like a 1-process
    run's, while the contrastive losses and the learning rate depend on the global batch.
    """
    per_device, processes, accumulation = batch_layout(args)
    gathered = bool(getattr(args, "gather_across_processes", False)) and processes > 1
    return {
        "size": per_device * processes * accumulation,
        "per_device": per_device,
        "processes": processes,
        "accumulation": accumulation,
        # captions each image is contrasted with: one micro-batch, of every process when gathered
        "contrasted": per_device * (processes if gathered else 1),
        "padded_rows": padded_rows_per_epoch(rows, per_device, processes, args.dataloader_drop_last),
    }


def padded_rows_per_epoch(rows: int | None, per_device: int, processes: int, drop_last: bool) -> int:
    """Rows that each epoch trains a second time under data parallelism without `dataloader_drop_last`.

    accelerate gives every process the same number of full batches (`BatchSamplerShard`, even_batches):
    when the epoch's rows do not fill the last round of `per_device x processes`, it completes that round
    with rows from the epoch's start, which are then trained on twice. One process only gets a smaller
    last batch; with `drop_last` the incomplete round is dropped instead.
    """
    if rows is None or processes <= 1 or drop_last:
        return 0
    per_round = per_device * processes
    return -rows % per_round
