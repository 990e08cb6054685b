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

from hf_hardpos.cli import main
from hf_hardpos.evaluation.aggregation import REPLACE_POOLED
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite
from hf_hardpos.evaluation.tasks import HARD_POSITIVE
from hf_hardpos.metrics import METRIC_NAMES, wilson_interval
from hf_hardpos.reporting.breakdown import replace_key, swap_pair, type_of
from hf_hardpos.reporting.paired import paired_difference
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.eval_data import make_eval_set
from tests.support.runs import write_replace_folder, write_swap_folder

# (replaced phrase, replacement, hard negative's phrase): REPLACE relation rows whose word-level diff cuts the
# phrase ("to the left of" -> "left of" gives `to the -> ''` for left and right alike).
PHRASES = [
    ("to the left of", "left of", "to the right of"),
    ("to the right of", "right of", "to the left of"),
    ("on top of", "on", "under"),
    ("behind", "to the rear of", "in front of"),
]


def write_phrase_folder(root):
    """A REPLACE-layout folder (config `relations`) of captions `a red cube <relation> a blue ball`."""
    data = make_eval_set(num_images=6, rows_per_image=3, seed=5)
    rows = [PHRASES[i % len(PHRASES)] for i in range(len(data))]
    data = (
        data.remove_columns(["caption", "hard_negative", "hard_positive"])
        .add_column("caption", [f"a red cube {c} a blue ball" for c, _, _ in rows])
        .add_column("hard_positive", [f"a red cube {p} a blue ball" for _, p, _ in rows])
        .add_column("hard_negative", [f"a red cube {n} a blue ball" for _, _, n in rows])
    )
    data.to_parquet(str(root / "data" / "relations" / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: relations\n  data_files:\n  - split: test\n"
        "    path: data/relations/test-*.parquet\n---\n# phrases\n"
    )
    return root


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
    evaluate_model(
        str(tiny_clip_dir), str(replace), output_dir=root / "eval", progress=False, log=lambda m: None
    )
    entries = [
        SuiteEntry("replace", str(replace), HARD_POSITIVE),
        SuiteEntry("swap", str(swap), HARD_POSITIVE),
    ]
    run_suite(str(tiny_clip_dir), entries, output_dir=root / "suite", progress=False, log=lambda m: None)
    phrases = write_phrase_folder(root / "phrases")
    evaluate_model(
        str(tiny_clip_dir), str(phrases), output_dir=root / "phrases_eval", progress=False, log=lambda m: None
    )
    other = build_tiny_clip(root / "other_model", seed=1)
    run_suite(str(other), entries, output_dir=root / "baseline_suite", progress=False, log=lambda m: None)
    return {
        "eval": root / "eval",
        "suite": root / "suite",
        "replace": replace,
        "baseline": root / "baseline_suite",
        "phrases": phrases,
        "phrases_eval": root / "phrases_eval",
    }


def _report(run, target, *extra) -> int:
    return main(["report", str(run), "--output", str(target), "--bootstrap", "200", *extra])


def test_eval_report_is_self_contained_and_shows_the_saved_numbers(runs, tmp_path):
    target = tmp_path / "report.html"
    assert _report(runs["eval"], target) == 0
    page = _parse(target)
    assert page.links and all(link.startswith(("data:", "#")) for link in page.links)  # no network request
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", target.read_text())
    saved = json.loads((runs["eval"] / "metrics.json").read_text())
    rates = next(t for t in page.tables if t[0][0] == "row")
    rows = {r[0]: r for r in rates[1:]}
    for name, metrics in {**saved["results"], **saved["aggregates"]}.items():
        for column, metric in zip(rows[name][2:5], METRIC_NAMES):
            assert column.split(" [")[0] == f"{100 * metrics[metric]:.1f}"
    for name in (
        "attributes",
        "relations",
        REPLACE_POOLED,
    ):  # intervals computed for the page (no --bootstrap run)
        assert all(re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\]", cell) for cell in rows[name][2:5])
    charts = [src for src in page.images if src.startswith("data:image/png;base64,")]
    assert len(charts) >= 3  # bars, and one distribution chart per config
    brittle_rows = sum(
        int(pq.read_table(runs["eval"] / f"scores-{c}.parquet")["brittle"].to_numpy().sum())
        for c in ("attributes", "relations")
    )
    thumbnails = [src for src in page.images if src.startswith("data:image/jpeg;base64,")]
    assert len(thumbnails) == min(12, brittle_rows) > 0


def test_breakdown_by_replacement_counts_the_saved_rows(runs, tmp_path):
    """Rows grouped by the whole replaced phrase; each count and rate is recounted here from the data folder and the
    saved per-row outcomes, with its Wilson interval; groups under --min-rows rows are left out of the list only."""
    target = tmp_path / "report.html"
    assert _report(runs["phrases_eval"], target, "--min-rows", "5") == 0
    page = _parse(target)
    breakdown = next(t for t in page.tables if t[0][0] == "replacement")
    data = pq.read_table(next((runs["phrases"] / "data" / "relations").glob("*.parquet"))).to_pydict()
    scores = pq.read_table(runs["phrases_eval"] / "scores-relations.parquet").to_pydict()
    keys = [f"{c} \u2192 {p}" for c, p, _ in (PHRASES[i % len(PHRASES)] for i in range(len(data["caption"])))]
    assert {r[0] for r in breakdown[1:]} == {k for k in set(keys) if keys.count(k) >= 5}
    assert {"to the left of \u2192 left of", "to the right of \u2192 right of"} <= {
        r[0] for r in breakdown[1:]
    }
    for key, kind, count, aug, brittle in breakdown[1:]:
        index = [i for i, k in enumerate(keys) if k == key]
        assert int(count) == len(index)
        assert kind == "spatial relation"
        hits = int(sum(scores["brittle"][i] for i in index))
        low, high = wilson_interval(hits, len(index))
        assert brittle == f"{100 * hits / len(index):.1f} [{100 * low:.1f}, {100 * high:.1f}]"
        assert float(aug.split()[0]) == pytest.approx(
            100 * np.mean([scores["augmented_correct"][i] for i in index]), abs=0.05
        )
    shown = [(-float(r[4].split()[0]), -int(r[2])) for r in breakdown[1:]]
    assert shown == sorted(shown)
    rollup = next(t for t in page.tables if t[0][0] == "type")
    assert [r[:2] for r in rollup[1:]] == [["spatial relation", str(len(keys))]]  # every row, listed or not


@pytest.mark.parametrize(
    "caption, positive, expected",
    [
        ("a cube to the left of a ball", "a cube left of a ball", ("to the left of", "left of")),
        ("a cube to the right of a ball", "a cube right of a ball", ("to the right of", "right of")),
        ("cup on top of the table", "cup on the table", ("on top of", "on")),
        ("man in front of building", "man within front of building", ("in front of", "within front of")),
        ("man behind car", "man to the rear of car", ("behind", "to the rear of")),
        ("cup near the plate", "cup next to the plate", ("near", "next to")),
        ("man sitting on bench", "man seated on bench", ("sitting", "seated")),
        ("a large green cone", "a big green cone", ("large", "big")),
    ],
)
def test_replace_keys_keep_phrases_whole(caption, positive, expected):
    """Left and right are never merged into `to the -> ''` (the word-level diff), and a phrase is never cut."""
    assert replace_key(caption, positive) == expected


def test_swap_keys_are_the_swapped_pair_and_types_roll_up():
    assert swap_pair("a small red cube and a large blue ball", "a large red cube and a small blue ball") == (
        "large",
        "small",
    )
    assert swap_pair("a small red cube and a small blue ball", "a small blue cube and a small red ball") == (
        "blue",
        "red",
    )
    assert swap_pair("a red cube", "a blue cube") is None  # a replacement, not a swap
    assert [type_of(k) for k in ("white", "large / small", "wooden", "to the left of", "holding", "wet")] == [
        "colour",
        "size",
        "material",
        "spatial relation",
        "action",
        "other",
    ]


def test_suite_report_has_one_section_per_benchmark(runs, tmp_path):
    target = tmp_path / "suite.html"
    assert _report(runs["suite"], target) == 0
    page = _parse(target)
    assert page.headings == ["At a glance", "REPLACE", "SWAP"]
    pairs = [t for t in page.tables if t[0][0] == "replacement"]
    assert {r[0] for r in pairs[-1][1:]} <= {
        "blue / red",
        "large / small",
        "large / red",
    }  # SWAP: attribute pairs
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
        log.append(
            {
                "step": step,
                "epoch": step / 8,
                "loss": 2.0 / step,
                "loss_hn": 1.0 / step,
                "loss_hp": 0.5 / step,
                "learning_rate": 1e-5,
                "grad_norm": 1.0,
            }
        )
        if step % 4 == 0:
            log.append(
                {
                    "step": step,
                    "epoch": step / 8,
                    "eval_replace_brittleness": 0.3 - step / 100,
                    "eval_swap_augmented_accuracy": 0.4 + step / 100,
                    "eval_runtime": 1.2,
                }
            )
    checkpoint = tmp_path / "finetune" / "checkpoint-8"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 8, "log_history": log}))
    target = tmp_path / "train.html"
    assert _report(tmp_path / "finetune", target) == 0
    page = _parse(target)
    assert page.headings == ["Training"]
    assert (
        len([src for src in page.images if src.startswith("data:image/png")]) == 2
    )  # loss terms, eval metrics
    curves = [t for t in page.tables if t[0][0] == "key"]
    assert [r[0] for r in curves[0][1:]] == ["loss", "loss_hn", "loss_hp"]
    assert [r[0] for r in curves[1][1:]] == ["eval_replace_brittleness", "eval_swap_augmented_accuracy"]
    loss_hn = curves[0][2]
    assert loss_hn[1:] == [
        "4",
        "2",
        "0.5",
        "8",
        "0.125",
    ]  # entries, first step and value, last step and value
    assert curves[1][1][1:] == ["2", "4", "0.26", "8", "0.22"]


