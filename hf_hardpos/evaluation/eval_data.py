"""Evaluation data by name: a Hub id (by commit) or a local Hub-style folder (by content), per config."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import (
    Dataset,
    DatasetDict,
    get_dataset_config_names,
    load_dataset,
    load_dataset_builder,
)

from ..errors import UserInputError, first_line
from ..provenance import hub_revision, local_folder_note, looks_like_path, sha256_files
from ..run_memo import remembered


@dataclass
class EvalSet:
    """One config of a dataset, with the identity of its content (for resume keys and metrics.json)."""

    name: str
    dataset: Dataset
    identity: dict[str, Any]


def require_dataset_exists(name_or_path: str) -> None:
    """Refuse a path-like dataset name that does not exist, before it is taken for a Hub id (whose
    validation error would say nothing about a mistyped folder)."""
    if Path(name_or_path).suffix.lower() in TABLE_SUFFIXES:
        raise UserInputError(
            f"--dataset {name_or_path} is a table; hardpos eval reads a built dataset folder or Hub id. Build it "
            f"once: hardpos build own --table {name_or_path} (writes {own_output_dir(Path(name_or_path))}), then "
            f"pass that folder as --dataset"
        )
    if looks_like_path(name_or_path) and not Path(name_or_path).expanduser().exists():
        raise UserInputError(
            f"dataset not found: {name_or_path} (no such folder; a Hub id looks like owner/name)"
        )


TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json")


def own_output_dir(table: Path) -> Path:
    """Where `hardpos build own --table T` writes by default: `T`'s folder, `<T's stem>-hardpos`."""
    return table.with_name(f"{table.stem}-hardpos")


def content_cache_dir(digest: str) -> str:
    """A datasets cache folder private to one content digest (see `load_local_split`): `datasets` keys
    local files on their path and modification time, which a copy with `cp -p` / `rsync -a` keeps."""
    from datasets import config

    return os.path.join(config.HF_DATASETS_CACHE, "hardpos-by-content", digest[:32])


def load_local_split(folder: str | Path, config: str | None, split: str) -> tuple[Dataset, dict]:
    """One split of a local Hub-style dataset folder, read by content, with the identity of that content.

    `datasets` keys its cache for a local folder on the folder's name and README, not on the data
    files, so two folders named alike (or one rebuilt in place) could return each other's cached
    rows. The split is therefore loaded into a cache folder named by the sha256 of its data files.
    Used for evaluation sets and training sets alike.
    """
    folder = Path(folder).expanduser().resolve()
    try:
        builder = load_dataset_builder(str(folder), config)
    except ValueError as err:
        raise UserInputError(f"{folder}: {str(err).splitlines()[0]}") from err
    config = builder.config.name
    data_files = (builder.config.data_files or {}).get(split)
    if not data_files:
        splits = sorted((builder.config.data_files or {}).keys())
        raise UserInputError(
            f"{folder} config {config!r} has no files for split {split!r} (splits: {splits})"
        )
    digest = sha256_files(data_files, root=folder)
    if all(str(f).endswith(".parquet") for f in data_files):
        if sum(_parquet_rows(f) for f in data_files) == 0:
            raise UserInputError(
                f"{folder} config {config!r} split {split!r} has no rows ({len(data_files)} empty file(s))"
            )
    from datasets.exceptions import DatasetGenerationError

    try:
        dataset = load_dataset(str(folder), config, split=split, cache_dir=content_cache_dir(digest))
    except (ValueError, DatasetGenerationError) as err:  # e.g. a parquet file with no rows, a garbled file
        raise UserInputError(
            f"{folder} config {config!r} split {split!r}: cannot read ({first_line(err)})"
        ) from err
    if len(dataset) == 0:
        raise UserInputError(f"{folder} config {config!r} split {split!r} has no rows")
    referenced = image_files_referenced(dataset, folder, f"{folder} config {config!r} split {split!r}")
    if referenced:  # the images a row names by path are part of its content: a changed one is other data
        digest = sha256_files([*data_files, *referenced], root=folder)
    return dataset, {"path": str(folder), "config": config, "split": split, "sha256": digest}


def image_files_referenced(dataset: Dataset, folder: Path, where: str) -> list[Path]:
    """The files a dataset's image cells name by path instead of holding their bytes, each inside `folder`.

    Why: a cell `{"bytes": null, "path": "/home/me/.ssh/id_rsa.png"}` makes the scorer (and the report's
    thumbnails) open any file of the machine, and its digest would cover the parquet, not the image, so a
    rerun after the image changed would reuse the old scores. A path outside `folder` (absolute, `..`, or
    a link out), or one that is no regular file, is refused with the row and the field; the others are
    returned, to be hashed into the dataset's digest. `hardpos build` embeds every image's bytes.
    """
    import pyarrow.compute as pc
    from datasets import Image as ImageFeature

    inside = folder.resolve()
    found: dict[Path, None] = {}
    for field, feature in dataset.features.items():
        if not isinstance(feature, ImageFeature):
            continue
        cells = dataset.data.column(field).combine_chunks()
        if cells.null_count == len(cells) or not pa.types.is_struct(cells.type):
            continue
        by_path = pc.and_(pc.is_null(cells.field("bytes")), pc.is_valid(cells))
        for row in pc.indices_nonzero(by_path).to_pylist():
            name = cells.field("path")[row].as_py()
            resolved = Path(str(name or "")).resolve()  # as the scorer opens it (a relative path: from here)
            if not name or not resolved.is_relative_to(inside) or not resolved.is_file():
                reason = (
                    "is outside the dataset folder"
                    if name and not resolved.is_relative_to(inside)
                    else "is not a file in the dataset folder"
                )
                raise UserInputError(
                    f"{where}: row {row}, field {field!r}: image path {name!r} {reason}; embed the "
                    "image's bytes (hardpos build does)"
                )
            found[resolved] = None
    return list(found)


def _parquet_rows(path: str | Path) -> int:
    """Rows in a parquet file, from its footer; a garbled file is refused by name."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as err:
        raise UserInputError(
            f"{path}: not a readable parquet file ({first_line(err)}); rebuild or re-download it"
        ) from err


def dataset_source(dataset: str | Dataset | DatasetDict) -> str:
    """The dataset a result belongs to: a local folder's resolved path, a Hub id, or an in-memory
    dataset's fingerprint; saved configs from another source are never merged into this one's report."""
    if isinstance(dataset, DatasetDict):
        return "in-memory:" + ",".join(d._fingerprint for d in dataset.values())
    if isinstance(dataset, Dataset):
        return f"in-memory:{dataset._fingerprint}"
    folder = Path(dataset).expanduser()
    return str(folder.resolve()) if folder.exists() else str(dataset)


def load_eval_sets(
    dataset: str | Dataset | DatasetDict, configs: Sequence[str] | None, split: str
) -> dict[str, EvalSet]:
    """The requested configs, each with the identity of its content.

    A local folder is read by content (`load_local_split`), and only when its README declares every
    data file (`check_declared_folder`): never pooled into an undeclared "default" config. Within one
    multi-model run (`run_memo.sharing`) a named dataset is loaded and hashed once, for every model.
    """
    if isinstance(dataset, str):
        key = (dataset, tuple(configs) if configs is not None else None, split)
        return remembered("eval_sets", key, lambda: _load_eval_sets(dataset, configs, split))
    return _load_eval_sets(dataset, configs, split)


def _load_eval_sets(
    dataset: str | Dataset | DatasetDict, configs: Sequence[str] | None, split: str
) -> dict[str, EvalSet]:
    if isinstance(dataset, Dataset):
        return {
            configs[0] if configs else "default": EvalSet(
                "default", dataset, {"fingerprint": dataset._fingerprint}
            )
        }
    if isinstance(dataset, DatasetDict):
        chosen = dataset[split]
        name = configs[0] if configs else "default"
        return {name: EvalSet(name, chosen, {"fingerprint": chosen._fingerprint})}
    require_dataset_exists(dataset)
    folder = Path(dataset).expanduser()
    if folder.is_dir():
        from ..data.hub_folder import check_declared_folder

        check_declared_folder(folder)
    try:
        available = get_dataset_config_names(str(folder) if folder.exists() else dataset)
    except Exception as err:  # offline Hub ids, unreadable READMEs: say which dataset and why
        raise UserInputError(
            f"cannot read dataset {dataset!r}: {str(err).splitlines()[0]}; {local_folder_note(dataset)}"
        ) from err
    names = list(configs) if configs else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UserInputError(f"dataset {dataset!r} has no config(s) {unknown}; available: {list(available)}")
    if folder.exists():
        return {name: EvalSet(name, *load_local_split(folder, name, split)) for name in names}
    revision = hub_revision(dataset, "dataset")
    sets = {}
    for name in names:
        loaded = load_dataset(dataset, name, split=split, revision=revision)
        sets[name] = EvalSet(
            name, loaded, {"hub_id": dataset, "config": name, "split": split, "revision": revision}
        )
    return sets


def dataset_identity(source: str, split: str) -> dict[str, Any]:
    """A whole dataset's identity, for a task saved as one result: a local folder by the sha256 of its
    files, a Hub id by its commit (None offline: nothing saved can then be proven the same)."""
    folder = Path(source).expanduser()
    if folder.exists():
        files = [f for f in folder.rglob("*") if f.is_file() and ".cache" not in f.parts]
        return {"path": str(folder.resolve()), "split": split, "sha256": sha256_files(files, root=folder)}
    return {"hub_id": source, "split": split, "revision": hub_revision(source, "dataset")}
