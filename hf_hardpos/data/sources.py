"""Where each upstream file comes from: a local directory when the user has one, else a cached download.

Every builder asks this module for files by their *upstream* relative path (``data/...``,
``swapped_data/...``) so that a local copy laid out like the upstream repository and the download
give byte-identical inputs. Downloads go through ``datasets.DownloadManager`` so they are cached and
extracted once; the manager is created only when something must actually be fetched, which keeps
fully local builds (and the tests) offline.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .validation import MissingImageError

HARD_POSITIVES_REPO = "amitakamath/hard_positives"
HARD_POSITIVES_BRANCH = "main"
ARO_REPO = "mertyg/vision-language-models-are-bows"

# ARO distributes its annotations through Google Drive (ids from its dataset_zoo/aro_datasets.py).
ARO_ATTRIBUTION_URL = "https://drive.google.com/uc?export=download&id=13tWvOrNOLHxl3Rm9cR3geAdHx2qR3-Tw"
ARO_ATTRIBUTION_FILE = "visual_genome_attribution.json"

# Visual Genome 1.2 ships its images in two archives; each extracts to a folder named after its part.
VG_PART_URLS = {
    "VG_100K": "https://cs.stanford.edu/people/rak248/VG_100K_2/images.zip",
    "VG_100K_2": "https://cs.stanford.edu/people/rak248/VG_100K_2/images2.zip",
}
VG_PARTS = tuple(VG_PART_URLS)

COCO_ANNOTATIONS_URL = "http://images.cocodataset.org/annotations/annotations_trainval2014.zip"
COCO_CAPTIONS_FILE = "annotations/captions_train2014.json"
COCO_TRAIN_IMAGES_URL = "http://images.cocodataset.org/zips/train2014.zip"
COCO_TRAIN_IMAGES_FOLDER = "train2014"


def github_raw_url(repo: str, branch: str, path: str) -> str:
    """The raw-file URL of ``path`` in ``repo`` at ``branch``."""
    return f"https://raw.githubusercontent.com/{repo}/{branch}/{path}"


class Sources:
    """Resolve upstream files to local paths, from ``upstream_dir`` or by (cached) download.

    Args:
        upstream_dir: a folder laid out like the hard_positives repository (``data/``,
            ``swapped_data/``, ``hard_positives_ft/``). When given, nothing from that repository is
            downloaded and a file missing there is an error rather than a silent download.
        cache_dir: where the download manager caches downloads and extractions
            (default: the ``datasets`` cache).
    """

    def __init__(self, upstream_dir: str | Path | None = None, cache_dir: str | Path | None = None):
        self.upstream_dir = Path(upstream_dir) if upstream_dir is not None else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
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
        """A file of the hard_positives repository, by its path in that repository."""
        url = github_raw_url(HARD_POSITIVES_REPO, HARD_POSITIVES_BRANCH, relative_path)
        if self.upstream_dir is not None:
            path = self.upstream_dir / relative_path
            if not path.is_file():
                raise FileNotFoundError(
                    f"{path} not found: --upstream-dir must be laid out like {HARD_POSITIVES_REPO} "
                    f"(expected {relative_path} inside it)"
                )
            return self.record(relative_path, path, f"{url} (read from a local copy)")
        return self.record(relative_path, self.download(url), url)

    def record(self, name: str, path: Path, origin: str) -> Path:
        """Note where an input came from, with its sha256, for the dataset card's provenance."""
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self.provenance[name] = f"{origin}, sha256 {digest.hexdigest()}"
        return path

    def download(self, url: str) -> Path:
        return Path(self.dl_manager.download(url))

    def download_and_extract(self, url: str) -> Path:
        return Path(self.dl_manager.download_and_extract(url))


class VisualGenomeImages:
    """Find Visual Genome images by id in a local folder or in the downloaded VG archives.

    A local ``images_dir`` may hold the two VG parts (``VG_100K/<id>.jpg``, ``VG_100K_2/<id>.jpg``)
    and/or a flat folder of ``<id>.jpg`` (ARO's ``images/``). Without a folder, the archive of a part
    is downloaded (and extracted, once, into the cache) the first time an image of that part is needed.
    """

    def __init__(self, images_dir: str | Path | None, sources: Sources):
        self.images_dir = Path(images_dir) if images_dir is not None else None
        if self.images_dir is not None and not self.images_dir.is_dir():
            raise FileNotFoundError(f"--images-dir {self.images_dir} is not a directory")
        self.sources = sources
        self._part_dirs: dict[str, Path] = {}

    def part_dir(self, part: str) -> Path:
        if part not in VG_PART_URLS:
            raise ValueError(f"unknown Visual Genome part {part!r}; expected one of {VG_PARTS}")
        if part not in self._part_dirs:
            if self.images_dir is not None:
                self._part_dirs[part] = self.images_dir / part
            else:
                self._part_dirs[part] = self.sources.download_and_extract(VG_PART_URLS[part]) / part
        return self._part_dirs[part]

    def find(
        self, image_id: str, part: str | None = None, file_name: str | None = None
    ) -> tuple[Path, str] | None:
        """Return ``(local path, path relative to the VG root)`` of an image, or ``None``.

        ``part`` (from the annotation's image_path) is tried first; the other part and, for a local
        folder, the flat layout are tried after it, because annotations are not always right about it.
        ``file_name`` defaults to VG's ``<image_id>.jpg``.
        """
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

    def resolve_all(
        self,
        wanted: dict[str, str | None | tuple[str | None, str | None]],
        *,
        skip_missing: bool,
        progress: bool = True,
    ) -> tuple[dict[str, tuple[Path, str]], list[str]]:
        """Resolve every ``image_id -> part hint`` (or ``(part hint, file name)``) up front, so a missing
        image fails before the build.

        Returns the found images and the sorted ids of the missing ones; raises
        :class:`MissingImageError` naming the ids unless ``skip_missing``.
        """
        from tqdm.auto import tqdm

        found: dict[str, tuple[Path, str]] = {}
        missing: list[str] = []
        for image_id, hint in tqdm(wanted.items(), desc="Locating images", disable=not progress):
            part, file_name = hint if isinstance(hint, tuple) else (hint, None)
            hit = self.find(image_id, part, file_name)
            if hit is None:
                missing.append(image_id)
            else:
                found[image_id] = hit
        if missing and not skip_missing:
            where = self.images_dir if self.images_dir is not None else "the downloaded VG archives"
            shown = ", ".join(missing[:20]) + (f" (and {len(missing) - 20} more)" if len(missing) > 20 else "")
            raise MissingImageError(
                f"{len(missing)} image(s) not found in {where}: image_id {shown}. "
                "Pass --skip-missing to build without their rows (they are listed in build_report.json)."
            )
        return found, sorted(missing)


def vg_part_of(image_path: str) -> str | None:
    """The VG part named in an upstream ``image_path`` such as ``data/VG_100K_2/2401814.jpg``."""
    for part in Path(image_path).parts:
        if part in VG_PART_URLS:
            return part
    return None
