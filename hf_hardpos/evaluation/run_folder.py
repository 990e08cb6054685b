"""Which folder a dataset's results go to, and whose they may be: one `--output` per model, partial runs beside.

Why a module of its own: both refusals are about the folder, before anything is scored or reused there, and
hold for every task (`runner.run_dataset`).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserInputError
from ..model_source import ModelSource, model_location


def require_same_model(output_dir: str | Path, source: ModelSource) -> None:
    """Refuse to resume into a folder holding another model's results: merging would drop them (or, run
    concurrently, file one model's scores under the other's name). One `--output` per model."""
    saved_file = Path(output_dir) / "metrics.json"
    if not saved_file.exists():
        return
    try:
        saved = json.loads(saved_file.read_text())
    except (OSError, ValueError):
        return
    saved_identity = saved.get("run", {}).get("model_identity") or {}
    if saved.get("results") and model_location(saved_identity) not in (None, source.location):
        raise UserInputError(
            f"--output {output_dir} holds the results of another model ({saved.get('model')}); use one --output per "
            f"model, or --no-resume to replace them with {source.name}'s"
        )


def partial_run_folder(output_dir: str | Path, max_rows: int | None, log=print) -> Path:
    """Where a `--max-rows N` run saves: `output_dir`, unless that holds a fuller result (all rows, or
    more than N), which a partial run must never replace; then `output_dir/max-rows-N`, said in the log."""
    output_dir = Path(output_dir)
    saved_file = output_dir / "metrics.json"
    if max_rows is None or not saved_file.exists():
        return output_dir
    try:
        saved = json.loads(saved_file.read_text())
    except (OSError, ValueError):
        return output_dir
    saved_rows = saved.get("run", {}).get("settings", {}).get("max_rows")
    if saved.get("results") and (saved_rows is None or saved_rows > max_rows):
        beside = output_dir / f"max-rows-{max_rows}"
        held = "all rows" if saved_rows is None else f"the first {saved_rows} rows"
        log(f"{output_dir} holds a result on {held}; this --max-rows {max_rows} run is saved in {beside} instead")
        return beside
    return output_dir
