"""Tiny datasets in clip_benchmark's webdataset layout (tar shards, nshards.txt, root metadata files), and
the reference reader that reads them back with plain `tarfile`."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

CLASSNAMES = ["red cube", "blue sphere", "green cone", "small dog", "large cat", "wine bottle"]
TEMPLATES = ["a photo of a {c}.", "a drawing of the {c}", "{c}"]
WORDS = ["red", "blue", "cube", "sphere", "left", "right", "holding", "small", "large", "dog", "cat"]


def image_bytes(rng: np.random.Generator, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (18, 22, 3), dtype=np.uint8)).save(buffer, format=fmt)
    return buffer.getvalue()


def write_webdataset(
    root: Path, samples: list[dict[str, bytes]], split="test", nshards=2, **root_files: str
) -> Path:
    """`samples[i]` maps extension -> file bytes; written as `<split>/{0..n-1}.tar` + `nshards.txt`."""
    (root / split).mkdir(parents=True, exist_ok=True)
    (root / split / "nshards.txt").write_text(f"{nshards}\n")
    for shard in range(nshards):
        with tarfile.open(root / split / f"{shard}.tar", "w") as tar:
            for index in range(shard, len(samples), nshards):
                for ext, data in samples[index].items():
                    info = tarfile.TarInfo(f"s{index:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    for name, text in root_files.items():
        (root / f"{name}.txt").write_text(text)
    return root


def read_webdataset(root: Path, split="test") -> list[dict[str, bytes]]:
    """The reference reader: plain `tarfile`, samples grouped by key, shards in order."""
    samples: dict[str, dict[str, bytes]] = {}
    nshards = int((root / split / "nshards.txt").read_text())
    for shard in range(nshards):
        with tarfile.open(root / split / f"{shard}.tar") as tar:
            for member in tar.getmembers():
                key, ext = member.name.split(".", 1)
                samples.setdefault(key, {})[ext] = tar.extractfile(member).read()
    return list(samples.values())
