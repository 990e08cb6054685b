"""Caption-selection profiles (hf_hardpos.evaluation.tasks.caption_profile): each benchmark recognises its
own data, its declared columns are the figures its paper prints, and a new benchmark registered in
`benchmark_registry` is scored and aggregated by the task with no other edit."""

from __future__ import annotations

import numpy as np
from datasets import Dataset

from hf_hardpos.benchmark_registry import BENCHMARKS, Benchmark, Buildable
from hf_hardpos.evaluation.tasks import caption_selection
from hf_hardpos.evaluation.tasks.base import TaskData
from hf_hardpos.evaluation.tasks.caption_profile import CaptionSelectionProfile
from hf_hardpos.published import all_figures

_BASE = {"image": [None], "caption": ["a"], "hard_negative": ["b"]}


def _table(**extra) -> Dataset:
    return Dataset.from_dict({**_BASE, **{name: [value] for name, value in extra.items()}})


DATA = {
    "valse": {"existence": _table(mturk_caption=3, valid=True)},
    "vl_checklist": {"attribute_color": _table(upstream_index=0, aspect="attribute", type="color")},
    "sugarcrepe": {"replace_att": _table(), "swap_obj": _table()},
    "aro": {"vg_relation": _table(relation_name="on"), "coco_order": _table()},
}


def test_each_profile_recognises_its_own_data_only():
    recognised = {
        name: [p.name for p in caption_selection.profiles() if p.recognises(subsets)]
        for name, subsets in DATA.items()
    }
    assert recognised == {name: [name] for name in DATA}
    assert [p.name for p in caption_selection.profiles() if p.recognises({"default": _table()})] == []


def test_declared_columns_are_the_published_figures():
    profiles = {p.name: p for p in caption_selection.profiles()}
    published = {f.benchmark for f in all_figures() if f.benchmark.split("/")[0] in profiles}
    declared = {f"{p.name}/{column}" for p in profiles.values() for column in p.columns}
    assert published == declared


def test_published_keys_come_from_the_profiles():
    assert caption_selection.published_key("official/relation_spatial", {}) == "vl_checklist/relation_spatial"
    assert (
        caption_selection.published_key("full/relation_spatial", {}) is None
    )  # published numbers: official protocol
    assert caption_selection.published_key("plurals", {"num_upstream_rows": 10}) == "valse/plurality"
    assert caption_selection.published_key("replace_att", {"num_upstream_rows": 10}) is None
    assert caption_selection.published_key("swap=mean(swap_att,swap_obj)", {}) == "sugarcrepe/swap"
    assert caption_selection.published_key("vg_attribution", {}) == "aro/vg_attribution"


def test_a_new_profile_with_its_own_aggregation_is_scored_by_the_task(monkeypatch):
    """A made-up benchmark whose rows carry a precomputed 0/1 `outcome`, aggregated as a median over
    subsets: registered from the test alone, the task recognises and aggregates it (no scorer is needed)."""

    def evaluate(scorer, subsets, max_rows):
        results = {name: {"accuracy": float(np.mean(data["outcome"])), "num_examples": len(data)}
                   for name, data in subsets.items()}  # fmt: skip
        median = float(np.median([r["accuracy"] for r in results.values()]))
        return {"results": results, "aggregates": {"median": {"accuracy": median}}, "tie_rule": "none",
                "aggregation": "median over subsets"}  # fmt: skip

    profile = CaptionSelectionProfile(
        name="toy", citation="test", recognises=lambda subsets: "outcome" in next(iter(subsets.values())).column_names,
        columns=("median",), published_column=lambda row, metrics: row if row == "median" else None, evaluate=evaluate,
    )  # fmt: skip
    toy = Benchmark("toy", Buildable("toy", "unused:unused", ()), "caption_selection", profile=profile)
    monkeypatch.setitem(BENCHMARKS, "toy", toy)
    subsets = {name: _table(outcome=value) for name, value in (("x", 1), ("y", 0), ("z", 1))}
    section = caption_selection.score_caption_selection(None, TaskData(subsets))
    assert section.aggregates == {"median": {"accuracy": 1.0}}
    assert {name: row["accuracy"] for name, row in section.results.items()} == {"x": 1.0, "y": 0.0, "z": 1.0}
    assert caption_selection.published_key("median", {}) == "toy/median"


def test_shared_aggregation_options_are_merged_for_a_dataset_of_both():
    both = {**DATA["sugarcrepe"], **DATA["aro"]}
    options: dict = {}
    for profile in caption_selection.profiles():
        if profile.recognises(both):
            options.update(profile.selection_options(both))
    assert set(options) == {"categories", "macro", "true_caption_first"}
    assert options["true_caption_first"] == ["coco_order"] and list(options["macro"]) == ["vg_relation"]
