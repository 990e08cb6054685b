"""docs/architecture.md's extension points say how many files an addition takes ("### A new loss term:
2 files"): the table under each heading lists exactly that many, and every file it names exists for
the additions already made (a `<placeholder>` matches any name), so the count cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^### (?P<title>.+): (?P<count>\d+) files?$", re.M)


def _extension_points() -> dict[str, tuple[int, list[str]]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    headings = list(HEADING.finditer(text))
    points = {}
    for index, heading in enumerate(headings):
        end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
        rows = re.findall(r"^\| `([^`]+)` \|", text[heading.end() : end], re.M)
        points[heading["title"]] = (int(heading["count"]), rows)
    return points


def test_each_extension_point_lists_the_files_it_counts():
    points = _extension_points()
    assert {"A new loss term", "A new caption-selection benchmark with its own aggregation",
            "Add a model family"} <= set(points)  # fmt: skip
    for title, (count, files) in points.items():
        assert len(files) == count, (title, files)


def test_every_listed_file_exists_for_the_additions_already_made():
    for title, (_, files) in _extension_points().items():
        for name in files:
            pattern = re.sub(r"<[^>]+>", "*", name)
            matches = [p for p in ROOT.glob(pattern) if "__pycache__" not in p.parts]
            assert matches, (title, name)
            if pattern != name:  # a placeholder: at least two additions follow the pattern
                assert len(matches) >= 2, (title, name, matches)
