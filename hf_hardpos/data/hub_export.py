"""Write a built dataset as a Hub dataset repository folder, read it back, and push it.

The folder is exactly what ``push_to_hub`` would create (``data/<config>/<split>-0000i-of-0000n.parquet``
plus a README whose YAML lists ``configs`` and ``dataset_info``), so ``load_dataset(folder, config)``
and ``load_dataset("org/name", config)`` read the same files. Building locally first, instead of
pushing straight from the builder, lets a user check the folder before anything is published.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from datasets.info import DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

DEFAULT_MAX_SHARD_SIZE = "500MB"


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
    default: bool = False

    def metadata(self) -> dict:
        """The config's entry under the README's ``configs:`` key."""
        patterns = [f"{data_dir}/{self.split}-*" for data_dir in self.data_dirs]
        entry = {"data_files": [{"split": self.split, "path": patterns[0] if len(patterns) == 1 else patterns}]}
        if self.default:
            entry["default"] = True
        return entry

    def info(self) -> datasets.DatasetInfo:
        info = datasets.DatasetInfo(features=self.features, config_name=self.name)
        split = SplitInfo(name=self.split, num_bytes=self.num_bytes, num_examples=self.num_rows)
        info.splits = SplitDict({self.split: split})
        info.dataset_size = self.num_bytes
        return info


def write_config_shards(
    dataset: datasets.Dataset,
    output_dir: str | Path,
    config_name: str,
    *,
    split: str = "test",
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    default: bool = False,
) -> ExportedConfig:
    """Write ``dataset`` as parquet shards under ``output_dir/data/<config_name>/``.

    The shard count follows ``push_to_hub``'s rule (Arrow size / ``max_shard_size``, rounded up), and
    each shard is written with ``Dataset.to_parquet``, so the image bytes and the feature metadata are
    stored the way ``datasets`` itself stores them.
    """
    from datasets.utils.py_utils import convert_file_size_to_int

    output_dir = Path(output_dir)
    data_dir = f"data/{config_name}"
    target = output_dir / data_dir
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob(f"{split}-*.parquet"):
        stale.unlink()
    num_bytes = dataset.data.nbytes  # Arrow size; images are embedded bytes, so this is their size too
    num_shards = max(1, int(num_bytes / convert_file_size_to_int(max_shard_size)) + 1)
    num_shards = min(num_shards, max(1, len(dataset)))
    files = []
    for index in range(num_shards):
        relative = f"{data_dir}/{split}-{index:05d}-of-{num_shards:05d}.parquet"
        dataset.shard(num_shards=num_shards, index=index, contiguous=True).to_parquet(str(output_dir / relative))
        files.append(relative)
    return ExportedConfig(
        name=config_name,
        split=split,
        data_dirs=[data_dir],
        features=dataset.features,
        num_rows=len(dataset),
        num_bytes=num_bytes,
        files=files,
        default=default,
    )


def union_config(name: str, parts: Sequence[ExportedConfig]) -> ExportedConfig:
    """A config that reads the shards of several configs together, without storing them twice."""
    first = parts[0]
    for part in parts[1:]:
        if part.features != first.features or part.split != first.split:
            raise ValueError(f"cannot union config {part.name!r} with {first.name!r}: different features or split")
    return ExportedConfig(
        name=name,
        split=first.split,
        data_dirs=[d for part in parts for d in part.data_dirs],
        features=first.features,
        num_rows=sum(part.num_rows for part in parts),
        num_bytes=sum(part.num_bytes for part in parts),
        files=[f for part in parts for f in part.files],
    )


def card_data(configs: Sequence[ExportedConfig], **fields) -> DatasetCardData:
    """Card metadata: the caller's fields plus ``configs`` and ``dataset_info`` for every config."""
    data = DatasetCardData(**fields)
    DatasetInfosDict({config.name: config.info() for config in configs}).to_dataset_card_data(data)
    MetadataConfigs({config.name: config.metadata() for config in configs}).to_dataset_card_data(data)
    return data


def write_card(output_dir: str | Path, data: DatasetCardData, template: str, **template_kwargs) -> Path:
    """Render the dataset card (YAML header from ``data``, body from a Jinja ``template``) to README.md."""
    card = DatasetCard.from_template(data, template_str=template, **template_kwargs)
    path = Path(output_dir) / "README.md"
    card.save(path)
    return path


def load_exported(output_dir: str | Path, config_name: str, split: str = "test") -> datasets.Dataset:
    """Read a config back through ``load_dataset``, the way users (and ``hardpos eval``) will."""
    return datasets.load_dataset(str(output_dir), config_name, split=split)


def push_folder(
    output_dir: str | Path,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    commit_message: str = "Upload dataset built by hf_hardpos",
) -> str:
    """Create the dataset repository if needed and upload the folder (shards, README, build report)."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(output_dir),
        repo_id=repo_id,
        repo_type="dataset",
        commit_message=commit_message,
        allow_patterns=["README.md", "build_report.json", "data/**"],
    )
    return str(info)


def verify_export(output_dir: str | Path, config: ExportedConfig) -> None:
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
