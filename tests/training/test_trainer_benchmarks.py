"""Trainer eval sets of every benchmark: compositionality and zero-shot retention logged side by side.

A tiny CLIP trains two steps with hard-positive sets (in memory, and a two-config parquet folder),
caption-selection sets (a SugarCrepe-style parquet folder and an in-memory table), Winoground and
clip_benchmark zero-shot webdatasets (classification, retrieval) as eval sets. The logged numbers
must equal what `hardpos eval`'s code (`tasks.run_task`, `evaluate_dataset`, and
`suite.run_suite` on the saved model) gives for the same model; the card's model-index must carry
every kind, each under its task type.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.aggregation import replace_aggregates
from hf_hardpos.evaluation.eval_data import load_eval_sets
from hf_hardpos.evaluation.section import Section, slug
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite
from hf_hardpos.evaluation.tasks import (
    CAPTION_SELECTION,
    WINOGROUND,
    ZEROSHOT_CLASSIFICATION,
    ZEROSHOT_RETRIEVAL,
    TaskData,
    run_task,
)
from hf_hardpos.evaluation.tasks.hard_positive import evaluate_dataset
from hf_hardpos.evaluation.tasks.ranking import RANK_TIE_RULE
from hf_hardpos.evaluation.tasks.selection import SELECTION_TIE_RULE
from hf_hardpos.scoring import ITMScorer
from hf_hardpos.synthetic.world import make_finetune_dataset, make_replace_dataset
from hf_hardpos.tables import TIE_RULE
from hf_hardpos.training import (
    BenchmarkEvalSet,
    HardPosModelCardData,
    HardPosTrainer,
    HardPosTrainingArguments,
)
from hf_hardpos.training.card_evaluation import section_table
from hf_hardpos.training.checkpointing import EVAL_SECTIONS_NAME
from tests.support.caption_selection import make_selection_set, make_winoground
from tests.support.eval_data import write_hub_folder
from tests.support.training import finetune_folder
from tests.support.webdataset import (
    CLASSNAMES,
    TEMPLATES,
    WORDS,
    image_bytes,
    write_webdataset,
)

EVAL_BATCH = 16


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("benchmarks")
    rng = np.random.default_rng(3)
    samples = [{"png": image_bytes(rng, "PNG"), "cls": str(i % len(CLASSNAMES)).encode()} for i in range(10)]
    captioned = [
        {"jpg": image_bytes(rng, "JPEG"), "txt": "\n".join(rng.choice(WORDS, 3)).encode()} for _ in range(6)
    ]
    return {
        "coco": write_webdataset(root / "coco", captioned, nshards=2, dataset_type="retrieval"),
        "cifar": write_webdataset(root / "cifar", samples, nshards=2, classnames="\n".join(CLASSNAMES),
                                  zeroshot_classification_templates="\n".join(TEMPLATES)),
        "sugarcrepe": write_hub_folder(root / "sugarcrepe", {
            "replace_att": make_selection_set(6, 1, seed=1), "swap_obj": make_selection_set(4, 1, seed=2)}),
        "replace": write_hub_folder(root / "replace", {
            "attributes": make_replace_dataset(4, 5, "attributes"),
            "relations": make_replace_dataset(4, 6, "relations")}),
    }  # fmt: skip


def _args(output_dir, **overrides) -> HardPosTrainingArguments:
    settings = dict(
        output_dir=str(output_dir), max_steps=2, per_device_train_batch_size=8, per_device_eval_batch_size=EVAL_BATCH,
        learning_rate=1e-3, logging_steps=1, eval_strategy="steps", eval_steps=2, save_strategy="steps",
        save_steps=2, report_to="none", disable_tqdm=True, use_cpu=True, seed=0,
    )  # fmt: skip
    settings.update(overrides)
    return HardPosTrainingArguments(**settings)


def _eval_sets(folders) -> dict:
    return {
        "replace": make_replace_dataset(8, seed=1),  # a plain Dataset: the hard-positive schema, as before
        "sugarcrepe": BenchmarkEvalSet(str(folders["sugarcrepe"])),
        "selection": BenchmarkEvalSet(make_selection_set(5, 2, seed=4)),  # recognised from its columns
        "winoground": BenchmarkEvalSet(make_winoground(4)),
        "cifar10": BenchmarkEvalSet(str(folders["cifar"]), max_rows=8),
        "replace_hub": BenchmarkEvalSet(str(folders["replace"])),  # both configs + the paper's REPLACE mean
        "coco": BenchmarkEvalSet(str(folders["coco"])),
    }


def _trainer(tiny_clip_dir, output_dir, folders) -> HardPosTrainer:
    return HardPosTrainer(
        model=CLIPModel.from_pretrained(tiny_clip_dir),
        args=_args(output_dir),
        train_dataset=make_finetune_dataset(16, seed=0),
        eval_datasets=_eval_sets(folders),
        processor=CLIPProcessor.from_pretrained(tiny_clip_dir),
        model_card_data=HardPosModelCardData(
            base_model="example-org/tiny-clip",
            eval_dataset_ids={
                "cifar10": "clip-benchmark/wds_vtab-cifar10",
                "sugarcrepe": "hardpos/sugarcrepe",
            },
        ),
    )


@pytest.fixture(scope="module")
def trained(tiny_clip_dir, folders, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("run") / "clip-benchmarks"
    trainer = _trainer(tiny_clip_dir, output_dir, folders)
    trainer.train()
    trainer.save_model()
    logged = next(e for e in reversed(trainer.state.log_history) if "eval_runtime" in e)
    return trainer, output_dir, logged


def _reference(trainer, folders) -> dict[str, dict]:
    """The same model scored by `hardpos eval`'s code: one fresh scorer, as a CLI run would build."""
    model, processor = trainer.model, trainer.processing_class
    scorer = ITMScorer(model, processor, EVAL_BATCH, progress=False)
    eval_sets = _eval_sets(folders)
    return {
        "replace": evaluate_dataset(model, processor, eval_sets["replace"], batch_size=EVAL_BATCH, progress=False),
        "sugarcrepe": run_task(CAPTION_SELECTION, scorer, TaskData(str(folders["sugarcrepe"]))),
        "selection": run_task(CAPTION_SELECTION, scorer, TaskData(eval_sets["selection"].source)),
        "winoground": run_task(WINOGROUND, scorer, TaskData(eval_sets["winoground"].source)),
        "cifar10": run_task(ZEROSHOT_CLASSIFICATION, scorer, TaskData(str(folders["cifar"])), 8),
        "coco": run_task(ZEROSHOT_RETRIEVAL, scorer, TaskData(str(folders["coco"]))),
        "replace_hub": {config: evaluate_dataset(model, processor, eval_set.dataset, batch_size=EVAL_BATCH,
                                                 progress=False)
                        for config, eval_set in load_eval_sets(str(folders["replace"]), None, "test").items()},
    }  # fmt: skip


