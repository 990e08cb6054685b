"""Decoded, preprocessed images kept by content, so several models (and later runs) decode each image once.

Why: with small models, or any model on a GPU, evaluation is decode-bound. A ViT-B/32 forward pass
costs ~0.1 ms per image on a GPU while decoding and resizing a Visual Genome JPEG costs ~2-3 ms per
CPU core, and a sweep (the paper's Table 1 has 14 models, Table 8 another 14) used to decode every
image once per model. Here the pixels a model's image processor produced are kept under the image's
content key and the processor's settings, and any model whose processor produces the same pixels
(same backend, size, resize, crop, rescale, mean and std) takes them instead of decoding again.

Two tiers:
* memory, for the models of one run (`hardpos eval --model A --model B ...`), bounded by
  `memory_bytes` (beyond it, images are decoded again for each model: slower, never different);
* an optional folder (`--pixel-cache DIR`), so a later run with new checkpoints skips decoding too,
  bounded by `max_disk_bytes`: once full, new pixels are not written (reported, never evicted behind
  the user's back). Processes sharing a folder (`evaluation.distributed`) each count it as they found it
  plus their own writes, so together they may pass the bound by what each wrote. Files are written
  atomically (`output_folder.atomic_path`), one `.npy` per image, under a folder named by the settings
  digest, which also holds `settings.json` saying what produced them.

The folder is untrusted (shared between machines, copied, edited, on a disk that fills up), so it can
only make a run slower, never different: each entry is a plain `.npy` (`np.load` reads it) followed by a
trailer holding the SHA-256 digest of (settings key, image key, dtype, shape, pixel bytes). Before an
entry is used its header is checked against the shape and dtype the processor produces (before any
data is read: a crafted header cannot make us allocate), then its digest is recomputed: two files
swapped, a file of zeros, the same values saved as float64 or a truncated file are *rejected*, decoded
again and *rewritten*, and counted (`PixelStats`, recorded per config in `metrics.json`). The digest
catches accidents and careless edits, not a forger who recomputes it: whoever can write the folder
chooses the pixels, as whoever can write the dataset chooses the images. A failed write (disk full,
read-only folder) turns writing off for the rest of the run with one warning; scoring goes on.

Pixels are float32 exactly as the processor returned them, so a model scored from shared pixels
gets the embeddings it would get decoding alone: same values, same batches (see `SharedPixelScorer`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from . import output_folder
from .errors import warn
from .image_decoding import DistinctImages, decoded_batches
from .image_keys import ImageSource
from .image_processing import describe_image_processor
from .pixel_entries import AHEAD_KEY, DIGEST_BYTES, PIXEL_DTYPE, TRAILER_MAGIC, read_entry, write_entry
from .provenance import digest_of, versions
from .scoring import ITMScorer

GIB = 1024**3
DEFAULT_MEMORY_BYTES = (
    4 * GIB
)  # one run's shared pixels in memory (REPLACE at 224 px: ~7 GB for all 11,723 images)
SMALLEST_BOUND_BYTES = 1024**2  # a bound below one MiB holds no 224 px image: surely a typo


def pixel_settings(image_processor) -> dict:
    """What decides the pixels: the processor's backend and pixel settings (`describe_image_processor`)
    and the versions of the libraries that decode and resize. Its digest keys the stored pixels, and it
    is written beside them (`settings.json`)."""
    description = describe_image_processor(image_processor)
    libraries = (
        "pillow",
        "numpy",
        *(("torchvision",) if description.get("backend") == "torchvision" else ()),
    )
    return {"image_processor": description, "versions": versions(*libraries)}


def expected_shape(image_processor) -> tuple[int, ...] | None:
    """The shape of every image's pixels under `image_processor`, found by processing two small blank
    images of opposite aspect ratios; None when the shape follows the image (a processor that does
    not crop to a fixed size), in which case only the dtype and the digest are checked."""
    shapes = {
        tuple(image_processor(images=Image.new("RGB", size), return_tensors="pt")["pixel_values"][0].shape)
        for size in ((37, 23), (23, 37))
    }
    return shapes.pop() if len(shapes) == 1 else None


LARGEST_BOUND_GB = 1e9  # an exabyte: more than any disk, and its bytes still fit an int64


def bound_bytes(gigabytes: float) -> int:
    """`--pixel-cache-max-gb` in bytes; refused (ValueError, one line) unless at least 1 MiB and at most
    `LARGEST_BOUND_GB` (1e308 GB is finite, but not as a number of bytes)."""
    if (
        not math.isfinite(gigabytes)
        or not SMALLEST_BOUND_BYTES <= gigabytes * GIB
        or gigabytes > LARGEST_BOUND_GB
    ):
        raise ValueError(
            f"must be a size from {SMALLEST_BOUND_BYTES / GIB:.6f} GB (1 MiB) to {LARGEST_BOUND_GB:g} GB, got {gigabytes:g}"
        )
    return int(gigabytes * GIB)


@dataclass
class PixelStats:
    """What the store did (reported at the end of `hardpos eval`; a config's share in its `metrics.json`)."""

    from_memory: int = 0
    from_disk: int = 0  # entries reused from the folder after their checks passed
    decoded: int = 0
    written: int = 0
    rejected: int = 0  # entries of the folder that failed a check (decoded again instead)
    rewritten: int = 0  # rejected entries replaced by freshly decoded pixels
    not_written_full: int = 0
    not_written_failed: int = 0  # after a failed write turned writing off

    def since(self, before: PixelStats) -> dict[str, int]:
        """The counts added since `before` (a copy taken earlier)."""
        return {f.name: getattr(self, f.name) - getattr(before, f.name) for f in dataclasses.fields(self)}


class PixelStore:
    """Preprocessed pixels by (settings key, image content key), in memory and optionally on disk."""

    def __init__(
        self,
        directory: str | Path | None = None,
        max_disk_bytes: int | None = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        warn: Callable[[str], None] = warn,
    ):
        if max_disk_bytes is not None and max_disk_bytes <= 0:
            raise ValueError(f"max_disk_bytes must be > 0, got {max_disk_bytes}")
        self.directory = Path(directory).expanduser() if directory is not None else None
        self.max_disk_bytes = max_disk_bytes
        self.memory_bytes = memory_bytes
        self.warn = warn
        self.write_error: str | None = None  # set by the first failed write: no more writes this run
        self._memory: dict[tuple[str, str], torch.Tensor] = {}
        self._memory_used = 0
        self.stats = PixelStats()
        self._disk_used = 0
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._disk_used = self.disk_usage()[1]

    def disk_usage(self) -> tuple[int, int]:
        """(files, bytes) of pixels in the folder now (0, 0 without one)."""
        if self.directory is None:
            return 0, 0
        sizes = []
        for path in self.directory.glob("*/*.npy"):
            with contextlib.suppress(FileNotFoundError):  # another process may be replacing it
                sizes.append(path.stat().st_size)
        return len(sizes), sum(sizes)

    def _file(self, settings_key: str, image_key: str) -> Path:
        assert self.directory is not None
        return self.directory / settings_key[:32] / f"{image_key}.npy"

    def _entry(self, settings_key: str, image_key: str) -> tuple[Path, str] | None:
        """The file that may hold these pixels and the settings key its digest binds, or None (no folder)."""
        if self.directory is None:
            return None
        return self._file(settings_key, image_key), settings_key

    def has(self, settings_key: str, image_key: str) -> bool:
        if (settings_key, image_key) in self._memory:
            return True
        entry = self._entry(settings_key, image_key)
        return entry is not None and entry[0].is_file()

    def get(
        self, settings_key: str, image_key: str, shape: tuple[int, ...] | None = None
    ) -> torch.Tensor | None:
        """The stored pixels, or None: absent, or rejected by a check (counted; the caller decodes again).

        `shape`: what the settings produce (`expected_shape`), checked before any data is read."""
        pixels = self._memory.get((settings_key, image_key))
        if pixels is not None:
            self.stats.from_memory += 1
            return pixels
        entry = self._entry(settings_key, image_key)
        if entry is None:
            return None
        try:
            array = read_entry(*entry, image_key, shape)
        except (OSError, ValueError):  # unreadable, vanished since `has`, or failed a check
            self.stats.rejected += 1
            return None
        pixels = torch.from_numpy(array)
        self.stats.from_disk += 1
        self._remember(settings_key, image_key, pixels)
        return pixels

    def put(
        self,
        settings_key: str,
        image_key: str,
        pixels: torch.Tensor,
        settings: dict | None = None,
        replacing: bool = False,
    ) -> None:
        """Keep freshly decoded pixels in memory (within its budget) and on disk (within its bound).
        `replacing`: they replace an entry `get` rejected (counted as rewritten once written)."""
        self.stats.decoded += 1
        self._remember(settings_key, image_key, pixels)
        if self.directory is None:
            return
        if self.write_error is not None:
            self.stats.not_written_failed += 1
            return
        array = np.ascontiguousarray(pixels.numpy(), dtype=PIXEL_DTYPE)
        size = array.nbytes + 128 + len(TRAILER_MAGIC) + DIGEST_BYTES  # 128: the .npy header
        if self.max_disk_bytes is not None and self._disk_used + size > self.max_disk_bytes:
            self.stats.not_written_full += 1
            return
        try:
            written = self._write(
                self._file(settings_key, image_key), settings_key, image_key, array, settings
            )
        except OSError as err:  # the folder is optional: a full or read-only disk must not stop the run
            self.write_error = err.strerror or str(err)
            self.stats.not_written_failed += 1
            self.warn(
                f"pixel cache {self.directory}: cannot write ({self.write_error}); "
                "no more pixels are written to it this run (scores are unaffected)"
            )
            return
        self._disk_used += written
        self.stats.written += 1
        self.stats.rewritten += replacing

    def _write(
        self, target: Path, settings_key: str, image_key: str, array: np.ndarray, settings: dict | None
    ) -> int:
        if not target.parent.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            if settings is not None:
                output_folder.write_json(target.parent / "settings.json", settings)
        return write_entry(target, settings_key, image_key, array)

    def settle(
        self, settings_key: str, sources: list[ImageSource], decode: Callable[[ImageSource], torch.Tensor]
    ) -> None:
        """Called before a scorer lists which of `sources` the store holds under `settings_key`; `decode`
        gives a source's pixels as the scorer's processor makes them. Nothing to do for this store; one
        that another process fills stops it here, and checks its pixels against `decode`."""

    def _remember(self, settings_key: str, image_key: str, pixels: torch.Tensor) -> None:
        size = pixels.numel() * pixels.element_size()
        if self._memory_used + size <= self.memory_bytes:
            self._memory[(settings_key, image_key)] = pixels
            self._memory_used += size

    def snapshot(self) -> PixelStats:
        """A copy of the counts so far, for `record` to subtract."""
        return dataclasses.replace(self.stats)

    def record(self, before: PixelStats) -> dict | None:
        """What `metrics.json` says of the pixels behind a config when they may have come from the folder:
        which folder, and the counts since `before`. None without a folder: pixels shared in memory between
        the models of one run are those each would decode alone, and its metrics.json stays a run alone's."""
        if self.directory is None:
            return None
        return {"pixel_cache": str(self.directory), **self.stats.since(before)}

    def summary(self) -> str:
        """One line: where this run's pixels came from, and the folder's size against its bound."""
        s = self.stats
        line = f"pixels: {s.decoded} images decoded, {s.from_memory} shared in memory between models" + (
            f", {s.from_disk} read from {self.directory}" if self.directory is not None else ""
        )
        if self.directory is not None:
            files, used = self.disk_usage()
            bound = (
                f" of {self.max_disk_bytes / GIB:.2f} GiB allowed" if self.max_disk_bytes is not None else ""
            )
            line += f"; pixel cache {self.directory}: {files} images, {used / GIB:.3f} GiB{bound}"
            if s.rejected:
                line += f" ({s.rejected} entries failed their checks and were decoded again, {s.rewritten} rewritten)"
            if s.not_written_full:
                line += f" (full: {s.not_written_full} new images not written)"
            if self.write_error is not None:
                line += f" (writing stopped: {self.write_error}; {s.not_written_failed} images not written)"
        return line


class PrefilledPixels(PixelStore):
    """Pixels decoded ahead by another process of this run into a private, temporary folder
    (`evaluation.decode_ahead`, with `pil_clip_pixels`, which restates the processor without torch).

    Used for a processor only once `settle` has stopped that process and found its pixels equal, bit for
    bit, to the processor's own on the first images it holds (up to `CHECKED`); else never, and everything
    is decoded as usual. Each entry is then checked like any other (`pixel_entries.read_entry`). The
    run's own decodes are kept in memory only (within `memory_bytes`: none for a single model), never
    in the folder, which is not a cache; `metrics.json` stays a run alone's: the pixels are those the run
    would have decoded."""

    CHECKED = 2

    def __init__(
        self, directory: Path, stop_writer: Callable[[], None], memory_bytes: int = DEFAULT_MEMORY_BYTES
    ):
        super().__init__(directory, memory_bytes=memory_bytes)
        self.stop_writer = stop_writer
        self.equal: dict[str, bool] = {}  # settings key -> whether the folder's pixels are its processor's

    def _entry(self, settings_key: str, image_key: str) -> tuple[Path, str] | None:
        if not self.equal.get(settings_key):
            return None
        return self._file(AHEAD_KEY, image_key), AHEAD_KEY

    def settle(
        self, settings_key: str, sources: list[ImageSource], decode: Callable[[ImageSource], torch.Tensor]
    ) -> None:
        self.stop_writer()
        if settings_key in self.equal:
            return
        held = list(islice((s for s in sources if self._file(AHEAD_KEY, s.key).is_file()), self.CHECKED))
        if not held:  # nothing to compare yet: decided at the next call that finds some
            return
        try:
            ahead = [
                torch.from_numpy(read_entry(self._file(AHEAD_KEY, s.key), AHEAD_KEY, s.key, None))
                for s in held
            ]
        except (OSError, ValueError):
            ahead = []
        self.equal[settings_key] = len(ahead) == len(held) and all(
            a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(ahead, map(decode, held))
        )

    def put(self, settings_key, image_key, pixels, settings=None, replacing=False) -> None:
        self.stats.decoded += 1
        self._remember(settings_key, image_key, pixels)

    def record(self, before: PixelStats) -> dict | None:
        return None

    def summary(self) -> str:
        s = self.stats
        refused = (
            " (the decoded-ahead pixels differed from the processor's: not used)"
            if False in self.equal.values()
            else ""
        )
        return (
            f"pixels: {s.decoded} images decoded, {s.from_disk} decoded ahead while the process started, "
            f"{s.from_memory} shared in memory between models{refused}"
        )


class SharedPixelScorer(ITMScorer):
    """`ITMScorer` that takes pixels from a `PixelStore` and decodes only the images it lacks.

    Batches hold the same images in the same order as `ITMScorer`'s own DataLoader would give, so the
    embeddings are those of a run that decodes alone.
    """

    def __init__(self, *args, pixels: PixelStore | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.pixels = pixels  # None: decode as `ITMScorer` does (what a subclass may ask for)
        self.pixel_settings = pixel_settings(self.processor.image_processor) if pixels is not None else {}
        self.pixel_key = digest_of(self.pixel_settings)
        self.pixel_shape = expected_shape(self.processor.image_processor) if pixels is not None else None

    def _pixel_batches(
        self, dataset, image_column: str, sources: list[ImageSource]
    ) -> Iterator[torch.Tensor]:
        if self.pixels is None:
            yield from super()._pixel_batches(dataset, image_column, sources)
            return
        store, key = self.pixels, self.pixel_key
        store.settle(
            key,
            sources,
            lambda source: DistinctImages(
                dataset, image_column, [source], self.processor.image_processor
            ).pixels(0),
        )
        stored = [store.has(key, source.key) for source in sources]
        missing = [source for source, known in zip(sources, stored) if not known]
        decoded: Iterator[torch.Tensor] = iter(())
        if missing:
            decoded = decoded_batches(
                DistinctImages(dataset, image_column, missing, self.processor.image_processor),
                self.batch_size,
                self.num_workers,
            )
        settings = self.pixel_settings
        waiting: deque[torch.Tensor] = deque()
        for start in range(0, len(sources), self.batch_size):
            batch = []
            for index in range(start, min(start + self.batch_size, len(sources))):
                source = sources[index]
                pixels = store.get(key, source.key, self.pixel_shape) if stored[index] else None
                if pixels is None and stored[index]:  # vanished, unreadable or rejected: decoded here
                    pixels = DistinctImages(
                        dataset, image_column, [source], self.processor.image_processor
                    ).pixels(0)
                    store.put(key, source.key, pixels, settings, replacing=True)
                elif pixels is None:
                    if not waiting:
                        waiting.extend(t.clone() for t in next(decoded))
                    pixels = waiting.popleft()
                    store.put(key, source.key, pixels, settings)
                batch.append(pixels)
            yield torch.stack(batch)
