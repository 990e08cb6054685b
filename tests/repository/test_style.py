"""The house style, checked: ruff's linter and formatter ([tool.ruff] in pyproject.toml) over every
Python tree we ship or run, modules of at most 500 lines and no function with more than 10 positional
parameters in the package (what a reader can hold; past that, a function wants a settings object).

Run `ruff check --fix hf_hardpos tests benchmarks examples metrics && ruff format hf_hardpos tests
benchmarks examples metrics` before committing.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ["hf_hardpos", "tests", "benchmarks", "examples", "metrics"]
MAX_LINES = 500
MAX_POSITIONAL = 10


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("ruff"), *args, *TREES], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.skipif(
    shutil.which("ruff") is None, reason="ruff is in the `test` extra: pip install -e '.[test]'"
)
def test_ruff_lint_and_format_are_clean():
    lint, form = _ruff("check", "--output-format", "concise"), _ruff("format", "--check")
    assert lint.returncode == 0, lint.stdout[-3000:]
    assert form.returncode == 0, form.stdout[-3000:]


def _positional(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    arguments = [*function.args.posonlyargs, *function.args.args]
    return len(arguments) - (1 if arguments and arguments[0].arg in ("self", "cls") else 0)


def test_modules_and_signatures_stay_small():
    long_modules, wide_functions = set(), set()
    for path in sorted((ROOT / "hf_hardpos").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MAX_LINES:
            long_modules.add(name)
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and _positional(node) > MAX_POSITIONAL
            ):
                wide_functions.add(f"{name}:{node.name}")
    assert long_modules == set()
    assert wide_functions == set()
