"""Read clip_benchmark's webdatasets (`clip-benchmark/wds_<name>` on the Hub, or a local copy).

Why these files: the zero-shot retention figures of the paper (Appendix E: ImageNet-1k, VTAB, COCO
and Flickr30k retrieval) are what everyone computes with clip_benchmark, whose datasets already sit
on the Hub in one layout. Reading that layout directly means no re-packaging and the same images,
class names and prompt templates as the published numbers.

The layout, as clip_benchmark's `build_wds_dataset` (clip_benchmark/datasets/builder.py) reads it:

    <root>/<split>/nshards.txt                      the number of shards n (required)
    <root>/<split>/0.tar ... <split>/{n-1}.tar       samples <key>.{webp,png,jpg,jpeg} + <key>.cls
                                                    (class index) or <key>.txt (captions, one a line)
    <root>/classnames.txt                           one class name a line (classification)
    <root>/zeroshot_classification_templates.txt    one prompt template a line, `{c}` = class name
    <root>/dataset_type.txt                         `retrieval`; absent means classification

Metadata lines are `str.strip()`-ed and captions split with `str.splitlines()`, as upstream does.
The shards are read with `datasets`' `webdataset` builder (columns named by extension, plus
`__key__`/`__url__`), so a Hub dataset is downloaded once and cached like any other; the small root
files come through `huggingface_hub.snapshot_download` with an allow-list, never the shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from datasets import Dataset, load_dataset

from ...errors import UserInputError

ZEROSHOT_CLASSIFICATION = "zeroshot_classification"
ZEROSHOT_RETRIEVAL = "zeroshot_retrieval"

# The paper's Table 10 (Kamath et al., ECCV 2024) single datasets as clip_benchmark's Hub webdatasets name
# them (`clip-benchmark/wds_<name>`); its VTAB column is a mean over tasks, laid out by
# `evaluation.retention_table`.
RETENTION_DATASETS = ("imagenet1k", "mscoco_captions", "flickr30k")

NSHARDS_FILE = "nshards.txt"
CLASSNAMES_FILE = "classnames.txt"
TEMPLATES_FILE = "zeroshot_classification_templates.txt"
DATASET_TYPE_FILE = "dataset_type.txt"
ROOT_FILES = (CLASSNAMES_FILE, TEMPLATES_FILE, DATASET_TYPE_FILE)

# clip_benchmark takes the first of these a sample has (`to_tuple(["webp", "png", "jpg", "jpeg"], ...)`).
IMAGE_EXTENSIONS = ("webp", "png", "jpg", "jpeg")
LABEL_COLUMN = "cls"  # decoded to int by the `webdataset` builder
CAPTIONS_COLUMN = "txt"  # newline-separated captions of the sample's image
KEY_COLUMN = "__key__"


@dataclass
class ClipBenchmarkWebDataset:
    """One split of a clip_benchmark webdataset, loaded.

    `dataset` has the image column `image_column`, `cls` (classification) or `txt` (retrieval) and
    `__key__`; `classnames`/`templates` are set for classification only.
    """

    source: str
    split: str
    task: str
    dataset: Dataset
    image_column: str
    classnames: list[str] | None = None
    templates: list[str] | None = None


def _is_local(source: str | Path) -> bool:
    return Path(source).expanduser().exists()


def _metadata_dir(source: str | Path, split: str, revision: str | None, cache_dir: str | None) -> Path:
    """A local folder holding the root files and `<split>/nshards.txt` (downloaded for a Hub id)."""
    if _is_local(source):
        return Path(source).expanduser()
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        folder = snapshot_download(
            str(source),
            repo_type="dataset",
            revision=revision,
            cache_dir=cache_dir,
            allow_patterns=[*ROOT_FILES, f"{split}/{NSHARDS_FILE}"],
        )
    except RepositoryNotFoundError as err:
        raise UserInputError(
            f"{source!r} is neither a local folder nor a Hub dataset you can access "
            "(for clip_benchmark's data use an id like clip-benchmark/wds_imagenet1k)"
        ) from err
    except (LocalEntryNotFoundError, HfHubHTTPError) as err:
        raise UserInputError(
            f"cannot fetch the metadata files of the Hub dataset {source!r} ({type(err).__name__}); "
            "check the network (HF_HUB_OFFLINE=1 needs it in the cache) or pass a local folder"
        ) from err
    return Path(folder)


def _read_lines(path: Path) -> list[str]:
    """clip_benchmark's reading: `[line.strip() for line in text.splitlines()]`."""
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]


