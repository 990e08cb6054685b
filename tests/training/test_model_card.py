"""Model cards: generated from the run, parseable YAML with the measured metrics, pushed by push_to_hub."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml
from datasets import Dataset, Features, Image, Value
from huggingface_hub import ModelCard
from PIL import Image as PILImage

from hf_hardpos import columns
from hf_hardpos.citations import cite
from hf_hardpos.provenance import looks_like_hub_id
from hf_hardpos.training import (
    HardPosModelCardData,
    HardPosTrainer,
    HardPosTrainingArguments,
)
from hf_hardpos.training.model_card import (
    PAPER_CITATIONS,
    card_contents,
    generate_model_card,
    non_default_hyperparameters,
    template_path,
    training_log_table,
)

CAPTIONS = ["a red cube and a blue sphere", "a small green cone above a cube", "a blue cube and a red sphere"]


def _data(n: int, eval_schema: bool = False) -> Dataset:
    rng = np.random.default_rng(1)
    images = [PILImage.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(n)]
    caption = [CAPTIONS[i % 3] + f" {i}" for i in range(n)]
    if eval_schema:
        data = {
            "image": images,
            "caption": caption,
            "hard_negative": [c.replace("red", "green") for c in caption],
            "hard_positive": [c.replace("cube", "block") for c in caption],
        }
    else:
        data = {
            "image": images,
            "caption": caption,
            columns.HARD_POSITIVE_REPLACE: [c.replace("cube", "block") for c in caption],
            columns.HARD_POSITIVE_SWAP: [None] * n,
            columns.HARD_NEGATIVE_REPLACE: [c.replace("red", "green") for c in caption],
            columns.HARD_NEGATIVE_SWAP: [c.replace("cube", "sphere") for c in caption],
        }
    features = Features({"image": Image(), **{k: Value("string") for k in data if k != "image"}})
    return Dataset.from_dict(data, features=features)


def _trainer(tiny_clip_dir, output_dir, **overrides) -> HardPosTrainer:
    from transformers import CLIPModel, CLIPProcessor

    settings = dict(
        output_dir=str(output_dir),
        max_steps=3,
        per_device_train_batch_size=8,
        learning_rate=5e-4,
        cmr_weight=0.4,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
    )
    settings.update(overrides)
    return HardPosTrainer(
        model=CLIPModel.from_pretrained(tiny_clip_dir),
        args=HardPosTrainingArguments(**settings),
        train_dataset=_data(8),
        eval_datasets={"toy_replace": _data(6, eval_schema=True)},
        processor=CLIPProcessor.from_pretrained(tiny_clip_dir),
        model_card_data=HardPosModelCardData(
            base_model="example-org/tiny-clip",
            train_dataset_id="example-org/hardpos-coco",
            eval_dataset_ids={"toy_replace": "example-org/hardpos-replace"},
            license="apache-2.0",
        ),
    )


@pytest.fixture(scope="module")
def trained(tiny_clip_dir, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("card") / "clip-hardpos-toy"
    trainer = _trainer(tiny_clip_dir, output_dir, eval_on_start=True)
    trainer.train()
    trainer.save_model()
    return trainer, output_dir


def test_card_yaml_parses_and_holds_the_measured_metrics(trained):
    trainer, output_dir = trained
    text = (output_dir / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["base_model"] == "example-org/tiny-clip"
    assert front["datasets"] == ["example-org/hardpos-coco", "example-org/hardpos-replace"]
    assert front["library_name"] == "transformers"
    assert front["license"] == "apache-2.0"

    logged = next(
        e for e in reversed(trainer.state.log_history) if "eval_toy_replace_augmented_accuracy" in e
    )
    results = front["model-index"][0]["results"]
    assert front["model-index"][0]["name"] == "clip-hardpos-toy"
    metrics = {m["type"]: m["value"] for r in results for m in r["metrics"]}
    assert set(metrics) == {"original_accuracy", "augmented_accuracy", "brittleness"}
    for name, value in metrics.items():
        assert isinstance(value, float)
        assert value == logged[f"eval_toy_replace_{name}"]
    assert results[0]["dataset"] == {"name": "toy_replace", "type": "example-org/hardpos-replace"}

    card = ModelCard.load(output_dir / "README.md")
    assert {r.metric_type for r in card.data.eval_results} == set(metrics)


def test_card_contents_state_what_happened(trained):
    trainer, output_dir = trained
    _, contents = card_contents(trainer, trainer.model_card_data)
    hyperparameters = contents["hyperparameters"]
    assert (hyperparameters["learning_rate"], hyperparameters["max_steps"]) == (
        {"value": "0.0005", "changed": True}, {"value": "3", "changed": True})  # fmt: skip
    # every argument that shapes the run is listed, defaults too, marked as such
    assert hyperparameters["adam_beta1"] == {"value": "0.9", "changed": False}
    assert hyperparameters["lr_scheduler_type"]["changed"] is False and "seed" in hyperparameters
    assert "per_device_eval_batch_size" not in hyperparameters  # scoring only: shapes nothing
    rows = contents["sample_rows"]
    assert len(rows) == 3 and rows[0]["caption"] == trainer.train_dataset[0]["caption"]
    assert contents["compute"]["device"].startswith("cpu")
    config = json.loads(contents["objective_config"])
    assert (config["cmr_weight"], config["hard_negative_weight"]) == (0.4, 1.0)
    assert contents["loss_formula"] == "`L_clip + 1 * L_hn + 1 * L_hp + 0.4 * L_cmr`"
    assert contents["training_signal"] == "hard positives and hard negatives"
    facts = contents["train_datasets"][0]["description"].split("; ")
    assert "8 rows" in facts and "`hard_positive_swap` present in 0" in facts
    header = contents["training_log"].splitlines()[0]
    assert {"loss_clip", "loss_hn", "loss_hp", "loss_cmr", "logit_scale"} <= {
        c.strip() for c in header.split("|")
    }
    citations = contents["citations"]
    assert citations[:2] == cite(*PAPER_CITATIONS).split("\n\n")  # both papers first
    assert set(trainer.objective.citation.split("\n\n")) <= set(citations)  # then every loss term's paper
    assert len(set(citations)) == len(citations)  # each entry once
    # The rendered card (the product): its sections, and the formula where the template puts it.
    text = (output_dir / "README.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Usage",
        "## Evaluation",
        "## Training",
        "## Intended use",
        "## Limitations",
        "## Citation",
    ]
    assert contents["loss_formula"] in text


def test_push_to_hub_uploads_the_generated_card(tiny_clip_dir, tmp_path, monkeypatch):
    import transformers.trainer as trainer_module

    uploads = []

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            return type("RepoUrl", (), {"repo_id": repo_id})()

        def upload_folder(self, *, repo_id, folder_path, **kwargs):
            from pathlib import Path

            uploads.append(
                (
                    repo_id,
                    sorted(p.name for p in Path(folder_path).iterdir()),
                    (Path(folder_path) / "README.md").read_text(),
                )
            )
            if kwargs.get("run_as_future"):  # the Trainer's checkpoint pushes wait on a Future
                from concurrent.futures import Future

                done = Future()
                done.set_result(None)
                return done

    monkeypatch.setattr(trainer_module, "hf_api", lambda: FakeApi())
    trainer = _trainer(
        tiny_clip_dir,
        tmp_path / "pushed",
        push_to_hub=True,
        hub_model_id="someone/clip-hardpos",
        max_steps=1,
        eval_strategy="no",
        save_strategy="steps",
        save_steps=1,
    )
    trainer.train()
    assert "README.md" in uploads[0][1]  # the checkpoint push carried the card too
    trainer.push_to_hub()
    repo_id, files, card = uploads[-1]
    assert repo_id == "someone/clip-hardpos"
    assert {"README.md", "model.safetensors", "config.json", "processor_config.json"} <= set(files)
    assert 'CLIPModel.from_pretrained("someone/clip-hardpos")' in card  # the usage snippet names the repo
    assert ModelCard(card).data.base_model == "example-org/tiny-clip"


def test_non_default_hyperparameters_diff_against_field_defaults(tmp_path):
    args = HardPosTrainingArguments(
        output_dir=str(tmp_path),
        learning_rate=1e-3,
        imc_weight=0.2,
        lora_target_modules=["q_proj"],
        report_to="none",
    )
    assert non_default_hyperparameters(args) == {
        "imc_weight": 0.2,
        "learning_rate": 1e-3,
        "lora_target_modules": ["q_proj"],
    }
    assert non_default_hyperparameters(HardPosTrainingArguments(output_dir=str(tmp_path))) == {}


def test_helpers(tmp_path):
    assert looks_like_hub_id("openai/clip-vit-base-patch32")
    assert not looks_like_hub_id(str(tmp_path))  # an existing local folder
    assert not looks_like_hub_id(None)
    assert template_path().is_file()
    with pytest.raises(FileNotFoundError):
        template_path(str(tmp_path / "missing.md"))
    history = [{"loss": float(i), "loss_hn": 0.5, "step": i, "epoch": i / 10} for i in range(1, 61)]
    table = training_log_table(history).splitlines()
    assert table[0] == "| step | epoch | loss | loss_hn |"
    assert len(table) - 2 <= 26 and table[-1].startswith("| 60 |")  # sampled, last row kept


def test_card_eval_table_is_the_package_table_with_its_tie_rule(trained):
    from hf_hardpos.tables import TIE_RULE, metrics_table

    trainer, output_dir = trained
    text = (output_dir / "README.md").read_text()
    logged = next(
        e for e in reversed(trainer.state.log_history) if "eval_toy_replace_augmented_accuracy" in e
    )
    metrics = {
        k[len("eval_toy_replace_") :]: v for k, v in logged.items() if k.startswith("eval_toy_replace_")
    }
    table = metrics_table({"toy_replace": metrics}, label="eval set", markdown=True)
    assert table in text and f"{100 * metrics['augmented_accuracy']:.1f}" in table
    assert TIE_RULE in text
    assert card_contents(trainer, trainer.model_card_data)[1]["recipe"] is None  # this run had no recipe file


def test_global_batch_counts_processes_and_accumulation():
    from types import SimpleNamespace

    from hf_hardpos.training.run_facts import global_batch

    layout = dict(
        per_device_train_batch_size=8, world_size=2, gradient_accumulation_steps=4, dataloader_drop_last=False
    )
    assert global_batch(SimpleNamespace(**layout, gather_across_processes=True)) == {
        "size": 64,
        "per_device": 8,
        "processes": 2,
        "accumulation": 4,
        "contrasted": 16,
        "padded_rows": 0,
    }
    assert global_batch(SimpleNamespace(**layout, gather_across_processes=False))["contrasted"] == 8
    one = global_batch(SimpleNamespace(**{**layout, "world_size": 1}, gather_across_processes=True))
    assert (one["size"], one["contrasted"]) == (32, 8)


def test_card_records_global_batch_and_the_training_sets_config_split_revision(trained, monkeypatch):
    """Without a recipe too: a 2-process card must not read like a 1-process one."""
    import re

    from hf_hardpos.training import model_card, run_facts

    trainer, _ = trained
    data = HardPosModelCardData(
        train_dataset_id="example-org/hardpos-coco",
        train_dataset_config="ce_clip",
        train_dataset_split="train",
        train_dataset_revision="commit 0123abcd",
    )
    single = model_card.card_contents(trainer, data)[1]
    monkeypatch.setattr(run_facts, "batch_layout", lambda args: (8, 2, 4))
    double = model_card.card_contents(trainer, data)[1]
    layout = ("size", "per_device", "processes", "accumulation", "padded_rows")
    assert [single["global_batch"][k] for k in layout] == [8, 8, 1, 1, 0]
    # 8 training rows in rounds of 8 x 2 processes: the round is completed with 8 rows trained twice.
    assert [double["global_batch"][k] for k in layout] == [64, 8, 2, 4, 8]
    identity = re.search(
        r"`example-org/hardpos-coco`, config `(.*?)`, split `(.*?)`, revision `(.*?)`",
        double["train_datasets"][0]["description"],
    )
    assert identity.groups() == ("ce_clip", "train", "commit 0123abcd")
    # The rendered card (the product) states the layout of the 2-process run.
    text = model_card.generate_model_card(trainer, data).text
    assert "Global batch 64 = 8 per device x 2" in text


def test_padded_rows_per_epoch_follow_accelerates_even_batches():
    from hf_hardpos.training.run_facts import padded_rows_per_epoch

    # 20 rows, 8 per device, 2 processes: batches [0-7] [8-15] [16-19]; the second round needs 12 more rows.
    assert padded_rows_per_epoch(20, 8, 2, drop_last=False) == 12
    assert padded_rows_per_epoch(32, 8, 2, drop_last=False) == 0
    assert padded_rows_per_epoch(20, 8, 2, drop_last=True) == 0
    assert padded_rows_per_epoch(20, 8, 1, drop_last=False) == 0  # one process: a smaller last batch only


def _python_block(text: str, after: str) -> str:
    start = text.index("```python\n", text.index(after)) + len("```python\n")
    return text[start : text.index("```", start)]


def test_card_usage_scores_an_image_against_captions(trained, tmp_path, capsys):
    """The card's snippet runs as written (repo id -> the saved folder, photo.jpg -> an image) and prints one
    cosine score per caption, the benchmark's s(c|i)."""
    import torch
    from transformers import CLIPModel, CLIPProcessor

    trainer, output_dir = trained
    text = (output_dir / "README.md").read_text()
    code = _python_block(text, "## Usage")
    PILImage.fromarray(np.full((32, 32, 3), 120, dtype=np.uint8)).save(tmp_path / "photo.jpg")
    code = code.replace('"clip-hardpos-toy"', repr(str(output_dir))).replace(
        '"photo.jpg"', repr(str(tmp_path / "photo.jpg"))
    )
    exec(compile(code, "card-usage", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 3
    model, processor = CLIPModel.from_pretrained(output_dir).eval(), CLIPProcessor.from_pretrained(output_dir)
    captions = [line.split("  ", 1)[1] for line in printed]
    inputs = processor(
        text=captions, images=PILImage.open(tmp_path / "photo.jpg"), return_tensors="pt", padding=True
    )
    with torch.no_grad():
        out = model(**inputs)
    expected = torch.nn.functional.cosine_similarity(out.image_embeds, out.text_embeds).tolist()
    assert [float(line.split()[0]) for line in printed] == pytest.approx(expected, abs=1e-4)


def test_card_shows_base_and_fine_tuned_rows_with_chance_flags_and_compute(trained):
    from hf_hardpos.training.run_facts import at_chance

    trainer, output_dir = trained
    text = (output_dir / "README.md").read_text()
    table = text.split("### Base model and fine-tuned model")[1].split("###")[0]
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| toy")
    ]
    start = next(
        e for e in trainer.state.log_history if e.get("step") == 0 and "eval_toy_replace_brittleness" in e
    )
    last = next(e for e in reversed(trainer.state.log_history) if "eval_toy_replace_brittleness" in e)
    assert [r[1] for r in rows] == ["base model (step 0)", f"fine-tuned (step {last['step']})"]
    for row, entry in zip(rows, (start, last)):
        values = {
            m: entry[f"eval_toy_replace_{m}"]
            for m in ("original_accuracy", "augmented_accuracy", "brittleness")
        }
        assert row[2:5] == [f"{100 * v:.1f}" for v in values.values()]
        flagged = [
            name
            for name, m in (
                ("orig acc", "original_accuracy"),
                ("aug acc", "augmented_accuracy"),
                ("brittleness", "brittleness"),
            )
            if at_chance(m, values[m])
        ]
        assert row[5] == ("at or past chance: " + ", ".join(flagged) if flagged else "better than chance")
    runtime = next(e["train_runtime"] for e in trainer.state.log_history if "train_runtime" in e)
    assert re.search(
        rf"Trained for {runtime:,.0f} s \(3 steps\) on cpu( \([^)]*cores\))?, 1 process\(es\), fp32\.", text
    )


def test_card_license_comes_from_the_data_else_the_base_models_card(tmp_path):
    from hf_hardpos.training.model_card import base_license

    base = tmp_path / "base"
    base.mkdir()
    (base / "README.md").write_text("---\nlicense: mit\n---\n# base\n")
    assert base_license(str(base)) == "mit"
    assert (
        base_license(str(tmp_path / "nothing")) is None
        and base_license("openai/clip-vit-base-patch32") is None
    )


def test_a_model_name_with_html_and_a_line_break_stays_one_heading(trained):
    """A name is the user's text: in the card's markdown body it is one line, its HTML shown, never run."""
    trainer, _ = trained
    card = generate_model_card(trainer, trainer.model_card_data, model_name="evil\n<script>alert(1)</script>")
    body = card.text  # the markdown after the YAML front matter
    assert "<script>" not in body
    assert "# evil &lt;script&gt;alert(1)&lt;/script&gt;" in body.splitlines()


def test_train_alone_leaves_a_card_in_output_dir(tiny_clip_dir, tmp_path):
    """`trainer.train()` without `save_model` or a checkpoint: the run's card is in output_dir, with its time
    and hardware, the hyperparameters and a few training rows."""
    output_dir = tmp_path / "run"
    trainer = _trainer(tiny_clip_dir, output_dir, max_steps=1, eval_strategy="no")
    trainer.train()
    text = (output_dir / "README.md").read_text()
    assert not list(output_dir.glob("checkpoint-*"))
    _, contents = card_contents(trainer, trainer.model_card_data)
    assert contents["compute"]["runtime"] in text and contents["compute"]["device"] in text
    assert "- `adam_beta2`: `0.999`\n" in text and "- `learning_rate`: `0.0005` (changed)\n" in text
    assert f"| {trainer.train_dataset[0]['caption']} |" in text