def test_logged_metrics_equal_the_cli_code_for_every_benchmark(trained, folders):
    trainer, _, logged = trained
    assert logged["step"] == 2
    reference = _reference(trainer, folders)
    expected = {f"eval_replace_{k}": v for k, v in reference["replace"].items()}
    for name in ("cifar10", "coco"):
        expected.update({f"eval_{name}_{k}": v for k, v in reference[name].results["all"].items()})
    for name in ("selection", "sugarcrepe", "winoground"):
        results, aggregates = reference[name].results, reference[name].aggregates
        # A lone result row is logged as eval_<set>_<metric>; other rows and aggregates carry their name.
        named = {**({} if len(results) == 1 else results), **aggregates}
        lone = next(iter(results.values())) if len(results) == 1 else {}
        expected.update({f"eval_{name}_{k}": v for k, v in lone.items() if not isinstance(v, str)})
        expected.update({f"eval_{name}_{slug(r)}_{k}": v for r, m in named.items() for k, v in m.items()
                         if not isinstance(v, str)})  # fmt: skip
    hub = reference["replace_hub"]
    aggregates = replace_aggregates(hub)
    hub = {**hub, **{slug(name): row for name, row in aggregates.items()}}
    expected.update(
        {
            f"eval_replace_hub_{row}_{k}": v
            for row, m in hub.items()
            for k, v in m.items()
            if not isinstance(v, dict)
        }
    )  # the aggregates' `aggregation` descriptions are not logged
    got = {k: v for k, v in logged.items() if k.startswith("eval_") and k != "eval_runtime"}
    assert got == pytest.approx(expected, rel=0, abs=1e-12)
    assert set(got) == set(expected)
    # Compositionality and retention side by side, under the documented names.
    for key in (
        "eval_cifar10_acc1",
        "eval_cifar10_acc5",
        "eval_cifar10_mean_per_class_recall",
        "eval_sugarcrepe_replace_att_accuracy",
        "eval_sugarcrepe_mean_replace_att_swap_obj_accuracy",
        "eval_replace_augmented_accuracy",
        "eval_winoground_all_group_score",
        "eval_selection_accuracy",
        "eval_replace_hub_relations_brittleness",
        "eval_replace_hub_pooled_attributes_relations_brittleness",
        "eval_replace_hub_mean_attributes_relations_brittleness",
        "eval_coco_image_retrieval_recall@1",
        "eval_coco_text_retrieval_recall@10",
    ):
        assert key in logged, key
    assert logged["eval_cifar10_num_examples"] == 8  # max_rows
    assert isinstance(logged["eval_cifar10_num_examples"], int) and isinstance(
        logged["eval_cifar10_acc1"], float
    )


