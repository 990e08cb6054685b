"""Whether a run's data are the paper's benchmark: the condition for printing a difference to a published figure.

A published figure was measured on one benchmark: all its rows, built from its authors' annotation files.
A difference between our number and that figure means something only when ours was measured on the same
rows, so a difference is printed (text, CSV, JSON, report, card) only when

- the rows scored are all of the paper's rows for the figure (REPLACE 10,575 + 16,868, SWAP 28,748,
  SugarCrepe's per-subset counts, VALSE's valid rows per piece: the builders' constants, checked against
  the upstream files at their pinned commits), and
- the data were built by `hardpos build` from the upstream annotation files this package pins: the
  build's `build_report.json` (recorded at evaluation time in each unit's provenance, `build`) names the
  benchmark, read no local copy that differs from the pinned file (`local_variants` empty), dropped no
  row (`--skip-missing`), and every input of a pinned repository was recorded with the pinned sha256.

Zero-shot retention sets (Table 10) come from clip_benchmark's own Hub datasets, not from a build: they
are the paper's when loaded from `clip-benchmark/wds_<name>` (the repository clip_benchmark 1.6.2 reads)
at a recorded commit, all rows.

Anything else (a hand-made folder of 120 rows, the demo's synthetic sets, a partial build, a run saved
before builds were recorded) still shows the published row, with one line saying what differs, and no
difference. Benchmarks whose annotation files have no digest pinned here (a registered benchmark that
declares no `paper_source`; ARO, distributed through Google Drive without a commit to pin) can never be
shown to be the paper's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..benchmark_registry import BENCHMARKS, load
from ..data.replace import PAPER_COUNTS as REPLACE_COUNTS
from ..data.sources import HARD_POSITIVES_REPO, SUGARCREPE_PP_REPO, SUGARCREPE_REPO
from ..data.sugarcrepe import SUGARCREPE_COUNTS
from ..data.swap import CONFIG as SWAP_CONFIG
from ..data.swap import PAPER_COUNT as SWAP_COUNT
from ..provenance import looks_like_path
from .tasks.webdataset import RETENTION_DATASETS

BUILD_REPORT = "build_report.json"
_BUILT_IN_REPOS = (HARD_POSITIVES_REPO, SUGARCREPE_REPO, SUGARCREPE_PP_REPO)
# Benchmark families whose annotation files this package pins by sha256 (`data.sources`): only their builds
# can be shown to be the paper's data. A benchmark in a folder of its own declares its `paper_source`.
_BUILT_IN_FAMILIES = {
    "replace": HARD_POSITIVES_REPO.name,
    "swap": HARD_POSITIVES_REPO.name,
    "sugarcrepe": SUGARCREPE_REPO.name,
}
ZERO_SHOT = RETENTION_DATASETS
CLIP_BENCHMARK_HUB = "clip-benchmark/wds_{}"
# `Sources.record` writes "<origin>, sha256 <hex>"; a pinned file's origin names its raw GitHub URL.
_RECORDED = re.compile(
    r"raw\.githubusercontent\.com/([^/\s]+/[^/\s]+)/([0-9a-f]{7,40})/(\S+?)[\s,].*sha256 ([0-9a-f]{64})$"
)


def _paper_sources() -> dict[str, Any]:
    """The registered benchmarks' `PaperSource`s by family name (loaded on first use: a builder module)."""
    return {name: load(b.paper_source) for name, b in BENCHMARKS.items() if b.paper_source is not None}


def _pinned_repos() -> dict[str, Any]:
    """Every pinned upstream repository by name: the built-in ones and the registered benchmarks'."""
    repos = [*_BUILT_IN_REPOS, *(source.repo for source in _paper_sources().values())]
    return {repo.name: repo for repo in repos}


def _pinned_family_repo(family: str) -> str | None:
    """The pinned repository a family's paper data come from, None when the package pins none."""
    if family in _BUILT_IN_FAMILIES:
        return _BUILT_IN_FAMILIES[family]
    source = _paper_sources().get(family)
    return source.repo.name if source is not None else None


