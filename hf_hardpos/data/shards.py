"""Rows become parquet shards: an Arrow-backed ``Dataset`` written from streamed rows (images read
one batch at a time), cut into ``data/<config>/<split>-0000i-of-0000n.parquet`` files by
``push_to_hub``'s rule, and read back: every config through ``load_dataset``, every row with its
image bytes. :mod:`.hub_folder`'s export sequence calls these steps for every builder.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from datasets.exceptions import DatasetGenerationError

from .. import columns
from ..errors import UserInputError
from .checks import DataValidationError
from .image_sources import ImageSpec

SHARD_SIZE = "500MB"  # the default maximum parquet shard size (push_to_hub's default too)
# Rows per Arrow record batch when images are embedded: bounds memory to ~100 images at a time.
IMAGE_WRITER_BATCH_SIZE = 100


def _generate(
    rows: Callable[[], Iterable[dict]] | Sequence[dict], images: ImageSpec | None
) -> Iterator[dict]:
    """Yield rows, reading each image only when its row is written; rows whose image is missing
    (``--skip-missing``) are left out."""
    for row in rows() if callable(rows) else rows:
        if images is None:
            yield row
            continue
        found = images.found.get(row[images.key])
        if found is None:
            continue
        path, stored_path = found
        image = images.encode(path, stored_path, row)
        if not image.get("bytes"):
            raise DataValidationError(
                f"{path}: no image bytes for row {row.get('upstream_index', row[images.key])}"
            )
        yield {columns.IMAGE: image, **row}


# The image column while rows are generated: a plain struct, so ``datasets`` stores the bytes as given.
# (Its ``Image`` feature drops the bytes of an image whose stored path exists from the current
# directory, so a build run from inside the image root would store only relative paths.) The struct
# is the ``Image`` feature's own Arrow storage, so the cast to ``Image`` afterwards copies nothing.
_IMAGE_STORAGE = {"bytes": datasets.Value("binary"), "path": datasets.Value("string")}


def rows_to_dataset(
    rows: Callable[[], Iterable[dict]] | Sequence[dict],
    features: datasets.Features,
    *,
    work_dir: str | Path,
    split: str,
    images: ImageSpec | None = None,
) -> datasets.Dataset:
    """An Arrow-backed Dataset of ``rows`` (plus an ``image`` column when ``images`` is given).

    ``Dataset.from_generator`` writes rows to Arrow files in batches as they are produced, so tens of
    thousands of embedded images never sit in RAM. The Arrow files go to ``work_dir`` (deleted after
    export), and every build gets a fresh fingerprint: ``datasets``' generator cache keys on the
    generator's arguments, not on the bytes of the files it reads, so reusing it could silently
    return a stale build after an upstream file changed.
    """
    if images is not None:
        features = datasets.Features({columns.IMAGE: _IMAGE_STORAGE, **features})
    try:
        dataset = datasets.Dataset.from_generator(
            _generate,
            features=features,
            gen_kwargs={"rows": rows, "images": images},
            split=datasets.NamedSplit(split),
            cache_dir=str(work_dir),
            fingerprint=uuid.uuid4().hex,
            writer_batch_size=IMAGE_WRITER_BATCH_SIZE if images is not None else None,
        )
    except DatasetGenerationError as error:
        # Surface our own input errors (they name file, row and field) instead of datasets' wrapper.
        if isinstance(error.__cause__, (DataValidationError, OSError)):
            raise error.__cause__ from error
        raise
    return dataset.cast_column(columns.IMAGE, datasets.Image()) if images is not None else dataset


@dataclass
class ExportedConfig:
    """One config of the exported repository: where its shards are and what they hold."""

    name: str
    split: str
    data_dirs: list[str]
    features: datasets.Features
    num_rows: int
    num_bytes: int
    files: list[str] = field(default_factory=list)

    def config_entry(self) -> dict:
        """The config's entry under the README's ``configs:`` key."""
        patterns = [f"{data_dir}/{self.split}-*" for data_dir in self.data_dirs]
        return {
            "config_name": self.name,
            "data_files": [{"split": self.split, "path": patterns[0] if len(patterns) == 1 else patterns}],
        }

    def info_entry(self) -> dict:
        """The config's entry under ``dataset_info:``: split sizes. Features are not repeated here:
        the parquet files carry them (``datasets`` writes them into the schema metadata)."""
        return {
            "config_name": self.name,
            "splits": [{"name": self.split, "num_bytes": self.num_bytes, "num_examples": self.num_rows}],
            "dataset_size": self.num_bytes,
        }


_SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def size_in_bytes(size: int | str) -> int:
    """``500MB`` / ``1GiB`` / ``1000`` -> bytes (the units ``push_to_hub``'s ``max_shard_size`` takes)."""
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*", str(size), flags=re.IGNORECASE)
    if not match or float(match.group(1)) <= 0:
        raise UserInputError(f"--max-shard-size {size!r}: expected a positive size such as 500MB or 1GiB")
    return int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").upper()])


def write_config_shards(
    dataset: datasets.Dataset,
    output_dir: Path,
    config_name: str,
    *,
    split: str,
    max_shard_size: int | str = SHARD_SIZE,
) -> ExportedConfig:
    """Write ``dataset`` as parquet shards under ``output_dir/data/<config_name>/``.

    The shard count follows ``push_to_hub``'s rule (Arrow size / ``max_shard_size``, rounded up), and
    each shard is written with ``Dataset.to_parquet``, so the image bytes and the feature metadata are
    stored the way ``datasets`` itself stores them.
    """
    data_dir = f"data/{config_name}"
    target = output_dir / data_dir
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob(f"{split}-*.parquet"):
        stale.unlink()
    num_bytes = dataset.data.nbytes  # Arrow size; images are embedded bytes, so this is their size too
    num_shards = max(1, int(num_bytes / size_in_bytes(max_shard_size)) + 1)
    num_shards = min(num_shards, max(1, len(dataset)))
    files = []
    for index in range(num_shards):
        relative = f"{data_dir}/{split}-{index:05d}-of-{num_shards:05d}.parquet"
        dataset.shard(num_shards=num_shards, index=index, contiguous=True).to_parquet(
            str(output_dir / relative)
        )
        files.append(relative)
    return ExportedConfig(config_name, split, [data_dir], dataset.features, len(dataset), num_bytes, files)


def union_config(name: str, parts: Sequence[ExportedConfig]) -> ExportedConfig:
    """A config that reads the shards of several configs together, without storing them twice."""
    first = parts[0]
    for part in parts[1:]:
        if part.features != first.features or part.split != first.split:
            raise ValueError(
                f"cannot union config {part.name!r} with {first.name!r}: different features or split"
            )
    return ExportedConfig(
        name=name,
        split=first.split,
        data_dirs=[d for part in parts for d in part.data_dirs],
        features=first.features,
        num_rows=sum(part.num_rows for part in parts),
        num_bytes=sum(part.num_bytes for part in parts),
        files=[f for part in parts for f in part.files],
    )


def verify_export(output_dir: Path, config: ExportedConfig) -> None:
    """Check ``load_dataset`` resolves the config to the written shards with the right rows and columns.

    Counts come from the parquet footers and only the first row is decoded (streaming), so checking a
    multi-gigabyte export does not copy it into the ``datasets`` cache.
    """
    import pyarrow.parquet as pq

    builder = datasets.load_dataset_builder(str(output_dir), config.name)
    files = builder.config.data_files.get(config.split, [])
    rows = sum(pq.ParquetFile(str(path)).metadata.num_rows for path in files)
    if rows != config.num_rows:
        raise RuntimeError(
            f"{output_dir}: config {config.name!r} reads {rows} rows from {len(files)} file(s), "
            f"expected {config.num_rows}"
        )
    if rows:
        streamed = datasets.load_dataset(str(output_dir), config.name, split=config.split, streaming=True)
        first = next(iter(streamed))
        if set(first) != set(config.features):
            raise RuntimeError(f"{output_dir}: config {config.name!r} reads columns {sorted(first)}")


def check_embedded_images(folder: Path, config: ExportedConfig) -> None:
    """Every row of the written shards carries its image bytes (not only a path that happened to
    exist where the build ran). Read from the parquet files themselves, so the answer does not
    depend on the current directory; the footer's null counts answer without reading the images."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if columns.IMAGE not in config.features:
        return
    for relative in config.files:
        handle = pq.ParquetFile(str(folder / relative))
        leaf = next(
            (
                i
                for i in range(handle.metadata.num_columns)
                if handle.metadata.schema.column(i).path == f"{columns.IMAGE}.bytes"
            ),
            None,
        )
        for group in range(handle.metadata.num_row_groups):
            stats = handle.metadata.row_group(group).column(leaf).statistics if leaf is not None else None
            if stats is not None and stats.has_null_count and stats.null_count == 0:
                continue
            image = (
                handle.read_row_group(group, columns=[columns.IMAGE]).column(columns.IMAGE).combine_chunks()
            )
            nulls = pc.sum(pc.is_null(image.field("bytes"))).as_py() or 0
            if nulls:
                raise DataValidationError(
                    f"{relative}: {nulls} row(s) of row group {group} have no image bytes; the build is not kept"
                )
