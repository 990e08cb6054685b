"""Where each upstream input comes from: a local copy when the user has one, else a cached download.

Builders ask for annotation files by their path *inside the upstream repository* (``data/...``) so a
local clone and the download give byte-identical inputs, and for images by key (a Visual Genome id or
a COCO file name). Downloads go through ``datasets.DownloadManager`` (cached, extracted once); the
manager is created only when something must be fetched, which keeps local builds and the tests
offline. Every input is recorded with its sha256 for the dataset card.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .checks import MissingImageError, MissingSourceError


@dataclass(frozen=True)
class GitHubRepo:
    """An upstream repository at a fixed ref (a commit where we checked the files, or a branch)."""

    name: str
    ref: str

    def raw_url(self, path: str) -> str:
        return f"https://raw.githubusercontent.com/{self.name}/{self.ref}/{path}"


HARD_POSITIVES_REPO = GitHubRepo("amitakamath/hard_positives", "main")
# Pinned to the commits whose files the builders were checked on (counts, alignment, defects).
SUGARCREPE_REPO = GitHubRepo("RAIVNLab/sugar-crepe", "0047054b243992f0fad63d6f64f7544862daf846")
SUGARCREPE_PP_REPO = GitHubRepo("Sri-Harsha/scpp", "c083bbf039a5ca215acaf25e7ee736d2ea6f3864")
ARO_REPO = "mertyg/vision-language-models-are-bows"


def google_drive_url(file_id: str) -> str:
    return f"https://drive.google.com/uc?export=download&id={file_id}"


# ARO distributes its annotations and its VG crops' source images through Google Drive (ids from its
# dataset_zoo/aro_datasets.py, commit 81fdd20).
ARO_FILES = {
    "visual_genome_attribution.json": google_drive_url("13tWvOrNOLHxl3Rm9cR3geAdHx2qR3-Tw"),
    "visual_genome_relation.json": google_drive_url("1kX2iCHEv0CADL8dSO1nMdW-V0NqIAiP3"),
}
ARO_IMAGES_URL = google_drive_url("1qaPlrwhGNMrR3a11iopZUT_GPP_LrgP9")  # vgr_vga_images.zip -> images/

# Visual Genome 1.2 ships its images in two archives; each extracts to a folder named after its part.
VG_PART_URLS = {
    "VG_100K": "https://cs.stanford.edu/people/rak248/VG_100K_2/images.zip",
    "VG_100K_2": "https://cs.stanford.edu/people/rak248/VG_100K_2/images2.zip",
}
VG_PARTS = tuple(VG_PART_URLS)

COCO_ANNOTATIONS_URL = "http://images.cocodataset.org/annotations/annotations_trainval2014.zip"
COCO_CAPTIONS_FILE = "annotations/captions_train2014.json"
COCO_VAL2017_URL = "http://images.cocodataset.org/zips/val2017.zip"  # extracts to val2017/


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Sources:
    """Resolve upstream files to local paths, from ``upstream_dir`` or by (cached) download.

    Args:
        upstream_dir: a folder laid out like ``repo`` (e.g. ``data/``, ``swapped_data/``). When given,
            nothing from that repository is downloaded and a file missing there is an error rather
            than a silent download.
        cache_dir: where the download manager caches downloads and extractions (default: the
            ``datasets`` cache).
        repo: the upstream repository the relative paths refer to.
    """

    def __init__(
        self,
        upstream_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        repo: GitHubRepo = HARD_POSITIVES_REPO,
    ):
        self.upstream_dir = Path(upstream_dir) if upstream_dir is not None else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.repo = repo
        self._dl_manager = None
        self.provenance: dict[str, str] = {}

    @property
    def dl_manager(self):
        """The ``datasets.DownloadManager``, created on first use."""
        if self._dl_manager is None:
            from datasets import DownloadConfig, DownloadManager

            config = DownloadConfig(cache_dir=str(self.cache_dir) if self.cache_dir else None)
            self._dl_manager = DownloadManager(dataset_name="hardpos", download_config=config)
        return self._dl_manager

    def upstream_file(self, relative_path: str) -> Path:
        """A file of the upstream repository, by its path in that repository."""
        url = self.repo.raw_url(relative_path)
        if self.upstream_dir is not None:
            path = self.upstream_dir / relative_path
            if not path.is_file():
                raise MissingSourceError(
                    f"{path} not found: --upstream-dir must be laid out like github.com/{self.repo.name} "
                    f"(expected {relative_path} inside it)"
                )
            return self.record(relative_path, path, f"{url} (read from a local copy)")
        return self.record(relative_path, self.download(url), url)

    def local_or_download(self, name: str, local_dir: str | Path | None, url: str, option: str) -> Path:
        """``local_dir/name`` when the user gave ``option``, else ``url`` through the download manager."""
        if local_dir is not None:
            path = Path(local_dir) / name
            if not path.is_file():
                raise MissingSourceError(f"{path} not found: {option} must be a folder holding {name}")
            return self.record(name, path, f"{url} (read from a local copy)")
        return self.record(name, self.download(url), url)

    def record(self, name: str, path: Path, origin: str) -> Path:
        """Note where an input came from, with its sha256, for the dataset card's provenance."""
        self.provenance[name] = f"{origin}, sha256 {sha256_of(path)}"
        return path

    def download(self, url: str) -> Path:
        return Path(self.dl_manager.download(url))

    def download_and_extract(self, url: str) -> Path:
        return Path(self.dl_manager.download_and_extract(url))


