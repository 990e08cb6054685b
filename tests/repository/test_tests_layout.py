"""The suite's own layout: tests/ mirrors the package's folders, and test files share code only through
`tests.support` and conftest fixtures, never by importing one another."""

import ast

from tests.support.paths import REPO

TESTS = REPO / "tests"
# Folders for tests that are about no single module: the repository's files (README, docs, figures, extras,
# benchmark and metric scripts) and behaviour across several subpackages at once.
CROSS_CUTTING = {"repository", "integration"}


def _suite_files():
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def _imported(path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def _is_test_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def test_no_file_imports_a_test_module_or_conftest():
    offenders = {}
    for path in _suite_files():
        if bad := [name for name in _imported(path) if _is_test_module(name)]:
            offenders[str(path.relative_to(TESTS))] = bad
    assert offenders == {}


def test_every_test_folder_mirrors_a_package_folder_and_is_a_package():
    folders = {path.parent.relative_to(TESTS) for path in _suite_files()}
    test_folders = {
        path.parent.relative_to(TESTS) for path in _suite_files() if path.name.startswith("test_")
    }
    assert test_folders, "no test files found"
    mirrored = [
        f
        for f in test_folders
        if not f.parts or f.parts[0] in CROSS_CUTTING or (REPO / "hf_hardpos" / f).is_dir()
    ]
    assert sorted(map(str, test_folders - set(mirrored))) == []
    # Test files in different folders may share a name, and they import `tests.support`: every folder is a package.
    assert sorted(str(f) for f in folders if not (TESTS / f / "__init__.py").is_file()) == []