def test_baseline_gives_both_runs_and_a_paired_difference(runs, tmp_path):
    """`--baseline`: each headline shows the baseline's figure and run - baseline with the paired bootstrap over
    images and McNemar's test, recomputed here from the two runs' saved per-row outcomes."""
    target = tmp_path / "report.html"
    assert (
        main(
            [
                "report",
                str(runs["suite"]),
                "--baseline",
                str(runs["baseline"]),
                "--output",
                str(target),
                "--bootstrap",
                "200",
            ]
        )
        == 0
    )
    page = _parse(target)
    headlines = [t for t in page.tables if t[0][:2] == ["rate", "this run"]]
    assert len(headlines) == 2  # REPLACE, SWAP
    replace = {row[0]: row for row in headlines[0][1:]}
    assert headlines[0][0][4] == "other_model"  # the baseline, named by its model
    configs = ("attributes", "relations")

    def outcomes(folder, column):
        return np.concatenate(
            [pq.read_table(folder / "replace" / f"scores-{c}.parquet")[column].to_numpy() for c in configs]
        )

    groups = np.concatenate(
        [
            pq.read_table(runs["suite"] / "replace" / f"scores-{c}.parquet")["image_id"].to_numpy()
            for c in configs
        ]
    ).astype(str)
    for name, column, accuracy in (
        ("brittleness", "brittle", False),
        ("original accuracy", "original_correct", True),
    ):
        ours, base = outcomes(runs["suite"], column), outcomes(runs["baseline"], column)
        assert replace[name][1].startswith(f"{100 * ours.mean():.1f} %")
        assert replace[name][4].startswith(f"{100 * base.mean():.1f} %")
        d = paired_difference(
            base.astype(float), ours.astype(float), groups, accuracy=accuracy, resamples=200
        )
        expected = f"{100 * d.difference:+.1f} pp [{100 * d.ci_low:.1f}, {100 * d.ci_high:.1f}]"
        assert replace[name][5].startswith(expected)
        if accuracy:
            assert replace[name][5].endswith(f"McNemar p = {d.mcnemar_p:.3g}")
    anchors = [link for link in page.links if link.startswith("#")]
    assert {"#at-a-glance", "#bench-replace", "#bench-swap"} <= set(anchors)  # table of contents


