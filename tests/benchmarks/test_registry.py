"""A caption-selection benchmark registered from a test alone (docs/architecture.md, "A new
caption-selection benchmark"): its folder's one `Benchmark` declaration (its figures and BibTeX files
in a temporary folder), and `hardpos build` lists and builds it, the suite it names lists it, its
paper's figures and citation are the package's, the task recognises its data and aggregates it by its
own `evaluate`, with no package file changed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from datasets import Dataset, Image, Value

from hf_hardpos import cli, published
from hf_hardpos.benchmark_registry import BENCHMARKS, Benchmark, Buildable, load, option, register
from hf_hardpos.citations import BIBTEX, cite
from hf_hardpos.commands.build import buildables
from hf_hardpos.evaluation.tasks import CAPTION_SELECTION, TaskData, detect_task, run_task
from hf_hardpos.evaluation.tasks.caption_profile import CaptionSelectionProfile
from hf_hardpos.evaluation.tasks.selection import SELECTION_TIE_RULE, selection_correct, selection_scores
from hf_hardpos.scoring import ITMScorer
from tests.support.caption_selection import make_selection_set
from tests.support.paths import REPO

# The docs' worked example's figures.yaml (docs/architecture.md), and the BibTeX of its paper.
FIGURES = """
papers:
  levels2025: "Levels et al., a test 2025"
tables:
  - paper: levels2025
    table: Table 2
    title: "Accuracy per number of atoms in the caption; Mean = mean of the levels"
    columns:
      - ["4 atoms", levels/level_4, accuracy]
      - ["5 atoms", levels/level_5, accuracy]
      - ["6 atoms", levels/level_6, accuracy]
      - ["Mean", levels/mean, accuracy]
    rows:
      - ["CLIP", 71.0, 64.5, 58.1, 64.5]
    models:
      "CLIP": "CLIP ViT-B/32"
