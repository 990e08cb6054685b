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
  plus their own writes, so together they may pass the bound by what each wrote. Files are written atomically (`output_folder.atomic_path`), one `.npy` per
  image, under a folder named by the settings digest, which also holds `settings.json` saying what
  produced them.

Pixels are float32 exactly as the processor returned them, so a model scored from shared pixels
gets the embeddings it would get decoding alone: same values, same batches (see `SharedPixelScorer`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .evaluation import output_folder
from .image_processing import describe_image_processor
from .provenance import digest_of, versions
from .image_keys import ImageSource
from .scoring import ITMScorer, _DistinctImages

GIB = 1024**3
DEFAULT_MEMORY_BYTES = 4 * GIB  # one run's shared pixels in memory (REPLACE at 224 px: ~7 GB for all 11,723 images)


def pixel_settings(image_processor) -> dict:
    """What decides the pixels: the processor's backend and pixel settings (`describe_image_processor`)
    and the versions of the libraries that decode and resize. Its digest keys the stored pixels, and it
    is written beside them (`settings.json`)."""
    description = describe_image_processor(image_processor)
    libraries = ("pillow", "numpy", *(("torchvision",) if description.get("backend") == "torchvision" else ()))
    return {"image_processor": description, "versions": versions(*libraries)}


@dataclass
class PixelStats:
    """What the store did this run (reported at the end of `hardpos eval`)."""

    from_memory: int = 0
    from_disk: int = 0
    decoded: int = 0
    written: int = 0
    not_written_full: int = 0


class PixelStore:
    """Preprocessed pixels by (settings key, image content key), in memory and optionally on disk."""

    def __init__(
        self,
        directory: str | Path | None = None,
        max_disk_bytes: int | None = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
    ):
        if max_disk_bytes is not None and max_disk_bytes <= 0:
            raise ValueError(f"max_disk_bytes must be > 0, got {max_disk_bytes}")
        self.directory = Path(directory).expanduser() if directory is not None else None
        self.max_disk_bytes = max_disk_bytes
        self.memory_bytes = memory_bytes
        self._memory: dict[tuple[str, str], torch.Tensor] = {}
        self._memory_used = 0
        self.stats = PixelStats()
        self._disk_used = 0
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._disk_used = sum(f.stat().st_size for f in self.directory.glob("*/*.npy"))

    def disk_usage(self) -> tuple[int, int]:
        """(files, bytes) of pixels in the folder now (0, 0 without one)."""
        if self.directory is None:
            return 0, 0
        files = list(self.directory.glob("*/*.npy"))
        return len(files), sum(f.stat().st_size for f in files)

    def _file(self, settings_key: str, image_key: str) -> Path:
        assert self.directory is not None
        return self.directory / settings_key[:32] / f"{image_key}.npy"

    def has(self, settings_key: str, image_key: str) -> bool:
        if (settings_key, image_key) in self._memory:
            return True
        return self.directory is not None and self._file(settings_key, image_key).is_file()

    def get(self, settings_key: str, image_key: str) -> torch.Tensor | None:
        """The stored pixels, or None (an unreadable file counts as absent and is decoded again)."""
        pixels = self._memory.get((settings_key, image_key))
        if pixels is not None:
            self.stats.from_memory += 1
            return pixels
        if self.directory is None:
            return None
        try:
            pixels = torch.from_numpy(np.load(self._file(settings_key, image_key), allow_pickle=False))
        except (OSError, ValueError):
            return None
        self.stats.from_disk += 1
        self._remember(settings_key, image_key, pixels)
        return pixels

    def put(self, settings_key: str, image_key: str, pixels: torch.Tensor, settings: dict | None = None) -> None:
        """Keep freshly decoded pixels in memory (within its budget) and on disk (within its bound)."""
        self.stats.decoded += 1
        self._remember(settings_key, image_key, pixels)
        if self.directory is None:
            return
        target = self._file(settings_key, image_key)
        size = pixels.numel() * pixels.element_size() + 128  # the .npy header
        if self.max_disk_bytes is not None and self._disk_used + size > self.max_disk_bytes:
            self.stats.not_written_full += 1
            return
        if not target.parent.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            if settings is not None:
                output_folder.write_json(target.parent / "settings.json", settings)
        with output_folder.atomic_path(target) as partial:
            with open(partial, "wb") as handle:  # a file object: np.save would append ".npy" to a name
                np.save(handle, pixels.numpy(), allow_pickle=False)
        self._disk_used += target.stat().st_size
        self.stats.written += 1

    def _remember(self, settings_key: str, image_key: str, pixels: torch.Tensor) -> None:
        size = pixels.numel() * pixels.element_size()
        if self._memory_used + size <= self.memory_bytes:
            self._memory[(settings_key, image_key)] = pixels
            self._memory_used += size

    def summary(self) -> str:
        """One line: where this run's pixels came from, and the folder's size against its bound."""
        s = self.stats
        line = (f"pixels: {s.decoded} images decoded, {s.from_memory} shared in memory between models"
                + (f", {s.from_disk} read from {self.directory}" if self.directory is not None else ""))
        if self.directory is not None:
            files, used = self.disk_usage()
            bound = f" of {self.max_disk_bytes / GIB:.2f} GiB allowed" if self.max_disk_bytes is not None else ""
            line += f"; pixel cache {self.directory}: {files} images, {used / GIB:.3f} GiB{bound}"
            if s.not_written_full:
                line += f" (full: {s.not_written_full} new images not written)"
        return line


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

    def _pixel_batches(self, dataset, image_column: str, sources: list[ImageSource]) -> Iterator[torch.Tensor]:
        if self.pixels is None:
            yield from super()._pixel_batches(dataset, image_column, sources)
            return
        store, key = self.pixels, self.pixel_key
        stored = [store.has(key, source.key) for source in sources]
        missing = [source for source, known in zip(sources, stored) if not known]
        decoded: Iterator[torch.Tensor] = iter(())
        if missing:
            decoded = iter(torch.utils.data.DataLoader(
                _DistinctImages(dataset, image_column, missing, self.processor.image_processor),
                batch_size=self.batch_size, num_workers=self.num_workers,
            ))
        settings = self.pixel_settings
        waiting: deque[torch.Tensor] = deque()
        for start in range(0, len(sources), self.batch_size):
            batch = []
            for index in range(start, min(start + self.batch_size, len(sources))):
                source = sources[index]
                pixels = store.get(key, source.key) if stored[index] else None
                if pixels is None and stored[index]:  # its file vanished or is unreadable: decoded here
                    pixels = _DistinctImages(dataset, image_column, [source], self.processor.image_processor)[0]
                    store.put(key, source.key, pixels, settings)
                elif pixels is None:
                    if not waiting:
                        waiting.extend(t.clone() for t in next(decoded))
                    pixels = waiting.popleft()
                    store.put(key, source.key, pixels, settings)
                batch.append(pixels)
            yield torch.stack(batch)
