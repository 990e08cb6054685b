"""Your own hard-positive evaluation set, from a CSV or JSONL table of image paths and captions.

Why: `hardpos eval --dataset FOLDER` reads a Hub-style folder (parquet shards + README `configs:`);
writing one by hand is easy to get subtly wrong (a README without `configs:`, images stored as paths
that only resolve on one machine). This builder takes one table and writes that folder through the
same transaction as every other builder (`hub_folder.export_folder`: images decoded first, bytes
embedded and checked, README last).

Table columns (a header row for CSV; one JSON object per line for JSONL):

- `image`: path of the image file, relative to `--images-dir` (default: the table's folder);
- `caption`, `hard_negative`, `hard_positive`: the three captions of the row (non-empty);
- `image_id` (optional): rows with the same id share one image (default: the image path);
- `config` (optional): the config the row belongs to (default `default`), e.g. `attributes`.
"""

from __future__ import annotations

import csv
import errno
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from .. import columns
from ..errors import UserInputError
from ..names import require_plain_name
from .build_report import BuildReport
from .dataset_card import CardFacts
from .hub_folder import BuildOptions, ConfigBuild, export_folder, row_features
from .image_sources import ImageSpec, UnsafePathError, path_under

REQUIRED = (columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS)
OPTIONAL = (columns.IMAGE_ID, "config")
DEFAULT_CONFIG = "default"


def read_table(path: str | Path) -> list[dict]:
    """The rows of a `.csv` or `.jsonl` table, each with its 1-based line number (`line`).

    Every line counts: a blank JSONL line is an error naming it, never skipped (skipping would shift
    nothing here, but a silently short table is still a wrong evaluation set).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserInputError(f"--table {path}: no such file")
    try:
        rows = _read_rows(path)
    except UnicodeDecodeError as err:
        raise UserInputError(
            f'{path}: byte {err.start} is not UTF-8 (save the table as UTF-8, e.g. Excel\'s "CSV UTF-8")'
        ) from None
    except csv.Error as err:
        raise UserInputError(f"{path}: not a readable CSV table ({err})") from None
    if not rows:
        raise UserInputError(f"{path}: no rows")
    return rows


def _fields(pairs: list[tuple[str, Any]], where: str) -> dict:
    """A JSON object's fields, refusing a field given twice (`json` would keep the last one silently)."""
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise UserInputError(f"{where} names field(s) {repeated} more than once")
    return dict(pairs)


def _read_rows(path: Path) -> list[dict]:
    """`read_table`'s rows. Read as `utf-8-sig`: Excel's "CSV UTF-8" starts with a byte-order mark, which
    would otherwise become part of the first column's name (`'\\ufeffimage'`)."""
    rows: list[dict] = []
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            repeated = sorted({name for name in header if header.count(name) > 1})
            if repeated:  # DictReader would keep the last one's cells silently
                raise UserInputError(f"{path}: line 1 names column(s) {repeated} more than once")
            for row in reader:
                if None in row:  # restkey: cells beyond the header
                    raise UserInputError(
                        f"{path}: line {reader.line_num} has {len(header) + len(row[None])} cells, "
                        f"the header names {len(header)}"
                    )
                rows.append({**row, "line": reader.line_num})
    elif path.suffix.lower() in (".jsonl", ".json"):
        for number, text in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
            if not text.strip():
                raise UserInputError(f"{path}: line {number} is blank (one JSON object per line)")
            try:
                where = f"{path}: line {number}"
                value = json.loads(text, object_pairs_hook=lambda pairs, where=where: _fields(pairs, where))
            except json.JSONDecodeError as err:
                raise UserInputError(f"{path}: line {number} is not valid JSON ({err.msg})") from err
            if not isinstance(value, dict):
                raise UserInputError(f"{path}: line {number} is not a JSON object")
            rows.append({**value, "line": number})
    else:
        raise UserInputError(f"--table {path}: expected a .csv or .jsonl file")
    return rows


def check_rows(path: Path, rows: Sequence[dict]) -> None:
    """Every required field present and a non-empty string, no unknown field; errors name line and field."""
    known = {*REQUIRED, *OPTIONAL, "line"}
    csv = path.suffix.lower() == ".csv"  # a CSV's fields are its header's: a wrong or missing one is line 1's
    for row in rows:
        unknown = sorted(set(row) - known)
        if unknown:
            where = "line 1 (the header)" if csv else f"line {row['line']}"
            raise UserInputError(
                f"{path}: {where} has unknown field(s) {unknown}; known: {[*REQUIRED, *OPTIONAL]}"
            )
        for field in REQUIRED:
            value = row.get(field)
            if csv and field not in row:
                raise UserInputError(f"{path}: line 1 (the header) has no field {field!r}")
            if not isinstance(value, str) or not value.strip():
                raise UserInputError(f"{path}: line {row['line']}, field {field!r}: missing or empty")
        for field, value in row.items():
            if isinstance(value, str) and not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:  # a JSON escape of half a surrogate pair (\ud800): no character
                    raise UserInputError(
                        f"{path}: line {row['line']}, field {field!r}: holds half of a UTF-16 "
                        "surrogate pair, which is no character"
                    ) from None
        if row.get("config") not in (None, ""):  # it names a folder (`data/<config>/`) and a scores file
            require_plain_name(row["config"], f"{path}: line {row['line']}, field 'config'")


