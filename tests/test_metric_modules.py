"""The `evaluate` modules in metrics/ load offline and agree bit for bit with the package."""

from pathlib import Path

import evaluate
import numpy as np
import pytest

from hf_hardpos.metrics import compute_metrics

METRICS_DIR = Path(__file__).resolve().parents[1] / "metrics"
NAMES = ["original_accuracy", "augmented_accuracy", "brittleness"]


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(0)
    c, n, p = rng.normal(size=(3, 500)).round(1)  # rounding makes ties common
    return {"original_scores": c.tolist(), "negative_scores": n.tolist(), "positive_scores": p.tolist()}


@pytest.mark.parametrize("name", NAMES)
def test_module_loads_offline_and_matches_package(name, scores):
    module = evaluate.load(str(METRICS_DIR / name))
    result = module.compute(**scores)
    assert list(result) == [name]
    expected = compute_metrics(scores["original_scores"], scores["negative_scores"], scores["positive_scores"])[name]
    assert result[name] == expected  # bit-identical: one source of truth
    assert type(result[name]) is float


@pytest.mark.parametrize("name", NAMES)
def test_module_folder_is_a_self_contained_space(name):
    folder = METRICS_DIR / name
    assert {f.name for f in folder.iterdir()} >= {f"{name}.py", "README.md", "requirements.txt", "app.py"}
    readme = (folder / "README.md").read_text()
    assert readme.startswith("---\n") and "app_file: app.py" in readme
    assert "hf_hardpos" in (folder / "requirements.txt").read_text()
    source = (folder / f"{name}.py").read_text()
    assert "**kwargs" not in source
    # evaluate's import scanner needs one import per line
    assert not any(line.startswith("import ") and "," in line for line in source.splitlines())


@pytest.mark.parametrize("name", NAMES)
def test_module_bootstrap_and_errors(name, scores):
    module = evaluate.load(str(METRICS_DIR / name))
    result = module.compute(**scores, bootstrap_samples=200, seed=1)
    assert result[f"{name}_ci_low"] <= result[name] <= result[f"{name}_ci_high"]
    bad = dict(scores, original_scores=[float("nan")] + scores["original_scores"][1:])
    with pytest.raises(ValueError, match="non-finite"):
        module.compute(**bad)


def test_original_accuracy_needs_no_positive_scores(scores):
    module = evaluate.load(str(METRICS_DIR / "original_accuracy"))
    result = module.compute(original_scores=scores["original_scores"], negative_scores=scores["negative_scores"])
    assert result["original_accuracy"] == np.mean(np.array(scores["original_scores"]) > np.array(scores["negative_scores"]))
