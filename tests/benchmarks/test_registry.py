"""A caption-selection benchmark registered from a test alone (docs/architecture.md, "A new
caption-selection benchmark"): its folder's one `Benchmark` declaration, and `hardpos build` builds it,
the task recognises its data and aggregates it by its own `evaluate`, with no package file changed."""

from __future__ import annotations

import numpy as np
import pytest
from datasets import Dataset, Image, Value

from hf_hardpos import cli
from hf_hardpos.benchmark_registry import BENCHMARKS, Benchmark, Buildable, load, option, register
from hf_hardpos.evaluation.tasks import CAPTION_SELECTION, TaskData, detect_task, run_task
from hf_hardpos.evaluation.tasks.caption_profile import CaptionSelectionProfile
from hf_hardpos.evaluation.tasks.selection import SELECTION_TIE_RULE, selection_correct, selection_scores
from hf_hardpos.scoring import ITMScorer
from tests.support.caption_selection import make_selection_set


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
def levels():
    """The benchmark registered for this test only (taken out of the table after it)."""
    yield register(Benchmark(
        name="levels",
        build=Buildable("levels: a toy benchmark", export_levels,
                        (option("--rows", type=int, default=12, help="rows to build"),)),
        task=CAPTION_SELECTION,
        profile=PROFILE,
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
