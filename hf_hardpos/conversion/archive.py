"""Bounds on what a checkpoint archive may make us decompress, checked from its directory before reading.

Why: a zip entry states its compressed and uncompressed sizes, and the storage it holds is also sized
by the pickle that refers to it; none of these is trusted. A 1.5 MB crafted TorchScript `.pt` whose one
entry declared gigabytes of zeros (deflate reaches ~1000:1) made `hardpos convert` allocate 3.2 GB before
any check. Here every entry's declared size is checked before a byte of it is read: against what the
reader expects of it (a storage's numel x itemsize, a small metadata file), and against its compressed
size. `zipfile` itself stops at the declared size and checks the CRC, so an entry larger than it
declares ends in an error, never in more memory.

PyTorch writes its archives uncompressed (`torch.save`, `torch.jit.save`: every entry ZIP_STORED); a
compressed entry may still come from re-zipping, so one is allowed within `MAX_COMPRESSION_RATIO`, far
above what float weights reach and far below a bomb's.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..errors import UserInputError

MAX_COMPRESSION_RATIO = 64  # float weights compress < 1.5:1; an all-zeros bomb ~1000:1
MAX_METADATA_BYTES = 64 * 1024**2  # data.pkl (OpenAI's ViT-L/14: ~100 KB), byteorder, version, constants


def entry_size(archive: zipfile.ZipFile, name: str, where: str, expected: int | None = None) -> int:
    """The declared uncompressed size of entry `name`, refused (one line) if it differs from `expected`
    (None: a metadata entry, at most `MAX_METADATA_BYTES`) or compresses beyond `MAX_COMPRESSION_RATIO`."""
    info = archive.getinfo(name)
    size = info.file_size
    if expected is not None and size != expected:
        raise UserInputError(
            f"checkpoint {where}: entry {name} declares {size} bytes, its tensor needs {expected}"
        )
    if expected is None and size > MAX_METADATA_BYTES:
        raise UserInputError(
            f"checkpoint {where}: entry {name} declares {size} bytes, more than any checkpoint's "
            f"metadata ({MAX_METADATA_BYTES} bytes)"
        )
    stored = info.compress_type == zipfile.ZIP_STORED
    if (stored and info.compress_size != size) or size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
        raise UserInputError(
            f"checkpoint {where}: entry {name} declares {size} bytes from {info.compress_size} "
            "compressed (a decompression bomb, or a damaged archive)"
        )
    return size


def check_zip_sizes(path: str | Path) -> None:
    """Every entry of the zip at `path` within `MAX_COMPRESSION_RATIO` (what `torch.load` may decompress),
    before `torch.load` reads it; a file that is not a zip is left to its reader."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return
    with archive:
        for info in archive.infolist():
            if not info.is_dir():
                entry_size(archive, info.filename, str(path), expected=info.file_size)
