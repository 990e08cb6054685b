"""Where a build's images come from, and how each one is found, checked and read before a row uses it.

Images are looked up by key (a Visual Genome id or a COCO file name) in a local folder, or in the
archive :class:`~.sources.Sources` downloads once; all of them are located (and decoded once) before
the build writes anything, so a missing or unreadable image is refused by name up front, or dropped
and counted with ``--skip-missing``. Nothing an annotation file says is trusted: every image path
taken from an annotation field goes through :func:`path_under`, which refuses absolute paths, ``..``
and symlinks that leave the image folder (a row naming ``../private.txt`` would otherwise put that
file into a public dataset).
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Protocol

from .. import columns
from .checks import DataValidationError, MissingImageError, MissingSourceError
from .sources import VG_PART_URLS, VG_PARTS, Sources

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

        ``hint`` is the VG part named by the annotation (or ``(part, annotated image path)``, whose last
        component is the file name); that part is tried first, then the other one and, for a local
        folder, the flat layout, because annotations are not always right about the part. The file
        name defaults to VG's ``<image_id>.jpg``.
        """
        part, file_name = hint if isinstance(hint, tuple) else (hint, None)
        name = PurePosixPath(relative_name(file_name)).name if file_name else f"{image_id}.jpg"
        parts = [part] if part in VG_PART_URLS else []
        parts += [other for other in VG_PARTS if other not in parts]
        for candidate in parts:
            if part in VG_PART_URLS and candidate != part and self.images_dir is None:
                # Avoid downloading a second multi-gigabyte archive just to look for a stray image.
                continue
            path = path_under(self.part_dir(candidate), name)
            if path.is_file():
                return path, f"{candidate}/{name}"
        if self.images_dir is not None and path_under(self.images_dir, name).is_file():
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
        for name in (file_name, PurePosixPath(file_name).name):
            path = path_under(self._root, name)
            if path.is_file():
                return path, file_name
        return None


class UnsafePathError(DataValidationError):
    """An image path from an annotation field would leave the image folder."""


def relative_name(name: str, root: Path | str = "the image folder") -> str:
    """``name`` unchanged if it is a relative path without ``..``; else :class:`UnsafePathError`."""
    if not isinstance(name, str) or not name or "\0" in name:
        raise UnsafePathError(f"{name!r} is not a file name")
    if (
        PurePosixPath(name).is_absolute()
        or PureWindowsPath(name).is_absolute()
        or PureWindowsPath(name).drive
    ):
        raise UnsafePathError(f"{name!r} is an absolute path; image paths must be relative to {root}")
    if ".." in PureWindowsPath(name).parts:  # PureWindowsPath splits on both / and \
        raise UnsafePathError(f"{name!r} contains '..'; image paths must stay inside {root}")
    return name


def path_under(root: Path, name: str) -> Path:
    """``root / name``, refused unless it stays inside ``root``.

    ``name`` comes from an annotation file, which may be anyone's: an absolute path, a ``..``
    component (``/`` or ``\\`` separated) or a symlink resolving outside ``root`` would let a row embed
    any file of the machine into the dataset. Raises :class:`UnsafePathError` (without the row: the
    caller, :func:`resolve_images`, adds where the name came from).
    """
    path = Path(root) / relative_name(name, root)
    resolved, inside = path.resolve(), Path(root).resolve()
    if not resolved.is_relative_to(inside):
        raise UnsafePathError(
            f"{name!r} is a symlink to {resolved}, outside {inside}; copy the image into the folder instead"
        )
    return path


