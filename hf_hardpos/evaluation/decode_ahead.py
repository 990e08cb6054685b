"""Decoding that starts with the process: `hardpos eval` decodes images while it is still importing.

Why: a fresh `hardpos eval` process spends its first seconds importing torch, transformers and datasets
(about 10 s on a 2-core machine) on one core, and the run after that is decode-bound (small models, any
model on a GPU). So before those imports the command forks one process that imports only PIL, numpy and
pyarrow (under a second), reads the dataset folder's parquet files (the split's first, in name order:
the order the run needs them) and decodes their distinct images into a private, temporary pixel folder.
When the run reaches its first images it stops that process, takes what it decoded, and decodes only
the rest (`pixel_store.SharedPixelScorer`).

The pixels must be those the run would decode itself. This process cannot load transformers' processor
(it imports torch), so it computes them with `pil_clip_pixels`, which restates the PIL backend of CLIP's
image processor for the configuration CLIP checkpoints use and refuses any other; images are opened
and keyed by the run's own functions (`image_opening`, `image_keys`). The run then uses them for a
model only after comparing the first ones, bit for bit, with its processor's output
(`pixel_store.PrefilledPixels`), and each entry is checked against its digest before use. So a run with
a head start gives the same scores as one without (tests/evaluation/test_decode_ahead.py), and
`metrics.json` stays a run alone's. The folder is removed when the run ends; the forked process never
prints, ignores Ctrl-C (the run stops it) and exits on any failure of its own, leaving the run to decode
(and report) as usual.

Taken only where it can help and cannot interfere: Linux (fork), a local Hugging Face model folder
(the first model's processor; other models use the pixels only if theirs makes the same), a local
dataset folder, the default `pil` image backend and protocol, no `--suite`, `--max-rows`,
`--pixel-cache` or `torchrun`, at least two CPU cores, and a process that has not imported torch yet
(nothing runs threads at the fork). `--no-decode-ahead` turns it off.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads in the forked process and after the fork, never before it
    import argparse

    from ..pixel_store import PrefilledPixels

PREFIX = "hardpos-decode-ahead-"
# The most the decoder writes (then it stops): ~3,400 images at 224 px, more than a 2-core machine decodes
# while the command imports, and a bound on the temporary folder whatever the dataset's size.
MAX_BYTES = 2 * 1024**3


class DecodeAhead:
    """The forked decoder and its folder; `pixels()` is the run's `PixelStore` over that folder."""

    def __init__(self, directory: Path, process: multiprocessing.process.BaseProcess, stop) -> None:
        self.directory = directory
        self.process = process
        self._stop = stop

    @classmethod
    def begin(cls, model: str, dataset: str, split: str) -> DecodeAhead:
        """Fork the decoder of `dataset`'s images as `model`'s image processor makes them (`pil_clip_pixels`)."""
        directory = Path(tempfile.mkdtemp(prefix=PREFIX))
        context = multiprocessing.get_context("fork")
        stop = context.Event()
        process = context.Process(target=_decode, args=(model, dataset, split, directory, stop), daemon=True)
        process.start()
        return cls(directory, process, stop)

    def stop(self) -> None:
        """Stop the decoder (it finishes the image in hand, or is ended if still importing); idempotent."""
        self._stop.set()
        self.process.join(timeout=0.5)
        if self.process.is_alive():
            self.process.terminate()  # an entry is written under a temporary name, then renamed: never half
            self.process.join()

    def pixels(self, shared: bool) -> PrefilledPixels:
        """The run's pixel store: what the decoder wrote, read once it is stopped (`pixel_store.PrefilledPixels`);
        `shared` (several models): decoded pixels also kept in memory for the other models, as without it."""
        from ..pixel_store import DEFAULT_MEMORY_BYTES, PrefilledPixels

        return PrefilledPixels(self.directory, self.stop, memory_bytes=DEFAULT_MEMORY_BYTES if shared else 0)

    def close(self) -> None:
        """Stop the decoder and remove its folder (ours: made by `begin`, written only by the decoder)."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def wanted(args: argparse.Namespace) -> tuple[str, str] | None:
    """(model folder, dataset folder) when `hardpos eval ARGS` takes a head start (module docstring), else None."""
    models = args.model or []
    if (
        getattr(args, "no_decode_ahead", False)
        or sys.platform != "linux"
        or "torch" in sys.modules
        or (os.cpu_count() or 1) < 2
        or int(os.environ.get("WORLD_SIZE", "1")) > 1
        or args.dataset is None
        or args.models
        or args.max_rows is not None
        or args.protocol != "default"  # `paper` preprocesses its own way
        or args.image_backend != "pil"  # the backend `pil_clip_pixels` restates
        or args.pixel_cache is not None
        or not models
        or not Path(args.dataset).expanduser().is_dir()
        or not (Path(models[0]).expanduser() / "config.json").is_file()  # a Hugging Face model folder
    ):
        return None
    return str(Path(models[0]).expanduser()), str(Path(args.dataset).expanduser())


def _decode(model: str, dataset: str, split: str, directory: Path, stop) -> None:
    """The forked process: decode the distinct images of `dataset`'s parquet files (the `split`'s first)
    into `directory`, with PIL and numpy alone (`pil_clip_pixels`), until `stop` is set."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's; the run stops this process
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        import pyarrow.parquet as pq

        from .. import columns
        from ..image_keys import image_key
        from ..image_opening import open_image
        from ..pil_clip_pixels import ClipPixels
        from ..pixel_entries import AHEAD_KEY, write_entry

        pixels = ClipPixels.from_model_folder(model)
        if pixels is None:
            return
        target = directory / AHEAD_KEY[:32]
        target.mkdir()
        seen: set[str] = set()
        written = 0
        for path in _parquet_files(Path(dataset), split):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=64, columns=[columns.IMAGE]):
                for cell in batch.column(0).to_pylist():
                    if stop.is_set():
                        return
                    if not isinstance(cell, dict) or cell.get("bytes") is None:
                        continue  # images by path: read where the run reads them
                    key = image_key(cell, 0)
                    if key in seen:
                        continue
                    seen.add(key)
                    image = open_image(cell)
                    if ClipPixels.takes(image):
                        written += write_entry(target / f"{key}.npy", AHEAD_KEY, key, pixels(image))
                    if written >= MAX_BYTES:
                        return
    except BaseException:  # noqa: BLE001 - the run decodes whatever this did not, and reports its errors
        pass
    finally:
        os._exit(0)


def _parquet_files(root: Path, split: str) -> list[Path]:
    """The parquet files under `root` (no link followed: nothing outside the folder is read), those whose
    name starts with `split` first, each group in name order (a Hub folder's configs in the order listed)."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found += [
            Path(folder) / f
            for f in sorted(files)
            if f.endswith(".parquet") and not os.path.islink(Path(folder) / f)
        ]
    return sorted(found, key=lambda path: not path.name.startswith(split))
