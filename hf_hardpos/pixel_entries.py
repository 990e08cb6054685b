"""One stored image's pixels as a file: a plain `.npy` followed by a digest that binds it to its image and
settings (`pixel_store` says why and how it is checked).

Why its own module: torch-free, so `evaluation.decode_ahead`'s process can write entries before torch is
imported, in exactly the format the pixel store reads.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np

from . import output_folder

PIXEL_DTYPE = np.dtype("<f4")  # what every processor returns, and all an entry may hold
TRAILER_MAGIC = b"HPPIX1"  # after the .npy data: this, then the entry's digest
DIGEST_BYTES = 32
# The settings key `evaluation.decode_ahead` writes under: its process cannot know the run's processor
# digest (that needs transformers, hence torch); `pixel_store.PrefilledPixels` checks the pixels instead.
AHEAD_KEY = "decoded-ahead-pil-clip"


def entry_digest(settings_key: str, image_key: str, array: np.ndarray) -> bytes:
    """Binds an entry's pixels to the image and settings it claims to be: a file moved or copied under
    another image's name no longer matches. (An entry written before these checks has no digest: it is
    rejected once and rewritten.)"""
    digest = hashlib.sha256()  # SHA-NI on current CPUs: faster than blake2b on ~0.6 MB of pixels
    digest.update(f"{settings_key}\0{image_key}\0{array.dtype.str}\0{array.shape}\0".encode())
    digest.update(memoryview(np.ascontiguousarray(array)).cast("B"))
    return digest.digest()


def write_entry(target: Path, settings_key: str, image_key: str, array: np.ndarray) -> int:
    """Write `array` (float32) as the entry `target`, atomically (a reader never sees half a file); its bytes."""
    with output_folder.atomic_path(target) as partial:
        with open(partial, "wb") as handle:  # a file object: np.save would append ".npy" to a name
            np.save(handle, array, allow_pickle=False)
            handle.write(TRAILER_MAGIC + entry_digest(settings_key, image_key, array))
            return handle.tell()


def read_entry(path: Path, settings_key: str, image_key: str, shape: tuple[int, ...] | None) -> np.ndarray:
    """An entry's pixels once every check passed; ValueError (or OSError) naming the first that failed.

    The header is checked before the data is read, and the file's size must be exactly header, data
    and trailer, so nothing larger than the expected pixels is ever allocated."""
    with open(path, "rb") as handle:
        major, _ = np.lib.format.read_magic(handle)
        read_header = (
            np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        )
        found_shape, fortran_order, dtype = read_header(handle)
        if dtype != PIXEL_DTYPE or fortran_order:
            raise ValueError(
                f"{path}: dtype {dtype}{' (Fortran order)' if fortran_order else ''}, not float32"
            )
        if (shape is not None and found_shape != tuple(shape)) or (shape is None and len(found_shape) != 3):
            raise ValueError(f"{path}: shape {found_shape}, the settings give {shape}")
        data_bytes = math.prod(found_shape) * PIXEL_DTYPE.itemsize
        if (
            os.fstat(handle.fileno()).st_size
            != handle.tell() + data_bytes + len(TRAILER_MAGIC) + DIGEST_BYTES
        ):
            raise ValueError(f"{path}: size does not match its header and trailer")
        array = np.frombuffer(handle.read(data_bytes), dtype=PIXEL_DTYPE).reshape(found_shape)
        trailer = handle.read()
    if trailer != TRAILER_MAGIC + entry_digest(settings_key, image_key, array):
        raise ValueError(f"{path}: its digest does not match image {image_key} under these settings")
    return array.copy()  # writable, owned: frombuffer's view is read-only
