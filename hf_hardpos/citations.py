"""BibTeX of every paper the package implements, evaluates on or converts from, kept once
(the bibliography is data, in the format it is cited in): `references.bib` beside this module, the
model backends' `backends/references.bib` and each registered benchmark's own file
(`benchmark_registry.Benchmark.references`, e.g. `benchmarks/<name>/references.bib`), so a paper only
one folder cites lives in that folder. A key is defined once across them all (a second definition is
refused, naming both files).

Cards (dataset, model, metric) and loss modules pick entries by key with `cite`, so one paper is
always cited under one key with one text. The `evaluate_modules/<name>/` folders must build as Hub Spaces
without this package, so `metrics/generate.py` writes the entries they cite into them from here
(`tests/repository/test_metric_modules.py` regenerates them and checks the committed files are equal).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from importlib.resources import files

from .benchmark_registry import data_files

PACKAGE_FILES = (files(__package__) / "references.bib", files(__package__) / "backends" / "references.bib")


def _entries(bibtex: str) -> dict[str, str]:
    """Each entry of a .bib text (entries separated by a blank line) under its key."""
    return {entry[entry.index("{") + 1 : entry.index(",")]: entry for entry in bibtex.strip().split("\n\n")}


def read_bibliography(sources: Iterable) -> dict[str, str]:
    """Every entry of the .bib files `sources`, by key; a key defined in two files is refused (one line
    naming both), so one paper is always cited with one text."""
    entries: dict[str, str] = {}
    where: dict[str, object] = {}
    for source in sources:
        for key, entry in _entries(source.read_text(encoding="utf-8")).items():
            if key in where:
                raise ValueError(f"{source}: BibTeX key {key!r} is already defined in {where[key]}")
            entries[key], where[key] = entry, source
    return entries


class _Bibliography(Mapping[str, str]):
    """The package's entries and those of every registered benchmark, read again when a benchmark
    registers (a plugin or a test may register one after import)."""

    def __init__(self) -> None:
        self._read: tuple[tuple, dict[str, str]] | None = None

    def _current(self) -> dict[str, str]:
        sources = (*PACKAGE_FILES, *data_files("references"))
        key = tuple(map(str, sources))
        if self._read is None or self._read[0] != key:
            self._read = (key, read_bibliography(sources))
        return self._read[1]

    def __getitem__(self, key: str) -> str:
        return self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


BIBTEX: Mapping[str, str] = _Bibliography()

# Named keys, so a typo is an ImportError rather than a KeyError at card-rendering time.
HARD_POSITIVES = "kamath2024hard"
CLIP = "radford2021learning"
SVLC = "doveh2023teaching"
DAC = "doveh2023dense"
CE_CLIP = "zhang2024contrasting"
ARO = "yuksekgonul2023when"
CREPE = "ma2023crepe"
COCO = "lin2014microsoft"
SUGARCREPE = "hsieh2023sugarcrepe"
SUGARCREPE_PP = "dumpala2024sugarcrepepp"
WINOGROUND = "thrush2022winoground"
CLIP_BENCHMARK = "cherti2023reproducible"  # clip_benchmark asks to be cited with this paper


def cite(*keys: str) -> str:
    """The BibTeX entries for `keys`, in order, without repeats, separated by blank lines."""
    unknown = [k for k in keys if k not in BIBTEX]
    if unknown:
        raise KeyError(f"no BibTeX entry for {unknown}; known keys: {sorted(BIBTEX)}")
    return "\n\n".join(BIBTEX[k] for k in dict.fromkeys(keys))
