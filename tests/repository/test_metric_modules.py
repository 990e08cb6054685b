"""The `evaluate` modules (hf_hardpos/evaluate_modules/) are what `metrics/generate.py` writes, load offline,
stand alone, are installed with the package, and agree bit for bit with the package."""

import ast
import doctest
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import types

import evaluate
import numpy as np
import pytest
import yaml

from hf_hardpos import metrics as package_metrics
from hf_hardpos.citations import BIBTEX, HARD_POSITIVES, SUGARCREPE_PP
from hf_hardpos.evaluate_modules import metric_names as package_metric_names
from hf_hardpos.metrics import compute_metrics
from tests.support.paths import REPO

METRICS_DIR = REPO / "hf_hardpos" / "evaluate_modules"
GENERATOR = REPO / "metrics" / "generate.py"
NAMES = ["original_accuracy", "augmented_accuracy", "brittleness"]
HARD_POSITIVE_INPUTS = ("original_scores", "negative_scores", "positive_scores")
INPUTS = {
    **dict.fromkeys(NAMES, HARD_POSITIVE_INPUTS),
    "text_only_accuracy": ("positive_pair_scores", "caption_negative_scores", "positive_negative_scores"),
}
CITATION = {**dict.fromkeys(NAMES, HARD_POSITIVES), "text_only_accuracy": SUGARCREPE_PP}


def _tie_heavy(columns, rows=500, seed=0):
    rng = np.random.default_rng(seed)
    return {c: v.tolist() for c, v in zip(columns, rng.normal(size=(len(columns), rows)).round(1))}


@pytest.fixture(scope="module")
def scores():
    return _tie_heavy(HARD_POSITIVE_INPUTS)  # rounding to 0.1 makes ties common


def test_committed_modules_equal_a_fresh_generation(tmp_path):
    """Every file of every module folder is byte for byte what the generator writes from the templates."""
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert {p.parts[0] for p in generated} == set(INPUTS)
    module_folders = {
        p.name for p in METRICS_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
    }
    assert package_metric_names() == sorted(module_folders)
    assert module_folders == set(INPUTS)  # no hand-written module beside the generated ones
    for name in INPUTS:
        committed = {f.name for f in (METRICS_DIR / name).iterdir() if f.name != "__pycache__"}
        assert committed == {p.name for p in generated if p.parts[0] == name}
    drifted = [str(p) for p in generated if (tmp_path / p).read_bytes() != (METRICS_DIR / p).read_bytes()]
    assert drifted == []  # regenerate with `python metrics/generate.py`


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
    expected = compute_metrics(
        scores["original_scores"], scores["negative_scores"], scores["positive_scores"]
    )[name]
    assert sum(np.array(scores["original_scores"]) == np.array(scores["negative_scores"])) > 10  # tie-heavy
    assert result[name] == expected  # bit-identical to the package's formula
    assert type(result[name]) is float


