"""The table of benchmarks that live in a folder of their own (`hf_hardpos/benchmarks/<name>/`).

Why a table at the bottom of the house: a benchmark used to be sliced across layers (its builder in
`data/`, its card text in `data/cards/`, its profile in `evaluation/tasks/`, its entry in
`commands/build.py` and in the suites), each table importing it. Now a benchmark's folder declares one
`Benchmark` and registers it here; the tables that use benchmarks (`hardpos build`'s datasets, the
caption-selection profiles, the named suites) read this table and import no benchmark. The package's
`__init__` imports `hf_hardpos.benchmarks`, so the folders have registered before any table is read.

The heavy parts of a declaration (the builder, the task profile) are ``"module:attribute"`` names,
imported when first used (`load`), so registering costs no torch or datasets import and
`hardpos --help` stays light; a test or a plugin may pass the objects themselves. Its data files (its
paper's printed figures, its BibTeX) are ``"package:file"`` names or paths (`data_file`), read by
`hf_hardpos.published` and `hf_hardpos.citations` beside the package's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["BENCHMARKS", "Benchmark", "Buildable", "Option", "PaperSource", "data_file", "data_files", "images_dir_option",
           "load", "option", "register", "subsets_option"]  # fmt: skip

# A command-line option as `parser.add_argument` takes it: (flags, keyword arguments).
Option = tuple[tuple[str, ...], dict]


def option(*flags: str, **kwargs: Any) -> Option:
    """One option of a dataset's `hardpos build` command, as `parser.add_argument(*flags, **kwargs)` takes it."""
    return flags, kwargs


def images_dir_option(help_text: str, required: bool = False) -> Option:
    """`--images-dir`: the folder a builder reads the images from."""
    return option("--images-dir", type=Path, default=None, required=required, help=help_text)


def subsets_option(help_text: str, dest: str = "subsets", **kwargs: Any) -> Option:
    """`--subsets NAME ...`: the configs to build (the builder's keyword `dest`)."""
    return option("--subsets", nargs="+", default=None, dest=dest, metavar="NAME", help=help_text, **kwargs)


@dataclass(frozen=True)
class Buildable:
    """One buildable dataset: its help, its builder, its own options and where `--upstream-dir` points.

    Every option's `dest` is a keyword of the builder, so one call serves every dataset: the
    builder gets its own options, `--upstream-dir` where it has one, and the shared options as
    :class:`~hf_hardpos.data.hub_folder.BuildOptions` fields.
    """

    help: str
    export: Callable[..., object] | str  # or "<module>:<function>", imported only when the dataset is built
    options: tuple[Option, ...]
    upstream: str | None = None  # what --upstream-dir is a copy of; None: the dataset has no such option
    upstream_required: bool = False
    aliases: tuple[str, ...] = ()  # other names of the same command


@dataclass(frozen=True)
class PaperSource:
    """Where a benchmark's published figures were computed: the pinned upstream repository
    (`data.sources.GitHubRepo`, its files pinned by digest) and the rows each config scores there."""

    repo: Any
    rows: dict[str, int]


@dataclass(frozen=True)
class Benchmark:
    """Everything the package knows about one benchmark, declared in its folder.

    Attributes:
        name: the `hardpos build` dataset name, the suite entry's name and the prefix of its published
            figures (``<name>/<column>``).
        build: how `hardpos build <name>` runs its builder.
        task: the evaluation task that scores its data (`evaluation.tasks.TASKS`).
        profile: its `CaptionSelectionProfile` (or ``"module:attribute"`` naming it), for a
            caption-selection benchmark: how its data is recognised and aggregated; None otherwise.
        suites: the named suites it belongs to (`evaluation.suite.SUITES`: ``compositional``,
            ``paper``, ``ce_clip``), in the order the folders register.
        hub_id: the Hub dataset a suite reads (default ``hardpos/<name>``).
        paper_source: its `PaperSource` (or ``"module:attribute"`` naming it): the pinned upstream
            repository the papers' figures were computed on and the rows each config scores, so that
            `evaluation.paper_data` can tell whether a run's data are the paper's; None: no published
            figure of it is ever shown with a difference.
        figures: its paper's printed figures (``"package:figures.yaml"``, or a path), in the record
            format of `hf_hardpos/published/figures.yaml`, read with the package's figures (`published`);
            None: no figure of it is printed.
        references: the BibTeX of the papers its card and profile cite (``"package:references.bib"``, or
            a path), read with the package's bibliography (`citations`); None: it cites only the package's.
    """

    name: str
    build: Buildable
    task: str
    profile: object | str | None = None
    suites: tuple[str, ...] = ()
    hub_id: str = field(default="")
    paper_source: object | str | None = None
    figures: Path | str | None = None
    references: Path | str | None = None

    def __post_init__(self) -> None:
        if not self.hub_id:
            object.__setattr__(self, "hub_id", f"hardpos/{self.name}")


BENCHMARKS: dict[str, Benchmark] = {}


def register(benchmark: Benchmark) -> Benchmark:
    """Add `benchmark` to the table (its folder's one registration); a second one of the same name is refused."""
    if benchmark.name in BENCHMARKS:
        raise ValueError(f"benchmark {benchmark.name!r} is registered twice")
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


def load(reference: object | str) -> Any:
    """The object a declaration names: ``"module:attribute"`` imported now, anything else as given."""
    if not isinstance(reference, str):
        return reference
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def data_file(reference: Path | str) -> Traversable | Path:
    """The file a declaration names: ``"package:file"`` inside an installed package (read through
    `importlib.resources`, so it works from a wheel), anything else as a path."""
    if isinstance(reference, str) and ":" in reference:
        package, _, name = reference.partition(":")
        return files(package).joinpath(name)
    return Path(reference)


def data_files(kind: str) -> tuple[Traversable | Path, ...]:
    """Every registered benchmark's file of `kind` (``"figures"`` or ``"references"``), in registration order."""
    return tuple(data_file(ref) for b in BENCHMARKS.values() if (ref := getattr(b, kind)) is not None)
