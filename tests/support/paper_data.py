"""A build record of the paper's own data, as `hardpos build` writes it after downloading every pinned upstream
file and checking its digest (the files themselves are not available offline: the download is replaced by
stand-in files that `Sources` is told match, and each is recorded with the digest pinned for its commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_hardpos.data import sources as sources_module
from hf_hardpos.data.build_report import BuildReport


def write_paper_build_report(
    folder: Path,
    dataset: str,
    files: list[str],
    counts: dict[str, int],
    repo=sources_module.HARD_POSITIVES_REPO,
) -> Path:
    """`folder/build_report.json` of a complete build of `dataset` from `files` of `repo` at its pinned commit."""
    folder.mkdir(parents=True, exist_ok=True)
    stand_ins = {}
    for index, name in enumerate(files):
        path = folder / f".stand-in-{index}"
        path.write_text(name)
        stand_ins[str(path)] = repo.files[name].sha256
    urls = {repo.raw_url(name): folder / f".stand-in-{index}" for index, name in enumerate(files)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources_module.Sources, "download", lambda self, url: urls[url])
        patch.setattr(sources_module, "matches_digest", lambda path, expected: True)
        patch.setattr(sources_module, "sha256_file", lambda path: stand_ins[str(path)])
        sources = sources_module.Sources(None, None, repo=repo)
        for name in files:
            sources.upstream_file(name)
    report = BuildReport(dataset=dataset, counts=dict(counts), expected_counts=dict(counts))
    report.record_sources(sources)
    report.save(folder / "build_report.json")
    for path in stand_ins:
        Path(path).unlink()
    return folder / "build_report.json"
