"""Check the training set and the numeric options before step 1, not at the step that reaches a bad row.

Why: a null caption or an undecodable image used to surface as an exception at whatever step first
drew that row (step 45 of 64, hours into a run), a misspelled column name silently changed the task,
and an all-null hard-positive column trained without that term while the card still claimed it. Here:

- every column the objective reads must exist; a missing one is named with the closest existing names;
- the image and caption columns must be non-null and captions non-empty on every row, and every
  non-null hard positive / negative a real caption (not "" or the upstream placeholder "None"): one
  pass over the Arrow columns, no image decoded, with the first offending row numbers in the message;
- hard-positive (or hard-negative) columns that are all null on every row are refused while a weighted
  loss term reads them (`losses.registry`: train with its weight 0); one all-null column beside others
  with captions is a warning;
- images are decoded on an evenly spaced sample of rows (`sample_images` rows), or on every row
  when asked (`all_images=True`, `--check_all_images` in the example script);
- numeric options that cannot train (`max_steps 0`, a batch of 0, a negative learning rate, ...) are
  refused with the option's name.
Row numbers are positions in the training set as given (0-based), as `dataset[i]` reads them.
"""

from __future__ import annotations

import difflib
import io
import logging
import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UserInputError
from .losses import registry

__all__ = ["check_numeric_arguments", "validate_training_data"]

logger = logging.getLogger(__name__)

SAMPLE_IMAGES = 256  # images decoded by default: enough to catch a systematically broken column
MAX_ROWS_NAMED = 5  # row numbers quoted in a message
PLACEHOLDERS = ("", "None")  # after stripping whitespace: never a caption


def check_numeric_arguments(args) -> None:
    """Refuse numeric training options that cannot train, naming the option (one line, exit 2)."""
    problems = []
    if args.max_steps == 0:
        problems.append("max_steps=0 would train nothing and save the base model as fine-tuned; give a positive "
                        "number, or -1 to train for num_train_epochs")  # fmt: skip
    if args.max_steps < 0 and not (args.num_train_epochs > 0 and math.isfinite(args.num_train_epochs)):
        problems.append(
            f"num_train_epochs must be > 0 when max_steps is not set; got {args.num_train_epochs}"
        )
    at_least_one = (
        "per_device_train_batch_size",
        "per_device_eval_batch_size",
        "gradient_accumulation_steps",
    )
    problems += [
        f"{name} must be >= 1; got {getattr(args, name)}" for name in at_least_one if getattr(args, name) < 1
    ]
    for name in ("learning_rate", "weight_decay", "max_grad_norm"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value >= 0):
            problems.append(f"{name} must be a finite number >= 0; got {value}")
    if getattr(args, "lora_alpha", 1) <= 0:
        problems.append(f"lora_alpha must be > 0; got {args.lora_alpha}")
    if not 0 <= getattr(args, "lora_dropout", 0.0) < 1:
        problems.append(f"lora_dropout must be in [0, 1); got {args.lora_dropout}")
    if args.save_total_limit is not None and args.save_total_limit < 1:
        problems.append(
            f"save_total_limit must be >= 1 (or unset to keep every checkpoint); got {args.save_total_limit}"
        )
    if problems:
        raise UserInputError("; ".join(problems))


def validate_training_data(
    dataset,
    args,
    *,
    all_images: bool = False,
    sample_images: int = SAMPLE_IMAGES,
    what: str = "the training set",
) -> dict[str, int]:
    """Validate `dataset` (a `datasets.Dataset`) for `args` (`HardPosTrainingArguments`) before training.

    Returns what was checked: {"rows", "images_decoded"}. Raises `UserInputError` naming the column,
    the rows and the fix.
    """
    image, caption = args.image_column, args.caption_column
    positives, negatives = list(args.positive_columns), list(args.negative_columns)
    _require(dataset, [image, caption, *positives, *negatives], what)
    rows = len(dataset)
    if rows == 0:
        raise UserInputError(f"{what} has no rows")

    text_columns = [caption, *positives, *negatives]
    null_rows: dict[str, list[int]] = {}
    null_counts: dict[str, int] = {}
    placeholder_rows: dict[str, list[int]] = {}
    # The stored table, never copied: with an indices mapping (after `shuffle`/`select`) the per-row
    # masks are computed on the stored rows and then read in the dataset's order (image bytes stay put).
    table = dataset.data.table
    order = None if dataset._indices is None else dataset._indices.column(0).to_numpy()
    for name in dict.fromkeys([image, *text_columns]):
        column = table.column(name)
        nulls = _in_order(_null_mask(column), order)
        null_counts[name] = int(nulls.sum())
        null_rows[name] = np.flatnonzero(nulls)[:MAX_ROWS_NAMED].tolist()
        if name == image:
            continue
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            stripped = pc.utf8_trim_whitespace(column)
            bad = _in_order(pc.fill_null(pc.is_in(stripped, value_set=pa.array(PLACEHOLDERS)), False), order)
            placeholder_rows[name] = np.flatnonzero(bad)[:MAX_ROWS_NAMED].tolist()
        elif not pa.types.is_null(column.type):
            raise UserInputError(f"{what}: column {name!r} holds {column.type}, expected text (strings)")

    for name in (image, caption):
        if null_counts[name]:
            raise UserInputError(
                f"{what}: column {name!r} is null in {null_counts[name]:,} of {rows:,} rows (rows "
                f"{_rows(null_rows[name], null_counts[name])}); every row needs {'an image' if name == image else 'a caption'}"
            )
    for name, found in placeholder_rows.items():
        if found:
            raise UserInputError(
                f"{what}: column {name!r} holds an empty or placeholder ('None') caption at rows {_rows(found)}; "
                "a missing caption must be a null"
            )
    reads = _inputs_read(args)
    _check_all_null(null_counts, rows, positives, registry.HARD_POSITIVES in reads, "hard-positive", what,
                    _zero(args, registry.HARD_POSITIVES), "positive_columns")  # fmt: skip
    _check_all_null(null_counts, rows, negatives, registry.HARD_NEGATIVES in reads, "hard-negative", what,
                    _zero(args, registry.HARD_NEGATIVES), "negative_columns")  # fmt: skip
    decoded = _check_images(dataset, image, all_images, sample_images, what)
    return {"rows": rows, "images_decoded": decoded}