def _task_from_metadata(metadata: Path, split: str, source: str) -> str | None:
    """The task a folder's files call for, or None when it is not a clip_benchmark webdataset split."""
    if not (metadata / split / NSHARDS_FILE).is_file():
        return None
    type_file = metadata / DATASET_TYPE_FILE
    dataset_type = (
        type_file.read_text(encoding="utf-8").strip().lower() if type_file.is_file() else "classification"
    )
    if dataset_type == "retrieval":
        return ZEROSHOT_RETRIEVAL
    if dataset_type == "classification":
        return ZEROSHOT_CLASSIFICATION
    raise UserInputError(
        f"{source}: {DATASET_TYPE_FILE} says {dataset_type!r}; supported are 'retrieval' and "
        "'classification' (or no such file); multi-label ('multilabel', .npy labels) is not supported"
    )


def is_clip_benchmark_webdataset(source: str | Path) -> bool:
    """True for a local folder in clip_benchmark's layout: some `<split>/nshards.txt` below it.

    Cheap and offline, for dispatching a local `--dataset`; a Hub id needs `detect_webdataset_task`.
    """
    folder = Path(source).expanduser()
    return folder.is_dir() and any(folder.glob(f"*/{NSHARDS_FILE}"))


def detect_webdataset_task(
    source: str | Path, split: str = "test", *, revision: str | None = None, cache_dir: str | None = None
) -> str | None:
    """`"zeroshot_classification"`, `"zeroshot_retrieval"`, or None when `source` (a local folder or a
    Hub dataset id) has no `<split>/nshards.txt`.

    Mirrors clip_benchmark: `dataset_type.txt` = `retrieval` means retrieval, no such file means
    classification. For a Hub id only the small metadata files are downloaded.
    """
    return _task_from_metadata(_metadata_dir(source, split, revision, cache_dir), split, str(source))


def _shard_files(source: str | Path, metadata: Path, split: str, revision: str | None) -> list[str]:
    """The `n` shard paths of `split`: local files, or `hf://` URLs the `datasets` cache downloads."""
    raw = (metadata / split / NSHARDS_FILE).read_text(encoding="utf-8").strip()
    try:
        count = int(raw)
    except ValueError:
        raise UserInputError(
            f"{source}: {split}/{NSHARDS_FILE} must hold a shard count, found {raw!r}"
        ) from None
    if count < 1:
        raise UserInputError(
            f"{source}: {split}/{NSHARDS_FILE} says {count} shards; there must be at least one"
        )
    names = [f"{split}/{index}.tar" for index in range(count)]
    if _is_local(source):
        missing = [name for name in names if not (metadata / name).is_file()]
        if missing:
            raise UserInputError(
                f"{source}: {split}/{NSHARDS_FILE} announces {count} shards but {len(missing)} are missing "
                f"(first: {missing[0]}); copy them or fix the count"
            )
        return [str(metadata / name) for name in names]
    at = f"@{quote(revision, safe='')}" if revision else ""  # "refs/pr/1" must stay one path segment
    return [f"hf://datasets/{source}{at}/{name}" for name in names]


def _image_column(dataset: Dataset, source: str) -> str:
    """The samples' image field: the first of `IMAGE_EXTENSIONS` present, as clip_benchmark picks."""
    present = [ext for ext in IMAGE_EXTENSIONS if ext in dataset.column_names]
    if not present:
        raise UserInputError(
            f"{source}: the shards' samples have no image (looked for .{', .'.join(IMAGE_EXTENSIONS)}; "
            f"found fields {[c for c in dataset.column_names if not c.startswith('__')]})"
        )
    return present[0]