"""
REFERENCES = """@article{levels2025,
    title = {Levels},
    author = {Levels, Test},
    year = {2025}
}
"""


def export_levels(output_dir, *, rows, skip_missing, cache_dir, repo_id_for_card, progress):
    """The toy builder: caption-selection rows with a `level` column, one parquet shard of split test and
    the README that declares it."""
    data = make_selection_set(rows, 1, seed=3).cast_column("image", Image(decode=False))
    data = data.add_column("level", [4 + r % 3 for r in range(rows)]).cast_column("level", Value("int32"))
    (output_dir / "data").mkdir(parents=True, exist_ok=True)
    data.to_parquet(str(output_dir / "data" / "test-00000-of-00001.parquet"))
    (output_dir / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*.parquet\n---\n"
    )


def evaluate_levels(scorer, subsets, max_rows=None):
    """Accuracy per level over every file, and their plain mean (the docs' worked example)."""
    results, outcomes = {}, []
    for name, data in subsets.items():
        correct = selection_correct(selection_scores(scorer, data, what=f"subset {name!r}"))
        results[name] = {"accuracy": float(correct.mean()), "num_examples": int(correct.size)}
        outcomes.append((np.asarray(data["level"]), correct))
    levels, correct = (np.concatenate(x) for x in zip(*outcomes))
    aggregates = {f"level_{k}": {"accuracy": float(correct[levels == k].mean())} for k in np.unique(levels)}
    aggregates["mean"] = {"accuracy": float(np.mean([a["accuracy"] for a in aggregates.values()]))}
    return {"results": results, "aggregates": aggregates, "tie_rule": SELECTION_TIE_RULE,
            "aggregation": "accuracy per level over all files; mean = plain mean of the levels"}  # fmt: skip


PROFILE = CaptionSelectionProfile(
    name="levels", citation="a test",
    recognises=lambda subsets: "level" in next(iter(subsets.values())).column_names,
    columns=("level_4", "level_5", "level_6", "mean"),
    published_column=lambda row, metrics: row if row in ("level_4", "level_5", "level_6", "mean") else None,
    evaluate=evaluate_levels,
)  # fmt: skip


@pytest.fixture
def levels(tmp_path):
    """The benchmark registered for this test only (taken out of the table after it)."""
    (tmp_path / "figures.yaml").write_text(FIGURES)
    (tmp_path / "references.bib").write_text(REFERENCES)
    yield register(Benchmark(
        name="levels",
        build=Buildable("levels: a toy benchmark", export_levels,
                        (option("--rows", type=int, default=12, help="rows to build"),)),
        task=CAPTION_SELECTION,
        profile=PROFILE,
        suites=("compositional",),
        figures=tmp_path / "figures.yaml",
        references=tmp_path / "references.bib",
    ))  # fmt: skip
    del BENCHMARKS["levels"]


def test_a_registered_benchmark_is_built_recognised_and_aggregated(levels, tmp_path, model_and_processor):
    out = tmp_path / "levels"
    assert cli.main(["build", "levels", "--output-dir", str(out), "--rows", "12"]) == 0
    assert detect_task(str(out)) == CAPTION_SELECTION
    scorer = ITMScorer(*model_and_processor, batch_size=4, progress=False)
    section = run_task(CAPTION_SELECTION, scorer, TaskData(str(out)))
    rows = Dataset.from_parquet(str(out / "data" / "test-00000-of-00001.parquet"))
    assert sorted(set(rows["level"])) == [4, 5, 6] and len(rows) == 12
    expected = evaluate_levels(scorer, {"default": rows})
    assert set(section.aggregates) == {"level_4", "level_5", "level_6", "mean"}
    assert section.aggregates == expected["aggregates"]
    assert [r["num_examples"] for r in section.results.values()] == [12]


def test_a_registration_is_refused_twice_and_loads_by_name(levels):
    with pytest.raises(ValueError, match="levels"):
        register(levels)
    assert load("hf_hardpos.benchmarks.vl_checklist.task:PROFILE").name == "vl_checklist"
    assert load(PROFILE) is PROFILE


def test_a_registered_benchmark_is_in_the_build_table_its_figures_and_citations(levels):
    assert buildables()["levels"] is levels.build
    figure = published.lookup("CLIP ViT-B/32", "levels/mean", "accuracy")
    assert (figure.paper, figure.table, figure.column, figure.value) == (
        "Levels et al., a test 2025",
        "Table 2",
        "Mean",
        64.5,
    )
    assert published.table_rows("Levels et al.", "Table 2") == {
        "CLIP": {"4 atoms": 71.0, "5 atoms": 64.5, "6 atoms": 58.1, "Mean": 64.5}
    }
    assert [f.paper for f in published.all_figures()][-4:] == [
        "Levels et al., a test 2025"
    ] * 4  # a new paper: last
    compared = published.comparison("CLIP ViT-B/32", {"mean": {"accuracy": 0.6}}, {"mean": "levels/mean"})
    assert compared["mean"]["delta"] == {"accuracy": -4.5}
    assert cite("levels2025") == REFERENCES.strip()
    del BENCHMARKS["levels"]  # taken out: its figures and entry go with it
    assert published.lookup("CLIP ViT-B/32", "levels/mean", "accuracy") is None and "levels2025" not in BIBTEX
    BENCHMARKS["levels"] = levels


def test_a_bibtex_key_defined_in_two_files_is_refused(levels, tmp_path):
    """A second benchmark whose references.bib defines a key the package's file defines: one line naming both."""
    (tmp_path / "again.bib").write_text(BIBTEX["kamath2024hard"] + "\n")
    register(
        Benchmark(name="again", build=levels.build, task=CAPTION_SELECTION, references=tmp_path / "again.bib")
    )
    try:
        with pytest.raises(
            ValueError,
            match=r"again\.bib: BibTeX key 'kamath2024hard' is already defined in \S*hf_hardpos/references\.bib$",
        ):
            cite("levels2025")
    finally:
        del BENCHMARKS["again"]
    assert cite("levels2025") == REFERENCES.strip()


def test_a_benchmark_registered_before_the_suites_are_read_joins_the_suite_it_names():
    """A plugin registers at import, before `evaluation.suite` builds its named suites: the suite lists it
    after the package's folders. (Its builder and profile are names only: listing a suite loads neither.)"""
    script = textwrap.dedent("""
        import json
        from hf_hardpos.benchmark_registry import Benchmark, Buildable, register
        register(Benchmark(name="levels", build=Buildable("levels", "levels.builder:export_levels", ()),
                           task="caption_selection", profile="levels.task:PROFILE", suites=("compositional",)))
        from hf_hardpos.evaluation.suite import load_suite
        print(json.dumps([[e.name, e.dataset, e.task] for e in load_suite("compositional")]))
    """)  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    names = [name for name, _, _ in json.loads(done.stdout.splitlines()[-1])]
    assert names[names.index("vl_checklist") + 1 :] == ["levels"]
    assert ["levels", "hardpos/levels", CAPTION_SELECTION] in json.loads(done.stdout.splitlines()[-1])