def unreadable_reason(path: Path) -> str | None:
    """Why ``path`` is not a usable image (empty, not an image, truncated, zero size), or ``None``.

    The image is decoded (JPEGs at 1/8 scale, which still reads every byte), so a corrupt file fails
    here, before the build, instead of being embedded and failing at the first model that reads it.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the read forever
            return "not a regular file"
        if path.stat().st_size == 0:
            return "empty file"
        with Image.open(path) as image:
            if image.width <= 0 or image.height <= 0:
                return f"zero-size image ({image.width}x{image.height})"
            image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        return f"not a readable image ({error})"
    return None


def resolve_images(
    images: VisualGenomeImages | ImageFolder,
    wanted: Mapping[str, object],
    *,
    skip_missing: bool,
    progress: bool = True,
    origins: Mapping[str, str] | None = None,
) -> tuple[dict[str, ImageHit], list[str]]:
    """Find and decode every wanted image (key -> hint) up front, so a missing or corrupt image fails
    before the build.

    Returns the usable images and the sorted keys of the missing or unreadable ones; raises
    :class:`MissingImageError` naming them (the first with the file and row it came from) unless
    ``skip_missing``. ``origins`` (key -> "file: row N field F") names where a key was read. A path
    that leaves the image folder is always an error, ``skip_missing`` or not.
    """
    from tqdm.auto import tqdm

    origins = origins or {}
    found: dict[str, ImageHit] = {}
    missing: list[str] = []
    unreadable: dict[str, str] = {}
    for key, hint in tqdm(wanted.items(), desc="Locating and decoding images", disable=not progress):
        try:
            hit = images.find(key, hint)
        except UnsafePathError as error:
            origin = origins.get(key) or f"{images.key_name} {key!r}"
            raise UnsafePathError(f"{origin}: {error}") from None
        if hit is None:
            missing.append(key)
        elif (reason := unreadable_reason(hit[0])) is not None:
            unreadable[key] = f"{hit[0]}: {reason}"
        else:
            found[key] = hit
    if unreadable and not skip_missing:
        key, problem = next(iter(unreadable.items()))
        origin = origins.get(key) or f"{images.key_name} {key!r}"
        raise MissingImageError(
            f"{len(unreadable)} unreadable image(s); the first: {problem} (used by {origin}). Replace the file, "
            "or pass --skip-missing to build without the rows of missing or unreadable images (counted in the card)."
        )
    if missing and not skip_missing:
        where = images.images_dir if images.images_dir is not None else images.description
        shown = ", ".join(missing[:20]) + (f" (and {len(missing) - 20} more)" if len(missing) > 20 else "")
        first = f" (the first used by {origins[missing[0]]})" if missing[0] in origins else ""
        raise MissingImageError(
            f"{len(missing)} image(s) not found in {where}: {images.key_name} {shown}{first}. "
            "Pass --skip-missing to build without their rows (they are listed in build_report.json)."
        )
    if unreadable:
        print(
            f"Skipped {len(unreadable)} unreadable image(s) (--skip-missing); their rows are dropped and counted."
        )
    return found, sorted([*missing, *unreadable])


def vg_part_of(image_path: str) -> str | None:
    """The VG part named in an upstream ``image_path`` such as ``data/VG_100K_2/2401814.jpg``."""
    for part in Path(image_path).parts:
        if part in VG_PART_URLS:
            return part
    return None


# Reads a found image for a row: (local path, stored path, row) -> the Image feature's {bytes, path}.
ImageEncoder = Callable[[Path, str, dict], dict]


def original_bytes(path: Path, stored_path: str, row: dict) -> dict:
    """The image file as it is (original JPEG bytes, not re-encoded)."""
    return {"bytes": path.read_bytes(), "path": stored_path}


@dataclass
class ImageSpec:
    """How a config's rows get their images: the images found (row key -> (local path, stored path)),
    the keys that were missing (their rows are dropped, ``--skip-missing``), the row field holding the
    key, and how a found image is stored."""

    found: Mapping[str, tuple[Path, str]]
    missing: Collection[str] = ()
    key: str = columns.IMAGE_ID
    encode: ImageEncoder = original_bytes


class ImageSearchOptions(Protocol):
    """What `locate_images` reads of a build's options (`hub_folder.BuildOptions` has both)."""

    skip_missing: bool
    progress: bool


def locate_images(
    folder: ImageFolder | VisualGenomeImages,
    rows: Iterable[dict],
    options: ImageSearchOptions,
    *,
    origin: Callable[[dict], str] | None = None,
    hint: Callable[[dict], object] | None = None,
    encode: ImageEncoder = original_bytes,
) -> ImageSpec:
    """Every image the rows name by ``image_id``, found and decoded before anything is built
    (:func:`resolve_images`). ``origin(row)`` says where the first row of
    an image id was read ("file: row N field F"), for the error about a missing image; ``hint(row)``
    tells ``folder`` where to look (a Visual Genome part)."""
    wanted: dict = {}
    origins: dict[str, str] = {}
    for row in rows:
        key = row[columns.IMAGE_ID]
        if key not in wanted:
            wanted[key] = hint(row) if hint is not None else None
            if origin is not None:
                origins[key] = origin(row)
    found, missing = resolve_images(
        folder, wanted, skip_missing=options.skip_missing, progress=options.progress, origins=origins
    )
    return ImageSpec(found, missing, encode=encode)


def _existing_dir(folder: str | Path | None, option: str) -> Path | None:
    if folder is None:
        return None
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingSourceError(f"{option} {folder} is not a directory")
    return folder