@pytest.mark.parametrize("name", list(INPUTS))
def test_module_folder_is_a_self_contained_space(name):
    folder = METRICS_DIR / name
    assert {f.name for f in folder.iterdir() if f.name != "__pycache__"} == {
        f"{name}.py",
        "README.md",
        "requirements.txt",
        "app.py",
    }
    readme = (folder / "README.md").read_text()
    front_matter = yaml.safe_load(readme.split("---\n")[1])
    assert (front_matter["sdk"], front_matter["app_file"]) == ("gradio", "app.py")
    lines = (folder / "requirements.txt").read_text().splitlines()
    # all on PyPI: a Space could not build with hf_hardpos
    assert [re.split("[<>=]", line)[0] for line in lines if not line.startswith("#")] == [
        "evaluate",
        "datasets",
        "numpy",
    ]
    tree = ast.parse((folder / f"{name}.py").read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert sorted(alias.name for node in imports for alias in node.names) == ["datasets", "evaluate", "numpy"]
    assert all(
        len(node.names) == 1 for node in imports
    )  # evaluate's import scanner reads one import per line
    (metric_class,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    methods = [node for node in metric_class.body if isinstance(node, ast.FunctionDef)]
    assert [m.name for m in methods if m.args.kwarg] == []  # every input is a named keyword
    assert _source_module(name)._CITATION.strip() == BIBTEX[CITATION[name]]
    assert re.search(r"```bibtex\n(.*?)\n```", readme, re.S).group(1) == BIBTEX[CITATION[name]]


@pytest.mark.slow
def test_modules_copied_alone_run_without_the_package(tmp_path, scores):
    """Each folder copied on its own loads and computes in a Python where `hf_hardpos` cannot be imported."""
    for name in INPUTS:
        shutil.copytree(METRICS_DIR / name, tmp_path / name)
    text_only = _tie_heavy(INPUTS["text_only_accuracy"])
    everything = {name: text_only if name == "text_only_accuracy" else scores for name in INPUTS}
    (tmp_path / "scores.json").write_text(json.dumps(everything))
    script = f"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "hf_hardpos":
            raise ImportError("hf_hardpos is blocked in this test")
sys.meta_path.insert(0, Block())
import evaluate
scores = json.load(open({str(tmp_path / "scores.json")!r}))
out = {{n: evaluate.load({str(tmp_path)!r} + "/" + n).compute(**scores[n])[n] for n in scores}}
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    expected = compute_metrics(
        scores["original_scores"], scores["negative_scores"], scores["positive_scores"]
    )
    pair, caption_negative, positive_negative = (np.array(text_only[c]) for c in INPUTS["text_only_accuracy"])
    tot = float(np.mean((pair > caption_negative) & (pair > positive_negative)))
    assert got == {**{name: expected[name] for name in NAMES}, "text_only_accuracy": tot}


@pytest.mark.parametrize("name", list(INPUTS))
def test_module_doctest_examples(name):
    """The examples in each metric's docstring run (with `hardpos/<name>` resolved to the local folder)."""
    module = _source_module(name)
    local = types.SimpleNamespace(load=lambda hub_id: evaluate.load(str(METRICS_DIR / hub_id.split("/")[-1])))
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {"evaluate": local}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert (runner.failures, runner.tries) == (0, 2)  # load, then compute


@pytest.mark.parametrize("name", NAMES)
def test_module_bootstrap_and_errors(name, scores):
    module = evaluate.load(str(METRICS_DIR / name))
    result = module.compute(**scores, bootstrap_samples=200, seed=1)
    assert result[f"{name}_ci_low"] <= result[name] <= result[f"{name}_ci_high"]
    bad = dict(scores, original_scores=[float("nan")] + scores["original_scores"][1:])
    with pytest.raises(ValueError, match="non-finite"):
        module.compute(**bad)


BAD_FIRST_INPUT = {"missing": None, "empty": [], "numeric strings": ["0.3", "0.2"], "length": [0.3]}


@pytest.mark.parametrize("case", list(BAD_FIRST_INPUT))
@pytest.mark.parametrize("name", list(INPUTS))
def test_module_rejects_malformed_input_in_the_package_wording(name, case):
    columns = INPUTS[name][:2] if name == "original_accuracy" else INPUTS[name]
    good = dict(zip(columns, ([0.3, 0.2], [0.1, 0.4], [0.2, 0.1])))
    kwargs = {**good, columns[0]: BAD_FIRST_INPUT[case]}
    if case == "empty":
        kwargs = dict.fromkeys(columns, [])
    with pytest.raises(ValueError) as from_package:
        package_metrics.check_scores(**kwargs)
    if case == "missing":
        del kwargs[columns[0]]
    with pytest.raises(ValueError) as from_module:
        evaluate.load(str(METRICS_DIR / name)).compute(**kwargs)
    assert str(from_module.value) == str(from_package.value)


def test_original_accuracy_needs_no_positive_scores(scores):
    module = evaluate.load(str(METRICS_DIR / "original_accuracy"))
    result = module.compute(
        original_scores=scores["original_scores"], negative_scores=scores["negative_scores"]
    )
    assert result["original_accuracy"] == np.mean(
        np.array(scores["original_scores"]) > np.array(scores["negative_scores"])
    )


@pytest.mark.slow
def test_the_modules_are_installed_with_the_package_and_load_outside_a_checkout(tmp_path):
    """The wheel `pip install .` would install holds every module folder; unpacked away from the checkout,
    `evaluate.load(hf_hardpos.metric_path(name))` (the documented call) loads and computes each."""
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", "tests", "docs", "runs", "site", "build",
                                                                "*.egg-info", "__pycache__", "benchmarks"))  # fmt: skip
    code = "import setuptools.build_meta as b, sys; print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "dist")], cwd=source, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = tmp_path / "dist" / done.stdout.strip().splitlines()[-1]
    installed = tmp_path / "site"
    shutil.unpack_archive(wheel, installed, format="zip")
    for name in INPUTS:
        assert {p.name for p in (installed / "hf_hardpos" / "evaluate_modules" / name).iterdir()} == {
            f"{name}.py",
            "README.md",
            "requirements.txt",
            "app.py",
        }
    script = f"""
import json, evaluate, hf_hardpos
assert hf_hardpos.__file__.startswith({str(installed)!r}), hf_hardpos.__file__
module = evaluate.load(hf_hardpos.metric_path("brittleness"))
print(json.dumps(module.compute(original_scores=[0.3, 0.1], negative_scores=[0.2, 0.2], positive_scores=[0.1, 0.3])))
"""
    env = {**os.environ, "PYTHONPATH": str(installed), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"brittleness": 1.0}