def test_finetune_report_orders_panels_and_draws_the_base_model_at_step_zero(runs, tmp_path):
    """Eval panels: REPLACE's pooled column, then its subsets, then SWAP; a baseline eval run gives step 0."""
    from hf_hardpos.reporting import charts
    from hf_hardpos.reporting.html import _step_zero
    from hf_hardpos.reporting.runs import load_run

    log = [
        {
            "step": 4,
            "eval_swap_brittleness": 0.3,
            "eval_replace_relations_brittleness": 0.2,
            "eval_replace_pooled_attributes_relations_brittleness": 0.25,
            "eval_replace_pooled_attributes_relations_loss": 1.0,
        }
    ]
    assert list(charts.eval_panels(log)) == [
        "eval_replace_pooled_attributes_relations",
        "eval_replace_relations",
        "eval_swap",
    ]
    folder = tmp_path / "finetune"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": log}))
    base, note = _step_zero(load_run(folder), [load_run(runs["baseline"])])
    saved = json.loads((runs["baseline"] / "metrics.json").read_text())["datasets"]
    assert base["eval_swap"]["brittleness"] == saved["swap"]["results"]["default"]["brittleness"]
    assert (
        base["eval_replace_relations"]["brittleness"]
        == saved["replace"]["results"]["relations"]["brittleness"]
    )
    assert str(runs["baseline"]) in note
    assert main(["report", str(folder), "--baseline", str(runs["baseline"])]) == 0
    assert (folder / "report.html").is_file()  # the default output: RUN/report.html


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
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1200,1600",
            f"--screenshot={shot}",
            target.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    assert pixels.shape[:2] == (1600, 1200)
    not_white = (pixels < 240).any(axis=2).mean()
    coloured = (pixels.max(axis=2) - pixels.min(axis=2) > 60).mean()  # chart bars and lines, not only text
    assert not_white > 0.03 and coloured > 0.005


