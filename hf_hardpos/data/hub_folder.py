"""Write a built dataset as a Hub dataset repository folder (parquet shards + dataset card), verify it,
and push it.

The folder is what ``push_to_hub`` would create (``data/<config>/<split>-0000i-of-0000n.parquet`` plus
a README whose YAML declares ``configs`` and ``dataset_info``), so ``load_dataset(folder, config)`` and
``load_dataset("org/name", config)`` read the same files. Building locally first lets a user check the
folder before anything is published. Every builder goes through :func:`export_folder`, the one
"build rows -> write shards -> count -> card -> verify" sequence, and the card is rendered from what
the build measured (counts, flags, skipped rows, sources with sha256), so it can never claim more
than the build saw. Only public ``datasets``/``huggingface_hub`` APIs are used: the YAML is written
from plain dicts through ``DatasetCardData``.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path

import datasets
import yaml
from datasets.exceptions import DatasetGenerationError
from huggingface_hub import DatasetCard, DatasetCardData

from .. import columns
from ..citations import cite
from ..errors import UserInputError
from ..provenance import versions
from .checks import DataValidationError
from .sources import ImageFolder, ImageSpec, locate_images

SHARD_SIZE = "500MB"  # the default maximum parquet shard size (push_to_hub's default too)
# Rows per Arrow record batch when images are embedded: bounds memory to ~100 images at a time.
IMAGE_WRITER_BATCH_SIZE = 100


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


def count_flags(rows: Iterable[dict], names: Sequence[str]) -> dict[str, int]:
    """How many rows have each boolean flag set, in ``names`` order (the report's and the card's)."""
    rows = list(rows)
    return {name: sum(row[name] for row in rows) for name in names}


def flag_table(report: "BuildReport", labels: Mapping[str, str], *, with_rows: bool = False) -> list[str]:
    """The card's table of the flags measured per config: one column per flag (``labels``: flag ->
    column header), after the config's row count when ``with_rows``."""
    header = ["config", *(["rows"] if with_rows else []), *labels.values()]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for name, flags in report.flags.items():
        counts = [report.counts.get(name, 0)] if with_rows else []
        cells = [name, *(f"{count:,}" for count in [*counts, *(flags[flag] for flag in labels)])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------------------------------------------
# Build report


@dataclass
class BuildReport:
    """What a build read, wrote and skipped; saved next to the shards as ``build_report.json``."""

    dataset: str
    counts: dict[str, int] = field(default_factory=dict)
    expected_counts: dict[str, int] = field(default_factory=dict)
    skipped_missing_images: dict[str, list[str]] = field(default_factory=dict)
    skipped_rows: dict[str, int] = field(default_factory=dict)
    flags: dict[str, dict[str, int]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    # Inputs read from local copies that are not the pinned upstream files; None: not recorded.
    local_variants: list[str] | None = None

    def record_sources(self, sources) -> None:
        """Take the provenance and the local variants of a :class:`~hf_hardpos.data.sources.Sources`."""
        self.sources.update(sources.provenance)
        self.local_variants = list(sources.local_variants)

    @property
    def counts_must_match(self) -> bool:
        """Whether the paper's counts bind this build: every input was the pinned upstream file (a
        download checked against its digest, or an identical local copy)."""
        return self.local_variants is not None and not self.local_variants

    @property
    def distinct_missing_images(self) -> int:
        """Missing images counted once, however many configs use them."""
        return len({key for keys in self.skipped_missing_images.values() for key in keys})

    def count_lines(self) -> list[str]:
        """One line per built config: measured rows against the paper's."""
        lines = []
        for name, count in self.counts.items():
            expected = self.expected_counts.get(name)
            if expected is None:
                lines.append(f"{name}: {count:,} rows")
            else:
                verdict = "matches the paper" if count == expected else f"DIFFERS by {count - expected:+,}"
                lines.append(f"{name}: {count:,} rows (paper: {expected:,}; {verdict})")
        return lines

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------
# Rows -> Dataset


def _generate(rows: Callable[[], Iterable[dict]] | Sequence[dict], images: ImageSpec | None) -> Iterator[dict]:
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
            raise DataValidationError(f"{path}: no image bytes for row {row.get('upstream_index', row[images.key])}")
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


# ---------------------------------------------------------------------------------------------------
# Shards


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
        dataset.shard(num_shards=num_shards, index=index, contiguous=True).to_parquet(str(output_dir / relative))
        files.append(relative)
    return ExportedConfig(config_name, split, [data_dir], dataset.features, len(dataset), num_bytes, files)


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
    layout = "rebuild it with `hardpos build`, or write README.md's `configs:` (README: Evaluate your own data)"
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
                raise UserInputError(f"{folder}: config {name!r} declares {pattern!r}, which matches no file; {layout}")
            declared.update(path.resolve() for path in matched)
    undeclared = [
        path.relative_to(folder).as_posix()
        for path in sorted(folder.rglob("*.parquet"))
        if not any(part.startswith(".") for part in path.relative_to(folder).parts) and path.resolve() not in declared
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


# ---------------------------------------------------------------------------------------------------
# Dataset card (its Jinja template: cards/dataset_card.md)


@dataclass
class CardFacts:
    """Everything a card states besides what the build measured, supplied by the builder."""

    title: str
    pretty_name: str
    summary: str
    builder: str
    usage: str
    column_meanings: Mapping[str, str]
    defects: str | Callable[[BuildReport], str]  # a callable gets the report once the rows are counted
    license_id: str
    license_text: str
    citation: str
    tags: Sequence[str] = ()
    task_categories: Sequence[str] = ("zero-shot-image-classification",)


def card_facts(
    dataset: str, *, repo: str, defects: str | Callable[[BuildReport], str] | None = None, **fields: object
) -> CardFacts:
    """The card text of a benchmark, kept as data in ``cards/<dataset>.yaml`` (the card's prose is
    edited there, not in code): ``repo`` (the repository its usage example loads) and ``fields`` fill
    the ``{{ ... }}`` of its summary and usage (Jinja, an unknown name is an error); ``defects`` is the
    builder's measured text unless the file states it."""
    import jinja2

    text = yaml.safe_load(files(__package__).joinpath("cards", f"{dataset}.yaml").read_text(encoding="utf-8"))
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return CardFacts(
        **{name: value for name, value in text.items() if name not in ("summary", "usage", "citations", "defects")},
        summary=environment.from_string(text["summary"]).render(**fields),
        usage=environment.from_string(text["usage"]).render(repo=repo, **fields),
        defects=defects if defects is not None else text["defects"],
        citation=cite(*text["citations"]),
    )


def _dtype(feature) -> str:
    if isinstance(feature, datasets.Value):
        return feature.dtype
    if isinstance(feature, datasets.List) and isinstance(feature.feature, datasets.Value):
        return f"list of {feature.feature.dtype}"
    return type(feature).__name__


def _size_category(num_rows: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if num_rows < limit:
            return label
    return "1M<n<10M"


def _all_columns(configs: Sequence[ExportedConfig]) -> dict:
    """Every column of every config once, in first-seen order (configs may differ in schema)."""
    found: dict = {}
    for config in configs:
        for name, feature in config.features.items():
            found.setdefault(name, feature)
    return found


def completeness_text(report: BuildReport) -> str:
    """Whether these are the upstream rows, and all of them; if not, which inputs were the user's own
    and how many rows and distinct images are missing."""
    return " ".join(part for part in (_sources_text(report), _dropped_text(report)) if part)


def _sources_text(report: BuildReport) -> str:
    if report.local_variants is None:
        return ""
    if not report.local_variants:
        return (
            "Every annotation file is the pinned upstream file (digest checked), so the counts were required "
            "to equal the paper's."
        )
    return (
        f"**Built from local input files that are not the pinned upstream files** ({', '.join(report.local_variants)}): "
        "these rows are the builder's, not necessarily the paper's, and the counts were not required to match it."
    )


def _dropped_text(report: BuildReport) -> str:
    dropped = sum(report.skipped_rows.values())
    if not dropped:
        rows = "Every row of the input files" if report.local_variants else "Every upstream row"
        return f"{rows} is here: no row was dropped."
    per_config = ", ".join(
        f"{name}: {report.skipped_rows.get(name, 0):,} row(s), {len(ids):,} image(s)"
        for name, ids in report.skipped_missing_images.items()
    )
    return (
        f"**Not the complete benchmark: {dropped:,} upstream row(s) were dropped** because their image was "
        f"missing or unreadable at build time (`--skip-missing`): {report.distinct_missing_images:,} distinct image(s) "
        f"in all ({per_config}). They are listed in `build_report.json`; results on this build are not "
        "comparable with the paper's."
    )


def shown_source(origin: str) -> str:
    """A source as the card names it: a URL or Hub id as is, a local path by its name only (a card is pushed
    to the Hub; the builder's folders mean nothing there and may say more than the user wants)."""
    if "://" in origin or not Path(origin).is_absolute():
        return origin
    return f"`{Path(origin).name}` (a local file or folder)"


def render_card(output_dir: Path, configs: Sequence[ExportedConfig], facts: CardFacts, report: BuildReport) -> Path:
    """Write README.md: YAML (configs, dataset_info, license, ...) and the card body."""
    largest = max(config.num_rows for config in configs)
    metadata = DatasetCardData(
        license=facts.license_id,
        pretty_name=facts.pretty_name,
        language=["en"],
        size_categories=[_size_category(largest)],
        task_categories=list(facts.task_categories) or None,
        tags=list(facts.tags) or None,
        configs=[config.config_entry() for config in configs],
        dataset_info=[config.info_entry() for config in configs],
    )
    card = DatasetCard.from_template(
        metadata,
        template_str=files(__package__).joinpath("cards", "dataset_card.md").read_text(encoding="utf-8"),
        title=facts.title,
        summary=facts.summary,
        builder=f"{facts.builder}, hf_hardpos {versions().get('hf_hardpos', 'unknown version')}",
        built_on=datetime.date.today().isoformat(),
        with_paper=any(config.name in report.expected_counts for config in configs),
        config_rows=[
            {
                "name": config.name,
                "split": config.split,
                "rows": f"{config.num_rows:,}",
                "paper": f"{report.expected_counts[config.name]:,}" if config.name in report.expected_counts else "-",
                "shards": len(config.files),
            }
            for config in configs
        ],
        completeness=completeness_text(report),
        usage=facts.usage,
        column_rows=[
            (name, _dtype(feature), facts.column_meanings.get(name, ""))
            for name, feature in _all_columns(configs).items()
        ],
        defects=facts.defects(report) if callable(facts.defects) else facts.defects,
        sources=[(name, shown_source(origin)) for name, origin in sorted(report.sources.items())],
        license_text=facts.license_text,
        citation=facts.citation,
    )
    path = output_dir / "README.md"
    card.save(path)
    return path


# ---------------------------------------------------------------------------------------------------
# The shared export sequence


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
    ``.git`` of a cloned Hub repository, say) are left alone.

    When every input was the pinned upstream file (:attr:`BuildReport.counts_must_match`), a
    config whose upstream rows differ from the paper's count is an error before anything is
    written; rows can then only be dropped by ``--skip-missing``, which the card states.
    ``on_built`` may add counts derived from the flags (it runs before the card is written).
    """
    output_dir = Path(output_dir)
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
                write_config_shards(dataset, staging, config.name, split=split, max_shard_size=options.max_shard_size)
            )
            report.counts[config.name] = len(dataset)
            if config.flags is not None:
                report.flags[config.name] = dict(config.flags(dataset) if callable(config.flags) else config.flags)
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
            (i for i in range(handle.metadata.num_columns)
             if handle.metadata.schema.column(i).path == f"{columns.IMAGE}.bytes"),
            None,
        )
        for group in range(handle.metadata.num_row_groups):
            stats = handle.metadata.row_group(group).column(leaf).statistics if leaf is not None else None
            if stats is not None and stats.has_null_count and stats.null_count == 0:
                continue
            image = handle.read_row_group(group, columns=[columns.IMAGE]).column(columns.IMAGE).combine_chunks()
            nulls = pc.sum(pc.is_null(image.field("bytes"))).as_py() or 0
            if nulls:
                raise DataValidationError(
                    f"{relative}: {nulls} row(s) of row group {group} have no image bytes; the build is not kept"
                )


def _commit(staging: Path, output_dir: Path) -> None:
    """Move a complete, verified build from ``staging`` into ``output_dir``, README last."""
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
    :func:`export_folder`. The builders of benchmarks shipped without images (VALSE, VL-CheckList) share it."""
    images = locate_images(folder, (row for rows in rows_by_config.values() for row in rows), options)
    report.sources["images"] = f"{folder.description}: {images_note}"
    configs = [
        ConfigBuild(name, rows, features, expected_counts.get(name), flags(rows), images)
        for name, rows in rows_by_config.items()
    ]
    return export_folder(output_dir, configs, facts, report, split=split, options=options)
