"""A suite's groups (e.g. the 20 VTAB tasks): checked before anything is scored, then averaged.

Why its own module: a group mean is one rule (an unweighted mean over the members that were scored, on the
metrics the members' task names, with what is missing said), read by the suite's run, its table and
the retention table's VTAB column alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import UserInputError
from .section import Section
from .suite_entry import SuiteEntry
from .tasks import TASKS, get_task


def group_mean_line(group: str, mean: dict) -> str:
    """A group's mean (e.g. VTAB), naming the metric, how many datasets it averages and which are missing."""
    value = "none (no member scored)" if mean["value"] is None else f"{100 * mean['value']:.1f}%"
    fewer = {k: n for k, n in mean.get("values_over", {}).items() if n < mean["num_datasets"]}
    return (
        f"== {group}: unweighted mean of {mean['metric']} over {mean['num_datasets']} datasets "
        f"= {value} =="
        + (f" (missing: {', '.join(mean['missing'])})" if mean["missing"] else "")
        + "".join(
            f" ({k} = {100 * mean['values'][k]:.1f}% over the {n} datasets that have it: with fewer classes "
            "than k there is none, as clip_benchmark's NaN that the paper's mean skipped)"
            for k, n in fewer.items()
        )
    )


def check_groups(entries: Sequence[SuiteEntry], tasks: Mapping[str, str]) -> None:
    """Refuse, before scoring, a group whose members are of different tasks or of a task without a
    group metric (its mean would be a KeyError after every dataset was scored, or silently absent)."""
    groups: dict[str, list[SuiteEntry]] = {}
    for entry in entries:
        if entry.group:
            groups.setdefault(entry.group, []).append(entry)
    for group, members in groups.items():
        by_task: dict[str, list[str]] = {}
        for member in members:
            if member.name in tasks:
                by_task.setdefault(tasks[member.name], []).append(member.name)
        if len(by_task) > 1:
            listed = "; ".join(f"{task}: {', '.join(names)}" for task, names in by_task.items())
            raise UserInputError(f"suite group {group!r} mixes tasks ({listed}); a group mean needs one task")
        for task in by_task:
            if not get_task(task).group_metrics:
                averaged = ", ".join(
                    f"{t.name}: {t.group_metrics[0]}" for t in TASKS.values() if t.group_metrics
                )
                raise UserInputError(
                    f"suite group {group!r} is of task {task}, which has no group metric (groups average {averaged})"
                )


def _group_values(
    sections: dict[str, Section], done: Sequence[SuiteEntry], metrics: Sequence[str]
) -> tuple[dict[str, float], dict[str, int]]:
    """The unweighted mean over `done` of each metric, over the members that report it, and how many do.

    A member without a metric is one the metric does not apply to: acc@5 of a task with fewer than 5
    classes (VTAB's pcam, 2, and kitti_closest_vehicle_distance, 4). clip_benchmark 1.6.2, which the paper
    ran, gives such a task acc5 = NaN (`metrics/zeroshot_classification.py`, `evaluate`), and a mean of its
    results with pandas (`DataFrame.mean`, `skipna=True`) leaves it out, so Table 10's VTAB acc@5 is the
    mean over the tasks that have one; the count says over how many.
    """
    rows = [sections[m.name].results["all"] for m in done]
    values, counts = {}, {}
    for k in metrics:
        present = [row[k] for row in rows if k in row]
        if present:
            values[k], counts[k] = float(np.mean(present)), len(present)
    return values, counts


def group_means(sections: dict[str, Section], entries: Sequence[SuiteEntry]) -> dict[str, dict]:
    """Unweighted means over the entries of each `group` (e.g. the VTAB mean of the paper's Table 10), on
    the metrics its task's registry entry names (`Task.group_metrics`, the first one the headline)."""
    means = {}
    groups: dict[str, list[SuiteEntry]] = {}
    for entry in entries:
        if entry.group:
            groups.setdefault(entry.group, []).append(entry)
    for group, members in groups.items():
        done = [m for m in members if m.name in sections and not sections[m.name].failed]
        task = next(
            (sections[m.name].task for m in members if m.name in sections and sections[m.name].task), None
        )
        task = task or members[0].task
        metrics = TASKS[task].group_metrics if task in TASKS else ()
        metric = metrics[0] if metrics else "unknown (no member's task is known)"
        values = [sections[m.name].results["all"][metric] for m in done]
        means[group] = {
            "metric": metric,
            "value": float(np.mean(values)) if values else None,
            "num_datasets": len(values),
            "missing": [m.name for m in members if m not in done],  # failed or not run: not in the mean
        }
        means[group]["values"], means[group]["values_over"] = _group_values(
            sections, done, metrics or (metric,)
        )
    return means