def test_logged_metrics_equal_hardpos_eval_on_the_saved_model(trained, folders, tmp_path):
    """`hardpos eval --suite` on the folder sets, with the model the trainer saved after its evaluation."""
    trainer, output_dir, logged = trained
    entries = [SuiteEntry(name, str(folders[folder])) for name, folder in (
        ("sugarcrepe", "sugarcrepe"), ("cifar10", "cifar"), ("replace_hub", "replace"), ("coco", "coco"))]  # fmt: skip
    report = run_suite(str(output_dir), entries, output_dir=tmp_path / "suite", batch_size=EVAL_BATCH, max_rows=8,
                       progress=False, log=lambda message: None)  # fmt: skip
    for name, section in report.sections.items():
        for key, value in section.flat_metrics(name).items():
            assert logged[key] == pytest.approx(value, abs=1e-6), key
    assert logged["eval_cifar10_acc1"] == report.sections["cifar10"].results["all"]["acc1"]


def test_card_model_index_carries_compositionality_and_retention(trained):
    trainer, output_dir, logged = trained
    text = (output_dir / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    entries = [
        (r["task"]["type"], r["dataset"], m) for r in front["model-index"][0]["results"] for m in r["metrics"]
    ]
    by_name = {(d["name"], m["type"]): (task, d, m["value"]) for task, d, m in entries}
    task, dataset, value = by_name[("cifar10", "acc1")]
    assert (
        task == "zero-shot-image-classification"
        and type(value) is float
        and value == logged["eval_cifar10_acc1"]
    )
    assert dataset == {"name": "cifar10", "type": "clip-benchmark/wds_vtab-cifar10", "split": "test"}
    assert {m for (n, m) in by_name if n == "cifar10"} == {"acc1", "acc5", "mean_per_class_recall"}
    task, dataset, value = by_name[("replace", "augmented_accuracy")]
    assert task == "zero-shot-image-classification" and value == logged["eval_replace_augmented_accuracy"]
    # REPLACE's paper column is the pooled one: the card carries it under its own config.
    _, dataset, value = by_name[("replace_hub / pooled(attributes,relations)", "brittleness")]
    assert dataset["config"] == "pooled(attributes,relations)"
    assert value == logged["eval_replace_hub_pooled_attributes_relations_brittleness"]
    subsets = [trainer.eval_sections["replace_hub"]["results"][c] for c in ("attributes", "relations")]
    counts = sum(round(s["brittleness"] * s["num_examples"]) for s in subsets)
    assert value == counts / sum(s["num_examples"] for s in subsets)
    task, dataset, value = by_name[("sugarcrepe / replace_att", "accuracy")]
    assert (
        task == "zero-shot-image-classification" and value == logged["eval_sugarcrepe_replace_att_accuracy"]
    )
    assert dataset["config"] == "replace_att"  # one model-index entry per row: the Hub groups by config
    assert by_name[("sugarcrepe / swap_obj", "accuracy")][2] == logged["eval_sugarcrepe_swap_obj_accuracy"]
    assert by_name[("winoground / all", "group_score")][2] == logged["eval_winoground_all_group_score"]
    # one task id the Hub knows (CLIP's pipeline tag); the task names tell the comparisons apart
    assert {t for t, _, _ in entries} == {"zero-shot-image-classification"}
    assert {r["task"]["name"] for r in front["model-index"][0]["results"]} >= {
        "Image-text matching with hard positives", "Zero-shot image-text retrieval"}  # fmt: skip
    task, _, value = by_name[("coco", "image_retrieval_recall@5")]
    assert task == "zero-shot-image-classification" and value == logged["eval_coco_image_retrieval_recall@5"]
    assert {m for (n, m) in by_name if n == "coco"} == {f"{d}_retrieval_recall@{k}" for d in ("image", "text")
                                                         for k in (1, 5, 10)}  # fmt: skip
    assert all(type(m["value"]) is float for _, _, m in entries)
    assert (
        "clip-benchmark/wds_vtab-cifar10" in front["datasets"] and "hardpos/sugarcrepe" in front["datasets"]
    )

    # The body: each set's table with its tie rule and aggregation.
    for name, saved in trainer.eval_sections.items():
        section = Section.from_dict(saved)
        if section.task != "hard_positive":
            assert section_table(section) in text, name
        assert section.tie_rule in text and section.step == 2
    for rule in (TIE_RULE, SELECTION_TIE_RULE, RANK_TIE_RULE):
        assert rule in text
    assert f"{100 * logged['eval_cifar10_acc1']:.1f}" in text
    assert "only its first 8 rows" in text and "the zero-shot sets above measure it" in text
    assert "| replace | 8 |" in text  # the hard-positive table: a row per set, or per config and aggregate
    assert (
        "| replace_hub / attributes | 4 |" in text
        and "| replace_hub / pooled(attributes,relations) | 8 |" in text
    )
    task, dataset, value = by_name[("replace_hub / relations", "brittleness")]
    assert dataset["config"] == "relations" and value == logged["eval_replace_hub_relations_brittleness"]


def test_checkpoint_keeps_the_sections_and_a_resume_restores_them(trained, tiny_clip_dir, folders):
    trainer, output_dir, _ = trained
    saved = json.loads((output_dir / "checkpoint-2" / EVAL_SECTIONS_NAME).read_text())
    assert (
        saved["cifar10"]["results"]["all"]["acc1"]
        == trainer.eval_sections["cifar10"]["results"]["all"]["acc1"]
    )
    resumed = _trainer(tiny_clip_dir, output_dir, folders)
    resumed.train(resume_from_checkpoint=True)  # step 2 of 2: nothing left to train or evaluate
    assert json.loads(json.dumps(resumed.eval_sections)) == saved


def test_flat_names_and_bad_eval_sets(tiny_clip_dir, tmp_path):
    section = Section(None, results={"a(b)": {"accuracy": np.float64(0.5), "num_examples": np.int64(4), "note": "x"},
                                     "a_b": {"accuracy": 0.25}})  # fmt: skip
    with pytest.raises(ValueError, match="would both log 'eval_s_a_b_accuracy'"):
        section.flat_metrics("s")
    one = Section(None, results={"all": section.results["a(b)"]}).flat_metrics("s")
    assert (
        one == {"eval_s_accuracy": 0.5, "eval_s_num_examples": 4} and type(one["eval_s_num_examples"]) is int
    )

    model, processor = CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)

    def build(eval_set):
        return HardPosTrainer(model=model, args=_args(tmp_path, eval_strategy="no"), processor=processor,
                              train_dataset=make_finetune_dataset(8), eval_datasets={"bad": eval_set})  # fmt: skip

    unknown = make_selection_set(3, 1, seed=0).rename_column("hard_negative", "other")
    with pytest.raises(UserInputError, match=r"eval set 'bad': cannot tell which benchmark"):
        build(BenchmarkEvalSet(unknown))
    with pytest.raises(
        UserInputError, match=r"eval set 'bad': zeroshot_classification reads a clip_benchmark"
    ):
        build(BenchmarkEvalSet(make_selection_set(3, 1, seed=0), task=ZEROSHOT_CLASSIFICATION))
    with pytest.raises(UserInputError, match="dataset not found"):
        build(BenchmarkEvalSet(str(tmp_path / "missing" / "folder")))
    with pytest.raises(UserInputError, match="max_rows must be >= 1"):
        build(BenchmarkEvalSet(make_selection_set(3, 1, seed=0), max_rows=0))