def _paper_rows(family: str) -> dict[str, int]:
    """Each config's rows in the paper's benchmark (the builders' counts), for the families that have them."""
    if family == "replace":
        return dict(REPLACE_COUNTS)
    if family == "swap":
        return {SWAP_CONFIG: SWAP_COUNT}
    if family == "sugarcrepe":
        return dict(SUGARCREPE_COUNTS)
    source = _paper_sources().get(family)
    return dict(source.rows) if source is not None else {}


def family_of(benchmark: str) -> str:
    """The benchmark a published key belongs to: ``replace/relations`` -> ``replace``, ``valse/avg`` -> ``valse``."""
    return benchmark.split("/")[0]


def _source_checks(sources: Mapping[str, str]) -> dict[str, bool]:
    """Each recorded input of a pinned repository: whether its recorded sha256 is the one pinned for its commit."""
    checks = {}
    pinned_repos = _pinned_repos()
    for name, line in sources.items():
        match = _RECORDED.search(str(line))
        if match is None or match.group(1) not in pinned_repos:
            continue
        repo, ref, path, sha = match.groups()
        pinned = pinned_repos[repo]
        expected = pinned.files.get(path)
        if (
            expected is not None and expected.sha256 is None
        ):  # pinned by git blob: `Sources` checked it on reading
            same = "digest checked against" in line or "identical to" in line
        else:
            same = expected is not None and expected.sha256 == sha
        checks[name] = bool(pinned.ref.startswith(ref) and same)
    return checks


def _report_file(source: str) -> Path | None:
    """The `build_report.json` of a local dataset folder, or of a Hub dataset repository (`push_folder`
    uploads it beside the shards; fetched through the Hub cache, None offline when not cached)."""
    folder = Path(str(source)).expanduser()
    if folder.exists():
        path = folder / BUILD_REPORT
        return path if path.is_file() and not path.is_symlink() else None
    if looks_like_path(str(source)) or str(source).count("/") != 1:
        return None
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(str(source), BUILD_REPORT, repo_type="dataset"))
    except Exception:  # offline and not cached, no such file, gated: the build is not known
        return None


def build_record(source: str) -> dict[str, Any] | None:
    """What the build of a dataset (a local folder or a Hub dataset id) recorded in its `build_report.json`,
    reduced to what the paper-data check reads; None when there is none (not built by `hardpos build`).

    `pinned_inputs` maps each input read from a pinned repository to whether its recorded sha256 is the
    pinned one; `repos` the pinned repositories those inputs came from.
    """
    path = _report_file(source)
    if path is None:
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"dataset": None, "unreadable": True}
    if not isinstance(report, dict):
        return {"dataset": None, "unreadable": True}
    sources = report.get("sources") if isinstance(report.get("sources"), dict) else {}
    repos = sorted(
        {m.group(1) for line in sources.values() if (m := _RECORDED.search(str(line)))} & set(_pinned_repos())
    )
    return {
        "dataset": report.get("dataset"),
        "counts": report.get("counts") or {},
        "expected_counts": report.get("expected_counts") or {},
        "skipped_rows": report.get("skipped_rows") or {},
        "local_variants": report.get("local_variants"),
        "pinned_inputs": _source_checks(sources),
        "repos": repos,
    }