ImageHit = tuple[Path, str]  # (local path, path to store in the dataset)


class VisualGenomeImages:
    """Find Visual Genome images by id in a local folder or in the downloaded VG archives.

    A local ``images_dir`` may hold the two VG parts (``VG_100K/<id>.jpg``, ``VG_100K_2/<id>.jpg``)
    and/or a flat folder of ``<id>.jpg`` (ARO's ``images/``). Without a folder, the archive of a part
    is downloaded (and extracted, once, into the cache) the first time an image of that part is needed.
    """

    key_name = "image_id"

    def __init__(self, images_dir: str | Path | None, sources: Sources, option: str = "--images-dir"):
        self.images_dir = _existing_dir(images_dir, option)
        self.sources = sources
        self._part_dirs: dict[str, Path] = {}

    @property
    def description(self) -> str:
        if self.images_dir is not None:
            return f"local Visual Genome folder ({', '.join(f'`{part}/`' for part in VG_PARTS)} or flat)"
        return ", ".join(f"{part}: {url}" for part, url in VG_PART_URLS.items())

    def part_dir(self, part: str) -> Path:
        if part not in self._part_dirs:
            if self.images_dir is not None:
                self._part_dirs[part] = self.images_dir / part
            else:
                self._part_dirs[part] = self.sources.download_and_extract(VG_PART_URLS[part]) / part
        return self._part_dirs[part]

    def find(self, image_id: str, hint: tuple[str | None, str | None] | str | None = None) -> ImageHit | None:
        """``(local path, path relative to the VG root)`` of an image, or ``None``.

        ``hint`` is the VG part named by the annotation (or ``(part, file name)``); that part is tried
        first, then the other one and, for a local folder, the flat layout, because annotations are
        not always right about the part. The file name defaults to VG's ``<image_id>.jpg``.
        """
        part, file_name = hint if isinstance(hint, tuple) else (hint, None)
        name = file_name or f"{image_id}.jpg"
        parts = [part] if part in VG_PART_URLS else []
        parts += [other for other in VG_PARTS if other not in parts]
        for candidate in parts:
            if part in VG_PART_URLS and candidate != part and self.images_dir is None:
                # Avoid downloading a second multi-gigabyte archive just to look for a stray image.
                continue
            path = self.part_dir(candidate) / name
            if path.is_file():
                return path, f"{candidate}/{name}"
        if self.images_dir is not None and (self.images_dir / name).is_file():
            return self.images_dir / name, name
        return None


class ImageFolder:
    """Images by file name in one flat folder: a local one, or the folder an archive extracts to
    (COCO ``val2017.zip`` -> ``val2017/``), downloaded only when an image is first looked up."""

    key_name = "file name"

    def __init__(
        self,
        images_dir: str | Path | None,
        sources: Sources,
        *,
        archive_url: str | None = None,
        archive_folder: str = "",
        option: str = "--images-dir",
    ):
        self.images_dir = _existing_dir(images_dir, option)
        if self.images_dir is None and archive_url is None:
            raise MissingSourceError(f"no image folder given and no archive to download: pass {option}")
        self.sources = sources
        self.archive_url = archive_url
        self.archive_folder = archive_folder
        self._root: Path | None = self.images_dir

    @property
    def description(self) -> str:
        return "local image folder (by file name)" if self.images_dir is not None else str(self.archive_url)

    def find(self, file_name: str, hint=None) -> ImageHit | None:
        """``root/file_name``; for a name with a folder part (``val2014/x.jpg``) also ``root/x.jpg``, so
        the folder itself may be given."""
        if self._root is None:
            self._root = self.sources.download_and_extract(self.archive_url) / self.archive_folder
        for path in (self._root / file_name, self._root / Path(file_name).name):
            if path.is_file():
                return path, file_name
        return None


def resolve_images(
    images: VisualGenomeImages | ImageFolder,
    wanted: Mapping[str, object],
    *,
    skip_missing: bool,
    progress: bool = True,
) -> tuple[dict[str, ImageHit], list[str]]:
    """Find every wanted image (key -> hint) up front, so a missing image fails before the build.

    Returns the found images and the sorted keys of the missing ones; raises
    :class:`MissingImageError` naming them unless ``skip_missing``.
    """
    from tqdm.auto import tqdm

    found: dict[str, ImageHit] = {}
    missing: list[str] = []
    for key, hint in tqdm(wanted.items(), desc="Locating images", disable=not progress):
        hit = images.find(key, hint)
        if hit is None:
            missing.append(key)
        else:
            found[key] = hit
    if missing and not skip_missing:
        where = images.images_dir if images.images_dir is not None else images.description
        shown = ", ".join(missing[:20]) + (f" (and {len(missing) - 20} more)" if len(missing) > 20 else "")
        raise MissingImageError(
            f"{len(missing)} image(s) not found in {where}: {images.key_name} {shown}. "
            "Pass --skip-missing to build without their rows (they are listed in build_report.json)."
        )
    return found, sorted(missing)


def vg_part_of(image_path: str) -> str | None:
    """The VG part named in an upstream ``image_path`` such as ``data/VG_100K_2/2401814.jpg``."""
    for part in Path(image_path).parts:
        if part in VG_PART_URLS:
            return part
    return None


def _existing_dir(folder: str | Path | None, option: str) -> Path | None:
    if folder is None:
        return None
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingSourceError(f"{option} {folder} is not a directory")
    return folder
