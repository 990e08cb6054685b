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


BENCHMARK_HEADING = "A new caption-selection benchmark with its own aggregation"
FOLDER = "hf_hardpos/benchmarks/<benchmark>/"
NAMED_OUTSIDE = re.compile(r"Outside its folder, the package names VL-CheckList in (\d+) files")
VL_CHECKLIST = re.compile(rb"vl.?check.?list", re.I)  # as `grep -rliE "vl.?check.?list"` spells it


def _files_naming_vl_checklist_outside_its_folder() -> list[str]:
    """Every file under hf_hardpos/ (any type) that names VL-CheckList, outside its own folder."""
    package, folder = ROOT / "hf_hardpos", ROOT / "hf_hardpos" / "benchmarks" / "vl_checklist"
    return sorted(
        str(path.relative_to(ROOT))
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and folder not in path.parents
        and VL_CHECKLIST.search(path.read_bytes())
    )  # fmt: skip


def test_a_benchmark_is_named_outside_its_folder_in_as_few_files_as_the_doc_says():
    """docs/architecture.md states in how many package files outside its folder VL-CheckList is named
    (its registration line and REPLACE's provenance): the count is that number, at most 3."""
    stated = int(NAMED_OUTSIDE.search((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))[1])
    found = _files_naming_vl_checklist_outside_its_folder()
    assert len(found) == stated <= 3, found
    assert "hf_hardpos/benchmarks/__init__.py" in found  # the registration line


def test_a_benchmark_folder_holds_the_files_the_doc_counts():
    """The benchmark heading's count is the folder's files plus the registration line, and each
    registered folder holds exactly those files and, beside them, only the optional ones the doc names."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    count, files = _extension_points()[BENCHMARK_HEADING]
    in_folder = {name.removeprefix(FOLDER) for name in files if name.startswith(FOLDER)}
    assert count == len(in_folder) + 1 and "hf_hardpos/benchmarks/__init__.py" in files
    section = text[text.index(f"### {BENCHMARK_HEADING}") :]
    optional = set(re.findall(r"^- `([\w.]+)` \(`\w+=`\)", section[: section.index("\n### ")], re.M))
    assert optional == {"figures.yaml", "references.bib"}
    registration = (ROOT / "hf_hardpos" / "benchmarks" / "__init__.py").read_text(encoding="utf-8")
    folders = [p for p in (ROOT / "hf_hardpos" / "benchmarks").iterdir() if (p / "__init__.py").is_file()]
    assert {p.name for p in folders} == {"valse", "vl_checklist"}
    for folder in folders:
        present = {p.name for p in folder.iterdir() if p.name != "__pycache__"}
        assert in_folder <= present <= in_folder | optional, (folder.name, present)
        assert re.search(rf"^from \. import .*\b{folder.name}\b", registration, re.M), folder.name
    assert {"figures.yaml", "references.bib"} <= {
        p.name for p in (ROOT / "hf_hardpos/benchmarks/vl_checklist").iterdir()
    }
