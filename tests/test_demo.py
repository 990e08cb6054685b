"""`hardpos demo --quick` end to end, and the demo's seed aggregation and tables."""

import json

import pytest

from hf_hardpos.synthetic import report

VARIANTS = (
    "pretrained",
    "contrastive",
    "hn",
    "hp+hn",
    "hn_weight=0",
    "hn_weight=0.25",
    "hn_weight=0.5",
    "hn_weight=0.75",
    "hn_weight=1",
)
DATASETS = ("replace", "swap", "replace_attributes", "replace_relations")
METRICS = ("orig_acc", "aug_acc", "brittleness", "mean_original_score", "mean_negative_score", "mean_positive_score")


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    from hf_hardpos.cli import main

    output_dir = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--output-dir", str(output_dir), "--quick", "--no-progress"]) == 0
    return output_dir


def test_quick_demo_writes_every_variant_dataset_and_metric(quick_demo):
    results = json.loads((quick_demo / "results.json").read_text())
    assert sorted(results) == sorted(VARIANTS)
    for variant in VARIANTS:
        assert sorted(results[variant]) == sorted(DATASETS), variant
        for dataset in DATASETS:
            entry = results[variant][dataset]
            for metric in METRICS:
                assert isinstance(entry[metric], float), (variant, dataset, metric)
            for rate in ("orig_acc", "aug_acc", "brittleness"):
                assert 0.0 <= entry[rate] <= 1.0
            assert entry["aug_acc"] <= entry["orig_acc"]
        replace = results[variant]["replace"]
        subsets = [results[variant]["replace_attributes"], results[variant]["replace_relations"]]
        for metric in METRICS:  # the paper's REPLACE column: unweighted mean of the two subsets
            assert replace[metric] == pytest.approx(sum(s[metric] for s in subsets) / 2)
    # HN weight 1 with HP weight 1 is the hp+hn recipe: the same run, reported under both names.
    assert results["hn_weight=1"] == results["hp+hn"]
    assert (quick_demo / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (quick_demo / "results.md").read_text()
    assert "unweighted mean of the attributes and relations" in table
    assert all(f"| {v} |" in table for v in VARIANTS)
    info = json.loads((quick_demo / "run_info.json").read_text())
    assert info["aliases"] == {"hn_weight=1": "hp+hn"}
    assert info["timings_seconds"]["total"] > 0


def test_saved_models_reproduce_the_reported_metrics(quick_demo):
    from transformers import CLIPModel, CLIPProcessor

    from hf_hardpos.demo import DemoConfig, evaluate_on_world, make_eval_sets

    eval_sets = make_eval_sets(DemoConfig.quick().eval_examples)
    info = json.loads((quick_demo / "run_info.json").read_text())
    folder = quick_demo / "models" / "hn" / "seed-0"
    model, processor = CLIPModel.from_pretrained(folder), CLIPProcessor.from_pretrained(folder)
    measured = evaluate_on_world(model, processor, eval_sets)
    for dataset in DATASETS:
        for metric in METRICS:
            reported = info["per_seed"]["hn"]["0"][dataset][metric]
            assert measured[dataset][metric] == pytest.approx(reported, abs=1e-6), (dataset, metric)

    pretrained = CLIPModel.from_pretrained(quick_demo / "models" / "pretrained")
    tuned = {name: CLIPModel.from_pretrained(quick_demo / "models" / name / "seed-0") for name in ("hn", "hp+hn")}
    weight = "text_model.embeddings.token_embedding.weight"
    assert not pretrained.state_dict()[weight].equal(tuned["hn"].state_dict()[weight])
    assert not tuned["hn"].state_dict()[weight].equal(tuned["hp+hn"].state_dict()[weight])


def test_quick_demo_is_deterministic(quick_demo, tmp_path):
    from hf_hardpos.cli import main

    assert main(["demo", "--output-dir", str(tmp_path), "--quick", "--no-sweep", "--no-progress"]) == 0
    again = json.loads((tmp_path / "results.json").read_text())
    first = json.loads((quick_demo / "results.json").read_text())
    assert sorted(again) == ["contrastive", "hn", "hp+hn", "pretrained"]
    for variant in again:
        assert again[variant] == first[variant], variant


def _run(brittle: float, orig: float = 0.6) -> dict:
    entry = {
        "orig_acc": orig,
        "aug_acc": 0.4,
        "brittleness": brittle,
        "mean_original_score": 0.2,
        "mean_negative_score": 0.1,
        "mean_positive_score": 0.15,
        "num_examples": 10,
    }
    return {"replace": dict(entry), "swap": dict(entry)}


def test_seed_aggregation_and_brittleness_comparison():
    per_seed = {"hn": {0: _run(0.3), 1: _run(0.1)}, "hp+hn": {0: _run(0.2), 1: _run(0.2)}}
    summary = report.mean_over_seeds(per_seed["hn"])
    assert summary["replace"]["brittleness"] == pytest.approx(0.2)
    assert summary["replace"]["brittleness_std"] == pytest.approx(0.1414213, rel=1e-5)
    assert summary["replace"]["num_seeds"] == 2 and summary["replace"]["num_examples"] == 10
    assert report.brittleness_comparison(per_seed, "replace") == (1, 2)
    results = {name: report.mean_over_seeds(runs) for name, runs in per_seed.items()}
    text = report.format_tables(results, per_seed, (0, 1), 10)
    assert "20.0 ± 14.1" in text
    assert "HN-only is more brittle than HP+HN: REPLACE 1/2, SWAP 1/2" in text
    with pytest.raises(ValueError, match="no runs"):
        report.mean_over_seeds({})


def test_relation_groups_must_fit_whole_in_a_pretraining_batch(tmp_path):
    from hf_hardpos.demo import DemoConfig, run_demo

    config = DemoConfig.quick()
    config.pretrain_batch_size = 66  # not a multiple of the group size (4): groups would be split
    with pytest.raises(ValueError, match="multiple of pretrain_relation_group_size"):
        run_demo(tmp_path, config, progress=False)
    assert not (tmp_path / "results.json").exists()