def test_finetune_example_takes_any_benchmark_as_eval_set(tiny_clip_dir, folders, tmp_path):
    from hf_hardpos.commands.train import main

    output_dir = tmp_path / "example"
    metrics = main([
        "--model_name_or_path", str(tiny_clip_dir), "--output_dir", str(output_dir), "--use_cpu",
        "--max_steps", "1", "--dataset", str(finetune_folder(tmp_path / "data", 16)), "--per_device_train_batch_size", "8",
        "--eval_strategy", "no", "--save_strategy", "no", "--disable_tqdm", "true", "--report_to", "none",
        "--eval_datasets", f"cifar10={folders['cifar']}", f"{folders['sugarcrepe']}:swap_obj",
        "--max_eval_samples", "3",
    ])  # fmt: skip
    assert metrics["eval_cifar10_num_examples"] == 3 and "eval_cifar10_acc1" in metrics
    assert metrics["eval_swap_obj_num_examples"] == 3 and "eval_swap_obj_accuracy" in metrics
    # SugarCrepe's category mean over the one subset keeps its (slugged) name.
    assert metrics["eval_swap_obj_swap_mean_swap_obj_accuracy"] == metrics["eval_swap_obj_accuracy"]
    front = yaml.safe_load((output_dir / "README.md").read_text().split("---")[1])
    results = {r["dataset"]["name"]: r for r in front["model-index"][0]["results"]}
    assert results["cifar10"]["task"]["type"] == "zero-shot-image-classification"
    assert results["swap_obj"]["task"]["type"] == "zero-shot-image-classification"
    assert results["swap_obj"]["dataset"]["config"] == "swap_obj"
