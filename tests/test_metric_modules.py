"""The `evaluate` modules in metrics/ load offline, stand alone, and agree bit for bit with the package."""

import doctest
import importlib.util
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import evaluate
import numpy as np
import pytest

from hf_hardpos import metrics as package_metrics
from hf_hardpos.citations import BIBTEX, HARD_POSITIVES
from hf_hardpos.metrics import compute_metrics

METRICS_DIR = Path(__file__).resolve().parents[1] / "metrics"
NAMES = ["original_accuracy", "augmented_accuracy", "brittleness"]


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(0)
    c, n, p = rng.normal(size=(3, 500)).round(1)  # rounding makes ties common
    return {"original_scores": c.tolist(), "negative_scores": n.tolist(), "positive_scores": p.tolist()}


def _source_module(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"metric_{name}", METRICS_DIR / name / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", NAMES)
def test_module_loads_offline_and_matches_package(name, scores):
    module = evaluate.load(str(METRICS_DIR / name))
    result = module.compute(**scores)
    assert list(result) == [name]
    expected = compute_metrics(scores["original_scores"], scores["negative_scores"], scores["positive_scores"])[name]
    assert sum(np.array(scores["original_scores"]) == np.array(scores["negative_scores"])) > 10  # tie-heavy
    assert result[name] == expected  # bit-identical to the package's formula
    assert type(result[name]) is float


@pytest.mark.parametrize("name", NAMES)
def test_module_folder_is_a_self_contained_space(name):
    folder = METRICS_DIR / name
    assert {f.name for f in folder.iterdir() if f.name != "__pycache__"} >= {
        f"{name}.py", "README.md", "requirements.txt", "app.py"
    }
    readme = (folder / "README.md").read_text()
    assert readme.startswith("---\n") and "app_file: app.py" in readme
    requirements = [line for line in (folder / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert not any("hf_hardpos" in line for line in requirements)  # not on PyPI: a Space could not build
    source = (folder / f"{name}.py").read_text()
    assert "hf_hardpos" not in source.replace("`hf_hardpos", "")  # mentioned in prose only, never imported
    assert "**kwargs" not in source
    # evaluate's import scanner needs one import per line
    assert not any(line.startswith("import ") and "," in line for line in source.splitlines())
    assert _source_module(name)._CITATION.strip() == BIBTEX[HARD_POSITIVES]


@pytest.mark.slow
def test_modules_copied_alone_run_without_the_package(tmp_path, scores):
    """Each folder copied on its own loads and computes in a Python where `hf_hardpos` cannot be imported."""
    for name in NAMES:
        shutil.copytree(METRICS_DIR / name, tmp_path / name)
    (tmp_path / "scores.json").write_text(json.dumps(scores))
    script = f"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "hf_hardpos":
            raise ImportError("hf_hardpos is blocked in this test")
sys.meta_path.insert(0, Block())
import evaluate
scores = json.load(open({str(tmp_path / "scores.json")!r}))
out = {{n: evaluate.load({str(tmp_path)!r} + "/" + n).compute(**scores)[n] for n in {NAMES!r}}}
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    expected = compute_metrics(scores["original_scores"], scores["negative_scores"], scores["positive_scores"])
    assert got == {name: expected[name] for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_module_doctest_examples(name):
    """The examples in each metric's docstring run (with `hardpos/<name>` resolved to the local folder)."""
    module = _source_module(name)
    local = types.SimpleNamespace(load=lambda hub_id: evaluate.load(str(METRICS_DIR / hub_id.split("/")[-1])))
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {"evaluate": local}, name, None, 0)
    assert test.examples, "the metric card promises examples"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize("name", NAMES)
def test_module_bootstrap_and_errors(name, scores):
    module = evaluate.load(str(METRICS_DIR / name))
    result = module.compute(**scores, bootstrap_samples=200, seed=1)
    assert result[f"{name}_ci_low"] <= result[name] <= result[f"{name}_ci_high"]
    bad = dict(scores, original_scores=[float("nan")] + scores["original_scores"][1:])
    with pytest.raises(ValueError, match="non-finite"):
        module.compute(**bad)


BAD_INPUTS = {
    "missing": dict(original_scores=None),
    "empty": dict(original_scores=[], negative_scores=[], positive_scores=[]),
    "numeric strings": dict(original_scores=["0.3", "0.2"]),
    "length": dict(original_scores=[0.3]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.parametrize("name", NAMES)
def test_module_rejects_malformed_input_in_the_package_wording(name, case):
    good = dict(original_scores=[0.3, 0.2], negative_scores=[0.1, 0.4], positive_scores=[0.2, 0.1])
    kwargs = {**good, **BAD_INPUTS[case]}
    if name == "original_accuracy":
        del kwargs["positive_scores"]
    with pytest.raises(ValueError) as from_package:
        package_metrics.check_scores(**kwargs)
    if case == "missing":
        del kwargs["original_scores"]
    with pytest.raises(ValueError) as from_module:
        evaluate.load(str(METRICS_DIR / name)).compute(**kwargs)
    assert str(from_module.value) == str(from_package.value)


def test_original_accuracy_needs_no_positive_scores(scores):
    module = evaluate.load(str(METRICS_DIR / "original_accuracy"))
    result = module.compute(original_scores=scores["original_scores"], negative_scores=scores["negative_scores"])
    assert result["original_accuracy"] == np.mean(np.array(scores["original_scores"]) > np.array(scores["negative_scores"]))
