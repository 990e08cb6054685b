"""Which folder a dataset's results go to, and whose they may be: one `--output` per model, partial runs beside.

Why a module of its own: both refusals are about the folder, before anything is scored or reused there, and
hold for every task (`runner.run_dataset`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..model_source import ModelSource, model_location
from ..output_folder import METRICS_FILE
from .section import RUN_KEYS, Section


def read_saved(
    output_dir: str | Path, log: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], Section] | None:
    """What `output_dir/metrics.json` holds for a run into it: the run's fields (`RUN_KEYS`, `run` an object
    with object `settings`) and its section, read by `Section.from_dict`. None when there is none, or
    when it cannot be read or fails a check (said in `log`): then nothing of it is reused."""
    saved_file = Path(output_dir) / METRICS_FILE
    if not saved_file.exists():
        return None
    try:
        saved = json.loads(saved_file.read_text(encoding="utf-8"))
        if not isinstance(saved, dict) or "datasets" in saved:
            raise ValueError("not one dataset's result")
        run = saved.setdefault("run", {})
        if not isinstance(run, dict) or not isinstance(run.setdefault("settings", {}), dict):
            raise ValueError("field run must be an object with object settings")
        section = Section.from_dict({k: v for k, v in saved.items() if k not in RUN_KEYS})
    except (OSError, ValueError, TypeError, RecursionError) as err:
        if log is not None:
            log(f"{saved_file} cannot be read ({type(err).__name__}: {str(err)[:200]}); recomputing")
        return None
    return saved, section


def require_same_model(output_dir: str | Path, source: ModelSource) -> None:
    """Refuse to resume into a folder holding another model's results: merging would drop them (or, run
    concurrently, file one model's scores under the other's name). One `--output` per model."""
    found = read_saved(output_dir)
    if found is None:
        return
    saved, section = found
    saved_identity = saved["run"].get("model_identity") or {}
    if section.results and model_location(saved_identity) not in (None, source.location):
        raise UserInputError(
            f"--output {output_dir} holds the results of another model ({saved.get('model')}); use one --output per "
            f"model, or --no-resume to replace them with {source.name}'s"
        )


def partial_run_folder(output_dir: str | Path, max_rows: int | None, log=print) -> Path:
    """Where a `--max-rows N` run saves: `output_dir`, unless that holds a fuller result (all rows, or
    more than N), which a partial run must never replace; then `output_dir/max-rows-N`, said in the log."""
    output_dir = Path(output_dir)
    found = read_saved(output_dir) if max_rows is not None else None
    if found is None:
        return output_dir
    saved, section = found
    saved_rows = saved["run"]["settings"].get("max_rows")
    if not (saved_rows is None or isinstance(saved_rows, int)):
        return output_dir
    if section.results and (saved_rows is None or saved_rows > max_rows):
        beside = output_dir / f"max-rows-{max_rows}"
        held = "all rows" if saved_rows is None else f"the first {saved_rows} rows"
        log(
            f"{output_dir} holds a result on {held}; this --max-rows {max_rows} run is saved in {beside} instead"
        )
        return beside
    return output_dir