def _require(dataset, required: Sequence[str], what: str) -> None:
    present = list(dataset.column_names)
    missing = [c for c in dict.fromkeys(required) if c not in present]
    if not missing:
        return
    hints = []
    for name in missing:
        close = difflib.get_close_matches(name, [c for c in present if c not in required], n=2, cutoff=0.6)
        hints.append(
            f"{name!r}" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else "")
        )
    raise UserInputError(
        f"{what} lacks column(s) {', '.join(hints)}; it has {present}. Rename the column, or set "
        "--image_column/--caption_column/--positive_columns/--negative_columns to its name."
    )


def _inputs_read(args) -> frozenset[str]:
    """What the loss of `args` reads: its weighted terms' inputs, and hard negatives when the contrastive
    term takes them as columns (`losses.registry`)."""
    settings = registry.settings_of(args)
    reads = registry.inputs_read(settings)
    if registry.contrastive_reads_negatives(settings, getattr(args, "contrastive_hard_negatives", None)):
        reads |= {registry.HARD_NEGATIVES}
    return reads


def _zero(args, inputs: str) -> str:
    """ "a, b and c 0": the weights (and the contrastive flag) to turn off to train without `inputs`."""
    settings = registry.settings_of(args)
    names = [f"{name} 0" for name in registry.weights_reading(settings, inputs)]
    if inputs == registry.HARD_NEGATIVES and getattr(args, "contrastive_hard_negatives", None):
        names.append("contrastive_hard_negatives off")
    return (
        " and ".join(filter(None, [", ".join(names[:-1]), names[-1]])) if names else "these columns dropped"
    )


def _check_all_null(null_counts, rows, names, read, kind, what, zero, option) -> None:
    """Every column of a kind null with a non-zero weight: the term would train on nothing (an error).
    One all-null column beside others that hold captions: the term trains on those (a warning)."""
    empty = [n for n in names if null_counts[n] == rows]
    if not empty or not read:  # `read`: a weighted term reads this kind (`_inputs_read`)
        return
    if len(empty) == len(names):
        raise UserInputError(
            f"{what}: {kind} column(s) {empty} are null on all {rows:,} rows, so the {kind} loss would train on "
            f"nothing while its weight is non-zero: fill them, or train with {zero}"
        )
    logger.warning("%s: %s column(s) %s are null on all %d rows; the %s terms train on %s only (drop them from "
                   "--%s to silence this).", what, kind, empty, rows, kind, [n for n in names if n not in empty],
                   option)  # fmt: skip


def _null_mask(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null cells; for an image struct {bytes, path}, also a struct whose bytes and path are both null."""
    nulls = pc.is_null(column)
    if pa.types.is_struct(column.type) and {"bytes", "path"} <= {f.name for f in column.type}:
        empty = pc.and_(
            pc.is_null(pc.struct_field(column, "bytes")), pc.is_null(pc.struct_field(column, "path"))
        )
        nulls = pc.or_(nulls, pc.fill_null(empty, True))
    return nulls


def _in_order(mask: pa.ChunkedArray, order: np.ndarray | None) -> np.ndarray:
    """A per-stored-row boolean mask as numpy, in the dataset's row order."""
    values = mask.to_numpy(zero_copy_only=False).astype(bool)
    return values if order is None else values[order]


def _rows(found: list[int], total: int | None = None) -> str:
    shown = ", ".join(str(r) for r in found[:MAX_ROWS_NAMED])
    more = (total if total is not None else len(found)) - min(len(found), MAX_ROWS_NAMED)
    return shown + (f" and {more:,} more" if more > 0 else "")


def _check_images(dataset, image: str, all_images: bool, sample: int, what: str) -> int:
    """Decode the images of every row (`all_images`) or of `sample` evenly spaced rows; returns how many."""
    from datasets import Image as ImageFeature
    from PIL import Image

    feature = dataset.features.get(image)
    if not isinstance(feature, ImageFeature):
        return 0  # not a datasets Image column (e.g. an in-memory transform): the collator checks each row
    rows = len(dataset)
    if all_images or rows <= sample:
        positions = range(rows)
    else:
        positions = sorted(set(np.linspace(0, rows - 1, sample).round().astype(int).tolist()))
    raw = dataset.select_columns([image]).cast_column(image, ImageFeature(decode=False))
    bad = []
    for position in positions:
        cell = raw[position][image]
        try:
            if cell.get("bytes") is not None:
                with Image.open(io.BytesIO(cell["bytes"])) as picture:
                    picture.load()
            else:
                with Image.open(cell["path"]) as picture:
                    picture.load()
        except Exception as error:  # PIL raises many types for broken files; each is reported by row
            bad.append(f"row {position} ({type(error).__name__}: {str(error)[:60]})")
            if len(bad) >= MAX_ROWS_NAMED:
                break
    if bad:
        checked = "every image" if len(positions) == rows else f"a sample of {len(positions)} images"
        raise UserInputError(
            f"{what}: column {image!r} has images that do not decode ({checked} checked): {'; '.join(bad)}. "
            "Repair or drop those rows (`dataset.filter`)."
        )
    return len(positions)