def _build_problems(family: str, build: Mapping[str, Any] | None) -> list[str]:
    """Why a build is not the paper's benchmark `family` (empty: it is)."""
    if build is None:
        return ["not built from the paper's sources (no build_report.json of `hardpos build` recorded)"]
    if build.get("unreadable"):
        return ["its build_report.json could not be read"]
    if build.get("dataset") != family:
        return [f"built as {build.get('dataset')!r}, not the paper's {family}"]
    problems = []
    repo = _pinned_family_repo(family)
    if repo is None:
        return [
            f"{family}'s annotation files have no digest pinned in this package, so the build cannot be "
            "shown to be the paper's"
        ]
    if build.get("local_variants") is None or build.get("local_variants"):
        variants = build.get("local_variants")
        problems.append(
            "built from local copies that are not the paper's files"
            + (f" ({', '.join(map(str, variants))})" if variants else " (not recorded)")
        )
    checks = build.get("pinned_inputs") or {}
    if not checks or repo not in build.get("repos", []):
        problems.append(f"the build recorded no input of {repo} with its pinned digest")
    bad = sorted(name for name, ok in checks.items() if not ok)
    if bad:
        problems.append(f"inputs not the pinned upstream files: {', '.join(bad)}")
    counts, expected = build.get("counts") or {}, build.get("expected_counts") or {}
    short = {c: (n, expected[c]) for c, n in counts.items() if c in expected and n != expected[c]}
    if short:
        problems.append(
            "partial build ("
            + ", ".join(f"{c}: {n:,} of {e:,} rows" for c, (n, e) in short.items())
            + (", --skip-missing" if build.get("skipped_rows") else "")
            + ")"
        )
    return problems


def data_differs(
    benchmark: str,
    configs: Sequence[str],
    results: Mapping[str, Mapping],
    provenance: Mapping[str, Any],
    max_rows: int | None = None,
) -> str | None:
    """What keeps a figure of ours over `configs` from being measured on the paper's benchmark, in one line;
    None when it is (then, and only then, a difference to the printed figure may be shown).

    `results` are the run's rows (their `num_examples`), `provenance` the section's per-unit provenance
    (each unit's data identity and build record, `build`), `max_rows` the run's row limit.
    """
    family = family_of(benchmark)
    units = [p for p in provenance.values() if isinstance(p, dict) and "dataset" in p]
    if family in ZERO_SHOT:
        wanted = CLIP_BENCHMARK_HUB.format(family)
        reasons = [zero_shot_differs(wanted, unit.get("dataset"), max_rows) for unit in units] or [
            "no data identity recorded"
        ]
        return "; ".join(dict.fromkeys(r for r in reasons if r)) or None
    reasons = []
    paper = _paper_rows(family)
    scored = [results.get(c, {}).get("num_examples") for c in configs]
    if configs and all(c in paper for c in configs) and all(isinstance(n, int) for n in scored):
        total, expected = sum(scored), sum(paper[c] for c in configs)
        if total != expected:
            reasons.append(f"{total:,} of {expected:,} rows")
    elif max_rows is not None:
        reasons.append(f"at most {max_rows:,} rows per config scored")
    builds = [unit.get("build") for unit in units] or [None]
    records = [b for b in builds if b is not None]
    problems = _build_problems(family, None if len(records) < len(builds) else records[0])
    if any(other != records[0] for other in records[1:]):
        problems.append("its units come from different builds")
    reasons.extend(p for p in problems if not (reasons and p.startswith("partial build")))
    return "; ".join(reasons) or None


def zero_shot_differs(
    wanted: str, identity: Mapping[str, Any] | None, max_rows: int | None = None
) -> str | None:
    """Why a zero-shot set is not the paper's Table 10 data (None: it is): the paper ran clip_benchmark,
    which reads `clip-benchmark/wds_<name>` from the Hub; ours must be that repository (`wanted`), at a
    recorded commit, every row."""
    identity = identity or {}
    if identity.get("hub_id") != wanted:
        where = identity.get("path") or identity.get("hub_id") or "unknown data"
        return f"not clip_benchmark's {wanted} ({where})"
    if identity.get("revision") is None:
        return f"{wanted} at an unknown commit"
    if max_rows is not None:
        return f"at most {max_rows:,} rows scored"
    return None


def built_as(provenance: Mapping[str, Any]) -> str | None:
    """The benchmark the data's build recorded (`build_report.json`'s `dataset`, e.g. ``swap``), or None: a
    dataset is matched to the paper's benchmark by what it was built as, never by its folder's name."""
    names = {
        unit["build"].get("dataset")
        for unit in provenance.values()
        if isinstance(unit, dict) and isinstance(unit.get("build"), dict)
    }
    return names.pop() if len(names) == 1 else None