def test_report_with_a_baseline_renders_both_runs_in_headless_chromium(runs, tmp_path):
    """The DOM Chromium builds from the page holds both runs' figures and the paired difference."""
    browser = _chromium()
    target = tmp_path / "report.html"
    assert (
        main(
            [
                "report",
                str(runs["suite"]),
                "--baseline",
                str(runs["baseline"]),
                "--output",
                str(target),
                "--bootstrap",
                "200",
            ]
        )
        == 0
    )
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", target.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    page = _Page()
    page.feed(dom)
    headline = next(t for t in page.tables if t[0][:2] == ["rate", "this run"])
    assert headline[0][4] == "other_model" and len(headline[0]) == 6
    assert all(
        re.fullmatch(r"[+-]\d+\.\d pp \[-?\d+\.\d, -?\d+\.\d\], interval (excludes|includes) 0.*", row[5])
        for row in headline[1:]
    )
    assert not [link for link in page.links if not link.startswith(("data:", "#"))]


def test_a_folder_holding_runs_names_them(runs, tmp_path, capsys):
    """A demo output folder holds its runs in eval/<variant>/: the error names them, to pass as RUN and --baseline."""
    shutil.copytree(runs["suite"], tmp_path / "demo" / "eval" / "hp+hn")
    assert main(["report", str(tmp_path / "demo")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"it holds runs in {tmp_path / 'demo' / 'eval' / 'hp+hn'}: pass one of those")
    )
