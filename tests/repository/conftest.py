"""Fixtures of the repository tests."""

import importlib.util

import pytest

from tests.support.paths import REPO


@pytest.fixture(scope="module")
def results_module():
    """benchmarks/results.py, imported from its file (the benchmark scripts are not a package)."""
    spec = importlib.util.spec_from_file_location("bench_results", REPO / "benchmarks" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
