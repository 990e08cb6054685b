"""`hardpos report`: one self-contained HTML page per run, with the run's own numbers, charts and failure examples."""

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pyarrow.parquet as pq
import pytest

from hf_hardpos.evaluation.aggregation import REPLACE_POOLED
from hf_hardpos.cli import main
from hf_hardpos.data.replace import phrase_diff
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.metrics import METRIC_NAMES
from hf_hardpos.evaluation.tasks import HARD_POSITIVE
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite

from run_fixtures import write_replace_folder, write_swap_folder


class _Page(HTMLParser):
    """Every src/href value, every image source, and each table as a list of rows of cell texts."""

    def __init__(self):
        super().__init__()
        self.links, self.images, self.tables, self.headings = [], [], [], []
        self._cell, self._heading = None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links.extend(v for k, v in attrs.items() if k in ("src", "href"))
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "h2":
            self._heading = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None
        elif tag == "h2":
            self.headings.append(self._heading)
            self._heading = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._heading is not None:
            self._heading += data


def _parse(path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="module")
def runs(tiny_clip_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    replace = write_replace_folder(root / "replace")
    swap = write_swap_folder(root / "swap")
    evaluate_model(str(tiny_clip_dir), str(replace), output_dir=root / "eval", progress=False, log=lambda m: None)
    entries = [SuiteEntry("replace", str(replace), HARD_POSITIVE), SuiteEntry("swap", str(swap), HARD_POSITIVE)]
    run_suite(str(tiny_clip_dir), entries, output_dir=root / "suite", progress=False, log=lambda m: None)
    return {"eval": root / "eval", "suite": root / "suite", "replace": replace}


def _report(run, target, *extra) -> int:
    return main(["report", str(run), "--output", str(target), "--bootstrap", "200", *extra])


def test_eval_report_is_self_contained_and_shows_the_saved_numbers(runs, tmp_path):
    target = tmp_path / "report.html"
    assert _report(runs["eval"], target) == 0
    page = _parse(target)
    assert page.links and all(link.startswith(("data:", "#")) for link in page.links)  # no network request
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", target.read_text())
    saved = json.loads((runs["eval"] / "metrics.json").read_text())
    rates = page.tables[0]
    rows = {r[0]: r for r in rates[1:]}
    for name, metrics in {**saved["results"], **saved["aggregates"]}.items():
        for column, metric in zip(rows[name][2:5], METRIC_NAMES):
            assert column.split(" [")[0] == f"{100 * metrics[metric]:.1f}"
    for name in ("attributes", "relations", REPLACE_POOLED):  # intervals computed for the page (no --bootstrap run)
        assert all(re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\]", cell) for cell in rows[name][2:5])
    charts = [src for src in page.images if src.startswith("data:image/png;base64,")]
    assert len(charts) >= 3  # bars, and one distribution chart per config
    brittle_rows = sum(int(pq.read_table(runs["eval"] / f"scores-{c}.parquet")["brittle"].to_numpy().sum())
                       for c in ("attributes", "relations"))
    thumbnails = [src for src in page.images if src.startswith("data:image/jpeg;base64,")]
    assert len(thumbnails) == min(12, brittle_rows) > 0


def test_breakdown_by_replacement_counts_the_saved_rows(runs, tmp_path):
    """The attributes config groups rows by the builder's replaced_phrase -> replacement; each count and rate is
    recounted here from the data folder and the saved per-row outcomes."""
    target = tmp_path / "report.html"
    assert _report(runs["eval"], target) == 0
    page = _parse(target)
    breakdown = next(t for t in page.tables if t[0] == ["replacement", "rows", "aug acc %", "brittle %"])
    data = pq.read_table(next((runs["replace"] / "data" / "attributes").glob("*.parquet"))).to_pydict()
    scores = pq.read_table(runs["eval"] / "scores-attributes.parquet").to_pydict()
    keys = [f"{a} \u2192 {b}" for a, b in zip(data["replaced_phrase"], data["replacement"])]
    assert keys == [" \u2192 ".join(phrase_diff(c, p)) for c, p in zip(data["caption"], data["hard_positive"])]
    for key, count, aug, brittle in breakdown[1:]:
        index = [i for i, k in enumerate(keys) if k == key]
        assert int(count) == len(index)
        assert float(aug) == pytest.approx(100 * np.mean([scores["augmented_correct"][i] for i in index]), abs=0.05)
        assert float(brittle) == pytest.approx(100 * np.mean([scores["brittle"][i] for i in index]), abs=0.05)
    shown = [float(r[3]) for r in breakdown[1:]]
    assert shown == sorted(shown, reverse=True)


def test_suite_report_has_one_section_per_benchmark(runs, tmp_path):
    target = tmp_path / "suite.html"
    assert _report(runs["suite"], target) == 0
    page = _parse(target)
    assert page.headings == ["REPLACE", "SWAP"]
    pairs = [t for t in page.tables if t[0][0] == "replacement"]
    assert {r[0] for r in pairs[-1][1:]} <= {"red / blue", "small / large", "red / large"}  # SWAP: attribute pairs
    swap = json.loads((runs["suite"] / "swap" / "metrics.json").read_text())["results"]["default"]
    assert f"{100 * swap['brittleness']:.1f}" in target.read_text()


def test_changed_data_is_named_not_shown(runs, tmp_path):
    """Captions come from the evaluated data only while its content is unchanged."""
    moved = shutil.copytree(runs["eval"], tmp_path / "run")
    saved = json.loads((moved / "metrics.json").read_text())
    saved["provenance"]["relations"]["dataset"]["sha256"] = "0" * 64
    (moved / "metrics.json").write_text(json.dumps(saved))
    target = tmp_path / "report.html"
    assert _report(moved, target) == 0
    text = target.read_text()
    assert "changed since the run" in text and "[relations] row" not in text


def test_finetune_folder_plots_each_loss_term_and_eval_metric(tmp_path):
    """A fine-tuning folder's checkpoint trainer_state.json (Trainer's log_history format) gives the curves."""
    log = []
    for step in (2, 4, 6, 8):
        log.append({"step": step, "epoch": step / 8, "loss": 2.0 / step, "loss_hn": 1.0 / step, "loss_hp": 0.5 / step,
                    "learning_rate": 1e-5, "grad_norm": 1.0})
        if step % 4 == 0:
            log.append({"step": step, "epoch": step / 8, "eval_replace_brittleness": 0.3 - step / 100,
                        "eval_swap_augmented_accuracy": 0.4 + step / 100, "eval_runtime": 1.2})
    checkpoint = tmp_path / "finetune" / "checkpoint-8"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 8, "log_history": log}))
    target = tmp_path / "train.html"
    assert _report(tmp_path / "finetune", target) == 0
    page = _parse(target)
    assert page.headings == ["Training"]
    assert len([src for src in page.images if src.startswith("data:image/png")]) == 2  # loss terms, eval metrics
    curves = [t for t in page.tables if t[0][0] == "key"]
    assert [r[0] for r in curves[0][1:]] == ["loss", "loss_hn", "loss_hp"]
    assert [r[0] for r in curves[1][1:]] == ["eval_replace_brittleness", "eval_swap_augmented_accuracy"]
    loss_hn = curves[0][2]
    assert loss_hn[1:] == ["4", "2", "0.5", "8", "0.125"]  # entries, first step and value, last step and value
    assert curves[1][1][1:] == ["2", "4", "0.26", "8", "0.22"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    message = "headless Chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + "; .ci/run installs it")
    pytest.skip(message)


def test_report_renders_in_headless_chromium(runs, tmp_path):
    from PIL import Image

    browser = _chromium()
    target = tmp_path / "report.html"
    assert _report(runs["eval"], target) == 0
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,1600",
                    f"--screenshot={shot}", target.as_uri()], check=True, capture_output=True, timeout=120)
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape[:2] == (1600, 1200)
    not_white = (pixels < 240).any(axis=2).mean()
    coloured = (pixels.max(axis=2) - pixels.min(axis=2) > 60).mean()  # chart bars and lines, not only text
    assert not_white > 0.03 and coloured > 0.005