def _images(rows: Sequence[dict], images_dir: Path, table: Path, skip_missing: bool) -> ImageSpec:
    """Each distinct image found and decoded before anything is written; a missing or unreadable one
    is an error naming its file and line (or, with `skip_missing`, its rows are dropped and counted)."""
    found: dict[str, tuple[Path, str]] = {}
    missing: list[str] = []
    for row in rows:
        key = row[columns.IMAGE_ID]
        try:  # the table may be anyone's: no path of it leaves the image folder
            local = path_under(images_dir, row[columns.IMAGE])
        except UnsafePathError as err:
            raise UserInputError(f"{table}: line {row['line']}, field {columns.IMAGE!r}: {err}") from None
        if key in found:
            if found[key][0] != local:
                raise UserInputError(
                    f"{table}: line {row['line']}: image_id {key!r} names two files "
                    f"({found[key][0]} and {local})"
                )
            continue
        if key in missing:
            continue
        try:
            if not local.is_file():  # a FIFO or device would block the read forever; a folder is no image
                raise FileNotFoundError(errno.ENOENT, "missing, or not a regular file", str(local))
            with Image.open(local) as image:
                image.load()
        except (
            OSError,
            UnidentifiedImageError,
            Image.DecompressionBombError,
        ) as err:  # bomb: over PIL's pixel limit
            if not skip_missing:
                raise UserInputError(
                    f"{table}: line {row['line']}: image {local} cannot be read "
                    f"({type(err).__name__}: {getattr(err, 'strerror', None) or err}); fix it or "
                    "pass --skip-missing"
                ) from err
            missing.append(key)
            continue
        found[key] = (local, row[columns.IMAGE])
    return ImageSpec(found, missing)


def _refuse_inputs_the_build_replaces(table: Path, images: ImageSpec, output_dir: Path) -> None:
    """The build replaces `OUT/data/`, `OUT/README.md` and `OUT/build_report.json` (`hub_folder.export_folder`):
    a table or image there would be deleted by the build that reads it. Refused before anything is written."""
    replaced = [(output_dir / name).resolve() for name in ("data", "README.md", "build_report.json")]
    for path in (table, *(local for local, _ in images.found.values())):
        hit = next((r for r in replaced if path.resolve().is_relative_to(r)), None)
        if hit is not None:
            raise UserInputError(
                f"{table}: input {path} is inside {hit}, which this build replaces; "
                "choose another --output (or move the input)"
            )


def export_own(
    table: str | Path,
    output_dir: str | Path,
    *,
    images_dir: str | Path | None = None,
    split: str = "test",
    **settings: Any,
) -> BuildReport:
    """Write the table's rows as a Hub folder `hardpos eval --dataset` reads: one config per `config` value;
    ``settings``: the fields of :class:`~hf_hardpos.data.hub_folder.BuildOptions`."""
    options = BuildOptions(**settings)
    table = Path(table).expanduser()
    rows = read_table(table)
    check_rows(table, rows)
    images_dir = Path(images_dir).expanduser() if images_dir is not None else table.parent
    for row in rows:
        row.setdefault(columns.IMAGE_ID, row[columns.IMAGE])
        row[columns.IMAGE_ID] = str(row[columns.IMAGE_ID])
    images = _images(rows, images_dir, table, options.skip_missing)
    _refuse_inputs_the_build_replaces(table, images, Path(output_dir).expanduser())
    features = row_features((columns.IMAGE_ID, *columns.EVAL_CAPTION_COLUMNS))
    by_config: dict[str, list[dict]] = {}
    for row in rows:
        kept = {name: row[name] for name in features}
        by_config.setdefault(str(row.get("config") or DEFAULT_CONFIG), []).append(kept)
    report = BuildReport(dataset=table.stem)
    report.sources["table"] = str(table.resolve())
    report.sources["images"] = str(images_dir.resolve())
    configs = [
        ConfigBuild(name, config_rows, features, images=images) for name, config_rows in by_config.items()
    ]
    # The card is pushed as it is: named after the dataset (its Hub repository, else its folder), its usage
    # loading that, and no local path (`dataset_card.shown_source`).
    name = options.repo_id_for_card or Path(output_dir).name
    where = options.repo_id_for_card or f"./{Path(output_dir).name}"
    first = next(iter(by_config))
    facts = CardFacts(
        title=f"{name}: a hard-positive evaluation set",
        pretty_name=name.rsplit("/", 1)[-1],
        summary=f"Rows of (image, caption, hard_negative, hard_positive) built from the table `{table.name}` by "
        f"`hardpos build own`, one config per `config` value ({', '.join(by_config)}).",
        builder="hardpos build own",
        usage=f'from datasets import load_dataset\n\nrows = load_dataset("{where}", "{first}", split="{split}")\n'
        f"# score a model on every config: hardpos eval --model MODEL --dataset {where}",
        column_meanings={
            columns.IMAGE: "the image, bytes embedded",
            columns.IMAGE_ID: "the table's image_id, or the image path when it had none",
            columns.CAPTION: "the caption that describes the image",
            columns.HARD_NEGATIVE: "a caption whose meaning differs (should score lower)",
            columns.HARD_POSITIVE: "a caption with the same meaning, worded differently (should score like the caption)",
        },
        defects="",
        license_id="other",
        license_text="The table's owner decides the licence; this card does not state one.",
        citation="",
    )
    return export_folder(output_dir, configs, facts, report, split=split, options=options)
