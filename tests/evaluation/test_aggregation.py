"""REPLACE's aggregate is the paper's pooled column: checked on unequal subsets through `hardpos eval`."""

import json

import numpy as np
import pytest
from datasets import Dataset

from hf_hardpos.cli import main
from hf_hardpos.evaluation.aggregation import (
    REPLACE_MACRO_MEAN,
    REPLACE_POOLED,
    pooled_from_results,
    replace_aggregates,
)
from hf_hardpos.metrics import (
    METRIC_NAMES,
    bootstrap_interval,
    compute_metrics,
    wilson_interval,
)
from tests.support.eval_data import make_eval_set, write_hub_folder

RATES = {
    "original_accuracy": "original_correct",
    "augmented_accuracy": "augmented_correct",
    "brittleness": "brittle",
}


@pytest.fixture(scope="module")
def unequal_replace(tmp_path_factory):
    """30 attribute rows and 90 relation rows sharing image ids, laid out as the Hub REPLACE repo.

    Every relation row's hard negative equals its caption, so s_c = s_n there (a tie: never correct):
    the subsets' original accuracies differ by construction, and pooled != unweighted mean.
    """
    root = tmp_path_factory.mktemp("replace_unequal")
    attributes = make_eval_set(num_images=10, rows_per_image=3, seed=1)
    relations = make_eval_set(num_images=30, rows_per_image=3, seed=2)
    relations = relations.map(lambda row: {"hard_negative": row["caption"]})
    return write_hub_folder(root, {"attributes": attributes, "relations": relations})


def test_pooled_aggregate_equals_pooled_fraction_of_written_scores(tiny_clip_dir, unequal_replace, tmp_path):
    out = tmp_path / "eval"
    argv = ["eval", "--model", str(tiny_clip_dir), "--dataset", str(unequal_replace), "--output", str(out),
            "--bootstrap", "200", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    saved = json.loads((out / "metrics.json").read_text())
    rows = {c: Dataset.from_parquet(str(out / f"scores-{c}.parquet")) for c in ("attributes", "relations")}
    assert [len(rows[c]) for c in ("attributes", "relations")] == [30, 90]

    pooled = saved["aggregates"][REPLACE_POOLED]
    assert pooled["aggregation"] == {
        "method": "pooled", "rows": 120, "configs": ["attributes", "relations"], "paper_column": True,
        "interval": pooled["aggregation"]["interval"],
    }  # fmt: skip
    assert saved["aggregates"][REPLACE_MACRO_MEAN]["aggregation"]["paper_column"] is False
    assert pooled["num_examples"] == 120
    for rate, column in RATES.items():
        outcomes = np.concatenate([np.asarray(rows[c][column]) for c in ("attributes", "relations")])
        assert pooled[rate] == outcomes.mean()
    for score, column in (
        ("mean_original_score", "original_score"),
        ("mean_positive_score", "positive_score"),
    ):
        values = np.concatenate([np.asarray(rows[c][column]) for c in ("attributes", "relations")])
        assert pooled[score] == pytest.approx(values.mean(), abs=1e-12)

    attributes, relations = saved["results"]["attributes"], saved["results"]["relations"]
    assert relations["original_accuracy"] == 0.0 < attributes["original_accuracy"]
    macro = saved["aggregates"][REPLACE_MACRO_MEAN]["original_accuracy"]
    assert macro == pytest.approx((attributes["original_accuracy"] + relations["original_accuracy"]) / 2)
    assert pooled["original_accuracy"] == pytest.approx(attributes["original_accuracy"] * 30 / 120)
    assert pooled["original_accuracy"] != pytest.approx(macro)

    # The interval resamples images across both subsets: an image id shared by the subsets is one unit.
    images = np.concatenate([np.asarray(rows[c]["image_id"]) for c in ("attributes", "relations")])
    outcomes = np.concatenate([np.asarray(rows[c]["brittle"]) for c in ("attributes", "relations")])
    low, high = bootstrap_interval(outcomes.astype(float), 200, 0.95, seed=0, groups=images)
    wilson = wilson_interval(int(outcomes.sum()), outcomes.size)  # the bootstrap interval contains it
    assert (pooled["brittleness_ci_low"], pooled["brittleness_ci_high"]) == (
        min(low, wilson[0]),
        max(high, wilson[1]),
    )
    assert len(set(images)) == 30  # the first 10 ids occur in both subsets


def test_pooling_per_config_results_equals_pooling_rows():
    """The trainer pools from per-config rates and counts; equal to pooling the rows themselves."""
    rng = np.random.default_rng(0)
    scores = {c: {k: rng.normal(0.25, 0.02, n) for k in ("original", "negative", "positive")}
              for c, n in (("attributes", 30), ("relations", 90))}  # fmt: skip
    results = {c: compute_metrics(s["original"], s["negative"], s["positive"]) for c, s in scores.items()}
    from_rows = replace_aggregates(results, scores)[REPLACE_POOLED]
    from_results = pooled_from_results(results, ["attributes", "relations"])
    for name in (*METRIC_NAMES, "mean_original_score", "mean_negative_score", "mean_positive_score"):
        assert from_results[name] == pytest.approx(from_rows[name], abs=1e-12), name
    assert from_rows["num_examples"] == from_results["num_examples"] == 120
    assert replace_aggregates({"relations": results["relations"]}) == {}  # one subset: no REPLACE column