def _load_shards(source: str | Path, split: str, files: list[str], cache_dir: str | None) -> Dataset:
    """The shards through `datasets`' `webdataset` builder (downloaded once and cached for Hub files).

    Local shards are cached by content (`eval_data.content_cache_dir` of their sha256), never by
    path and modification time: a folder rebuilt and copied with its times kept would otherwise
    return the previous shards' rows.
    """
    if cache_dir is None and _is_local(source):
        from ...provenance import sha256_files
        from ..eval_data import content_cache_dir

        cache_dir = content_cache_dir(sha256_files(files))
    try:
        return load_dataset("webdataset", data_files={split: files}, split=split, cache_dir=cache_dir)
    except ValueError as err:
        if "WebDataset format" not in str(err):
            raise
        # `datasets` infers the columns from the first samples and needs every sample to have the
        # same fields; clip_benchmark's converter writes one image format per dataset.
        raise UserInputError(
            f"{source} ({split}): the samples of the shards do not all have the same fields "
            "(e.g. some .jpg, some .png); re-export the split with one image format"
        ) from err


def load_clip_benchmark_webdataset(
    source: str | Path,
    split: str = "test",
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
) -> ClipBenchmarkWebDataset:
    """Load one split of a clip_benchmark webdataset from a local folder or a Hub dataset id.

    Raises `UserInputError` naming the file or sample at fault when the layout is incomplete.
    """
    metadata = _metadata_dir(source, split, revision, cache_dir)
    task = _task_from_metadata(metadata, split, str(source))
    if task is None:
        found = sorted(p.parent.name for p in metadata.glob(f"*/{NSHARDS_FILE}"))
        raise UserInputError(
            f"{source}: no {split}/{NSHARDS_FILE}, so split {split!r} is not in clip_benchmark's webdataset "
            f"layout (splits found: {found or 'none'})"
        )
    classnames = templates = None
    if task == ZEROSHOT_CLASSIFICATION:
        for name in (CLASSNAMES_FILE, TEMPLATES_FILE):
            if not (metadata / name).is_file():
                raise UserInputError(
                    f"{source}: zero-shot classification needs {name} beside the split folders"
                )
        classnames = _read_lines(metadata / CLASSNAMES_FILE)
        templates = _read_lines(metadata / TEMPLATES_FILE)
        if not classnames or not templates:
            empty = CLASSNAMES_FILE if not classnames else TEMPLATES_FILE
            raise UserInputError(f"{source}: {empty} is empty")

    files = _shard_files(source, metadata, split, revision)
    dataset = _load_shards(source, split, files, cache_dir)
    label = LABEL_COLUMN if task == ZEROSHOT_CLASSIFICATION else CAPTIONS_COLUMN
    if label not in dataset.column_names:
        raise UserInputError(
            f"{source}: {task} needs a .{label} file per sample; the shards hold "
            f"{[c for c in dataset.column_names if not c.startswith('__')]}"
        )
    image_column = _image_column(dataset, str(source))
    return ClipBenchmarkWebDataset(
        source=str(source),
        split=split,
        task=task,
        dataset=dataset,
        image_column=image_column,
        classnames=classnames,
        templates=templates,
    )


def load_task_rows(
    dataset: str | Path | ClipBenchmarkWebDataset,
    task: str,
    split: str,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    max_rows: int | None = None,
) -> tuple[ClipBenchmarkWebDataset, Dataset]:
    """The loaded webdataset and its first `max_rows` samples, refusing one made for another task.

    Both zero-shot tasks start here, so a retrieval set passed to classification (or the reverse),
    and an empty split, fail with the same message before any encoding.
    """
    loaded = (
        dataset
        if isinstance(dataset, ClipBenchmarkWebDataset)
        else load_clip_benchmark_webdataset(dataset, split, revision=revision, cache_dir=cache_dir)
    )
    if loaded.task != task:
        raise UserInputError(f"{loaded.source} is a {loaded.task} dataset ({DATASET_TYPE_FILE}), not {task}")
    rows = (
        loaded.dataset
        if max_rows is None
        else loaded.dataset.select(range(min(max_rows, len(loaded.dataset))))
    )
    if len(rows) == 0:
        raise UserInputError(f"{loaded.source} ({loaded.split}) has no samples")
    return loaded, rows


def retention_benchmark(dataset: str, row: str, metrics=None) -> str | None:
    """Table 10's benchmark a zero-shot result measures: the dataset's name (without clip_benchmark's
    `wds_` prefix) when it is one of `RETENTION_DATASETS`, for its one row `all`; else None."""
    name = Path(str(dataset).rstrip("/")).name.lower().removeprefix("wds_")
    return name if row == "all" and name in RETENTION_DATASETS else None
