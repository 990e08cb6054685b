"""A built dataset as a Hub dataset repository folder: written as one transaction, checked when a
local folder is read, and pushed.

The folder is what ``push_to_hub`` would create (``data/<config>/<split>-0000i-of-0000n.parquet`` plus
a README whose YAML declares ``configs`` and ``dataset_info``), so ``load_dataset(folder, config)`` and
``load_dataset("org/name", config)`` read the same files. Building locally first lets a user check the
folder before anything is published. Every builder goes through :func:`export_folder`, the one
"build rows -> write shards -> count -> card -> verify" sequence: the shards are :mod:`.shards`' work,
the counts :mod:`.build_report`'s and the card :mod:`.dataset_card`'s, rendered from what the build
measured, so it can never claim more than the build saw. :func:`check_declared_folder` holds a folder
read for evaluation to the same layout; :func:`push_folder` uploads one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets

from ..errors import UserInputError
from ..output_folder import write_json
from .build_report import BuildReport
from .checks import DataValidationError
from .dataset_card import CardFacts, render_card
from .image_sources import ImageFolder, ImageSpec, locate_images
from .shards import (
    SHARD_SIZE,
    ExportedConfig,
    check_embedded_images,
    rows_to_dataset,
    union_config,
    verify_export,
    write_config_shards,
)

# The files a build wrote into its output folder (relative posix paths): the only ones a later build replaces.
BUILD_MANIFEST = ".hardpos-build-files.json"


@dataclass(frozen=True)
class BuildOptions:
    """How a build runs, the same for every builder: each ``export_*`` takes these as keyword
    arguments (``hardpos build``'s shared flags), so they are declared and defaulted here once."""

    skip_missing: bool = False  # drop the rows of missing or unreadable images (the card counts them)
    cache_dir: str | Path | None = None  # downloads, extractions and the build's Arrow work files
    max_shard_size: int | str = SHARD_SIZE
    repo_id_for_card: str | None = None  # the repo id the card's usage example loads (None: the builder's)
    verify: bool = True  # read every config back through ``load_dataset`` before the folder is kept
    progress: bool = True


def row_features(*groups: Sequence[str] | Mapping[str, object]) -> datasets.Features:
    """A row schema from its columns in order: a sequence of names is string columns; a mapping gives
    each name a dtype (``"int64"``, ``"bool"``) or a feature (``datasets.List(...)``)."""
    found: dict = {}
    for group in groups:
        items = group.items() if isinstance(group, Mapping) else ((name, "string") for name in group)
        for name, kind in items:
            found[name] = datasets.Value(kind) if isinstance(kind, str) else kind
    return datasets.Features(found)


@dataclass
class ConfigBuild:
    """One config to export: its rows (a list, or a callable that streams them) and what to check.

    ``num_upstream_rows`` defaults to ``len(rows)``; the rows dropped for missing images are
    ``num_upstream_rows`` minus the rows written. ``image_keys`` (the distinct image keys the config
    uses) defaults to the ``images.key`` values of ``rows``; ``images=None`` builds without images.
    ``flags`` may be measured on the built dataset (a callable) when the rows are streamed.
    """

    name: str
    rows: Callable[[], Iterable[dict]] | Sequence[dict]
    features: datasets.Features
    expected_count: int | None = None
    flags: dict[str, int] | Callable[[datasets.Dataset], dict[str, int]] | None = None
    images: ImageSpec | None = None
    num_upstream_rows: int | None = None
    image_keys: Collection[str] | None = None

    @property
    def upstream_rows(self) -> int:
        return self.num_upstream_rows if self.num_upstream_rows is not None else len(self.rows)


def export_folder(
    output_dir: str | Path,
    configs: Sequence[ConfigBuild],
    facts: CardFacts,
    report: BuildReport,
    *,
    split: str,
    options: BuildOptions = BuildOptions(),
    union_config_name: str | None = None,
    on_built: Callable[[BuildReport], None] | None = None,
) -> BuildReport:
    """Build every config, write its shards, count its rows, then write ``build_report.json`` and
    the card, verify the folder reads back with every image's bytes, and print the counts.

    The build is a transaction: everything is written into a hidden folder inside ``output_dir``
    and moved into place only once it is complete and verified: ``data/`` (replacing the previous
    build's, so no stale shard or config survives), then ``build_report.json``, then ``README.md``
    last. A build that fails or is killed leaves the previous build as it was, or no README at all
    (never a README that declares shards which are not there). Other files in ``output_dir`` (a
    ``.git`` of a cloned Hub repository, say) are left alone, and a file the build would replace that
    an earlier build did not write is refused before anything is written (:func:`check_replaceable`).

    When every input was the pinned upstream file (:attr:`BuildReport.counts_must_match`), a
    config whose upstream rows differ from the paper's count is an error before anything is
    written; rows can then only be dropped by ``--skip-missing``, which the card states.
    ``on_built`` may add counts derived from the flags (it runs before the card is written).
    """
    output_dir = Path(output_dir)
    check_replaceable(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    check_paper_counts(configs, report)
    staging = output_dir / f".hardpos-build-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        exported = _write_configs(staging, configs, report, split=split, options=options)
        if union_config_name and len(exported) > 1:
            exported.append(union_config(union_config_name, exported))
            report.counts[union_config_name] = exported[-1].num_rows
            expected = [config.expected_count for config in configs]
            if all(count is not None for count in expected):
                report.expected_counts[union_config_name] = sum(expected)
        if on_built is not None:
            on_built(report)
        report.save(staging / "build_report.json")
        render_card(staging, exported, facts, report)
        for config in exported:
            check_embedded_images(staging, config)
            if options.verify:
                verify_export(staging, config)
        _commit(staging, output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for line in report.count_lines():
        print(line)
    return report


def check_paper_counts(configs: Sequence[ConfigBuild], report: BuildReport) -> None:
    """Refuse, before anything is written, pinned upstream files whose rows are not the paper's."""
    if not report.counts_must_match:
        return
    for config in configs:
        if config.expected_count is None:
            continue
        if config.upstream_rows != config.expected_count:
            raise DataValidationError(
                f"config {config.name}: the upstream files hold {config.upstream_rows:,} rows, "
                f"the paper {config.expected_count:,}; "
                "the sources are not the paper's (build from a local copy with --upstream-dir to build other rows "
                "on purpose; the card then says so)"
            )


def _write_configs(
    staging: Path,
    configs: Sequence[ConfigBuild],
    report: BuildReport,
    *,
    split: str,
    options: BuildOptions,
) -> list[ExportedConfig]:
    exported = []
    with tempfile.TemporaryDirectory(prefix="hardpos-build-", dir=options.cache_dir) as work_dir:
        for config in configs:
            dataset = rows_to_dataset(
                config.rows,
                config.features,
                work_dir=Path(work_dir) / config.name,
                split=split,
                images=config.images,
            )
            exported.append(
                write_config_shards(
                    dataset, staging, config.name, split=split, max_shard_size=options.max_shard_size
                )
            )
            report.counts[config.name] = len(dataset)
            if config.flags is not None:
                report.flags[config.name] = dict(
                    config.flags(dataset) if callable(config.flags) else config.flags
                )
            del dataset
            if config.expected_count is not None:
                report.expected_counts[config.name] = config.expected_count
            if config.images is not None and config.images.missing:
                keys = config.image_keys
                if keys is None:
                    keys = {row[config.images.key] for row in config.rows}
                used_missing = sorted(set(keys) & set(config.images.missing))
                if used_missing:
                    report.skipped_missing_images[config.name] = used_missing
                    report.skipped_rows[config.name] = config.upstream_rows - report.counts[config.name]
    return exported


def _relative_files(root: Path, under: str) -> list[str]:
    """Every entry below ``root / under`` that is not a folder (links included), as posix paths from ``root``."""
    found = []
    for parent, dirs, files in os.walk(root / under):  # links to folders are listed, not followed
        for name in (*files, *(d for d in dirs if (Path(parent) / d).is_symlink())):
            found.append((Path(parent) / name).relative_to(root).as_posix())
    return found


def _files_written(output_dir: Path) -> set[str]:
    """What earlier builds recorded writing into ``output_dir`` (:data:`BUILD_MANIFEST`); none when absent."""
    path = output_dir / BUILD_MANIFEST
    if path.is_symlink():
        raise UserInputError(f"{path} is a symbolic link; remove it")
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return set()
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserInputError(
            f"{path}: not readable ({err}); remove it and the files it listed to build here"
        ) from None
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        raise UserInputError(f"{path}: expected a JSON list of file names")
    return set(listed)


def check_replaceable(output_dir: str | Path) -> None:
    """Refuse (one line) an output folder where the build would replace a file it did not write.

    A build replaces ``data/``, ``README.md`` and ``build_report.json``; ``--output-dir .`` in a project
    with its own ``data/``, or a note kept in ``data/``, would be deleted. Only files an earlier build
    listed in :data:`BUILD_MANIFEST` may be replaced; anything else there is refused by name.
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return
    ours = _files_written(output_dir)
    replaced = [
        name
        for name in ("README.md", "build_report.json")
        if (output_dir / name).exists() or (output_dir / name).is_symlink()
    ]
    foreign = [name for name in (*replaced, *_relative_files(output_dir, "data")) if name not in ours]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise UserInputError(
            f"--output-dir {output_dir}: {foreign[0]}{more} was not written by hardpos build, and a build replaces "
            "data/, README.md and build_report.json; choose an empty or new folder (nothing was written)"
        )


def _commit(staging: Path, output_dir: Path) -> None:
    """Move a complete, verified build from ``staging`` into ``output_dir``, README last.

    The files moved in are recorded in :data:`BUILD_MANIFEST` first (with the previous build's, until
    those are gone), so a build killed midway leaves nothing the next build would take for a user's file.
    """
    check_replaceable(output_dir)  # again: a file may have appeared while the build ran
    new = ["README.md", "build_report.json", *_relative_files(staging, "data")]
    write_json(output_dir / BUILD_MANIFEST, sorted(_files_written(output_dir) | set(new)))
    readme = output_dir / "README.md"
    if readme.exists():
        readme.unlink()  # from here until the new one lands, the folder declares no configs
    data = output_dir / "data"
    old = output_dir / f".hardpos-old-data-{uuid.uuid4().hex[:12]}"
    if data.exists():
        data.rename(old)
    (staging / "data").rename(data)
    shutil.rmtree(old, ignore_errors=True)
    (staging / "build_report.json").replace(output_dir / "build_report.json")
    (staging / "README.md").replace(readme)
    write_json(output_dir / BUILD_MANIFEST, sorted(new))


def export_with_image_files(
    output_dir: str | Path,
    rows_by_config: Mapping[str, Sequence[dict]],
    *,
    folder: ImageFolder,
    features: datasets.Features,
    expected_counts: Mapping[str, int | None],
    flags: Callable[[Sequence[dict]], dict[str, int]],
    facts: CardFacts,
    report: BuildReport,
    images_note: str,
    split: str,
    options: BuildOptions,
) -> BuildReport:
    """Export configs whose rows name their image files by ``image_id`` under one ``ImageFolder``:
    every image located up front (a missing one refused by name unless ``skip_missing``), then
    :func:`export_folder`. The builders of benchmarks shipped without images share it."""
    images = locate_images(folder, (row for rows in rows_by_config.values() for row in rows), options)
    report.sources["images"] = f"{folder.description}: {images_note}"
    configs = [
        ConfigBuild(name, rows, features, expected_counts.get(name), flags(rows), images)
        for name, rows in rows_by_config.items()
    ]
    return export_folder(output_dir, configs, facts, report, split=split, options=options)


def push_folder(
    output_dir: str | Path,
    repo_id: str,
    *,
    private: bool | None = None,
    commit_message: str = "Upload dataset built by hf_hardpos",
) -> str:
    """Create the dataset repository if needed and upload the folder (shards, README, build report)
    in one commit that also deletes every remote ``data/`` file this build does not have, so a
    rebuild with fewer configs or other shard counts leaves no stale shard behind.

    The token is ``huggingface_hub``'s own: ``HF_TOKEN`` or the stored ``hf auth login``; no option
    takes one (a token on the command line is readable by every user of the machine).
    """
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = api.upload_folder(
            folder_path=str(output_dir),
            repo_id=repo_id,
            repo_type="dataset",
            commit_message=commit_message,
            allow_patterns=["README.md", "build_report.json", "data/**"],
            delete_patterns=["data/**"],
        )
    except Exception as error:  # offline, no login, no permission: all for the user to fix
        raise UserInputError(
            f"--push-to-hub {repo_id}: {type(error).__name__}: {first_line_masked(error)} (the folder {output_dir} is "
            "complete; log in with `hf auth login` or set HF_TOKEN, then push again)"
        ) from None
    return str(info)


def first_line_masked(error: Exception) -> str:
    """An exception's first line, with anything shaped like a Hub token masked."""
    text = str(error).splitlines()[0][:200] if str(error) else ""
    return re.sub(r"hf_[A-Za-z0-9]{8,}", "hf_***", text)


def check_declared_folder(folder: str | Path) -> None:
    """A local dataset folder must declare its data: a README whose YAML has ``configs:``, every
    pattern there matching files, and every parquet file declared by some config.

    Without this, ``datasets`` pools a folder without README configs into one "default" config, and
    a half-written or hand-edited folder (a build killed before its README, stale shards beside new
    ones) is read as data it does not declare. Raises :class:`UserInputError` naming the folder.
    """
    from huggingface_hub.repocard import metadata_load

    folder = Path(folder)
    readme = folder / "README.md"
    layout = "rebuild it with `hardpos build`, or write README.md's `configs:` (docs/evaluation.md, Evaluate your own data)"
    metadata = metadata_load(readme) if readme.is_file() else None
    entries = (metadata or {}).get("configs")
    if not isinstance(entries, list) or not entries:
        why = "has no README.md" if not readme.is_file() else "has a README.md without `configs:`"
        raise UserInputError(f"{folder} {why}: it does not say which files are which config; {layout}")
    declared: set[Path] = set()
    for entry in entries:
        name = entry.get("config_name", "default") if isinstance(entry, dict) else entry
        for pattern in _config_patterns(entry):
            matched = [path for path in folder.glob(pattern) if path.is_file()]
            if not matched:
                raise UserInputError(
                    f"{folder}: config {name!r} declares {pattern!r}, which matches no file; {layout}"
                )
            declared.update(path.resolve() for path in matched)
    undeclared = [
        path.relative_to(folder).as_posix()
        for path in sorted(folder.rglob("*.parquet"))
        if not any(part.startswith(".") for part in path.relative_to(folder).parts)
        and path.resolve() not in declared
    ]
    if undeclared:
        raise UserInputError(
            f"{folder}: {len(undeclared)} parquet file(s) no config declares ({', '.join(undeclared[:3])}); {layout}"
        )


def _config_patterns(entry) -> list[str]:
    """The file patterns of one README ``configs:`` entry (``data_files`` in any of its forms, or ``data_dir``)."""
    if not isinstance(entry, dict):
        return []
    files = entry.get("data_files")
    if files is None:
        return [f"{entry['data_dir'].rstrip('/')}/**/*"] if entry.get("data_dir") else []
    items = files if isinstance(files, list) else [files]
    if isinstance(files, dict):
        items = [{"path": value} for value in files.values()]
    patterns = []
    for item in items:
        paths = item.get("path") if isinstance(item, dict) else item
        patterns += paths if isinstance(paths, list) else [paths]
    return [str(pattern) for pattern in patterns if pattern]
