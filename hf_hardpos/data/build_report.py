"""What a build read, wrote and skipped: :class:`BuildReport`, saved beside the shards as
``build_report.json``, printed as the build's count lines and read by the dataset card
(:mod:`.dataset_card`), so the card states only what the build measured.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path


def count_flags(rows: Iterable[dict], names: Sequence[str]) -> dict[str, int]:
    """How many rows have each boolean flag set, in ``names`` order (the report's and the card's)."""
    rows = list(rows)
    return {name: sum(row[name] for row in rows) for name in names}


@dataclass
class BuildReport:
    """What a build read, wrote and skipped; saved next to the shards as ``build_report.json``."""

    dataset: str
    counts: dict[str, int] = field(default_factory=dict)
    expected_counts: dict[str, int] = field(default_factory=dict)
    skipped_missing_images: dict[str, list[str]] = field(default_factory=dict)
    skipped_rows: dict[str, int] = field(default_factory=dict)
    flags: dict[str, dict[str, int]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    # Inputs read from local copies that are not the pinned upstream files; None: not recorded.
    local_variants: list[str] | None = None

    def record_sources(self, sources) -> None:
        """Take the provenance and the local variants of a :class:`~hf_hardpos.data.sources.Sources`."""
        self.sources.update(sources.provenance)
        self.local_variants = list(sources.local_variants)

    @property
    def counts_must_match(self) -> bool:
        """Whether the paper's counts bind this build: every input was the pinned upstream file (a
        download checked against its digest, or an identical local copy)."""
        return self.local_variants is not None and not self.local_variants

    @property
    def distinct_missing_images(self) -> int:
        """Missing images counted once, however many configs use them."""
        return len({key for keys in self.skipped_missing_images.values() for key in keys})

    def count_lines(self) -> list[str]:
        """One line per built config: measured rows against the paper's."""
        lines = []
        for name, count in self.counts.items():
            expected = self.expected_counts.get(name)
            if expected is None:
                lines.append(f"{name}: {count:,} rows")
            else:
                verdict = "matches the paper" if count == expected else f"DIFFERS by {count - expected:+,}"
                lines.append(f"{name}: {count:,} rows (paper: {expected:,}; {verdict})")
        return lines

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", encoding="utf-8")
