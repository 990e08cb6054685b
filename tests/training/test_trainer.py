"""HardPosTrainer, its collator and arguments, on the tiny CLIP: real steps, real checkpoints."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from hf_hardpos import columns
from hf_hardpos.training import (
    LOSS_STATE_NAME,
    HardPosDataCollator,
    HardPosTrainer,
    NonFiniteLossError,
)
from hf_hardpos.training.data_collator import HardPosBatch
from tests.support.paths import REPO
from tests.support.training import (
    SKIPPED,
    eval_rows,
    finetune_folder,
    finetune_rows,
    load_tiny,
    logged_args,
    make_args,
    swap_eval_folder,
)

TERMS = ("loss_clip", "loss_hn", "loss_hp", "loss_imc", "loss_cmr")


# --- collator ------------------------------------------------------------------------------------


def test_collator_masks_missing_extras_and_never_invents_captions(tiny_clip_dir):
    _, processor = load_tiny(tiny_clip_dir)
    data = finetune_rows(6)
    rows = [data[i] for i in range(6)]
    batch = HardPosDataCollator(processor)(rows)

    assert batch["pixel_values"].shape[0] == 6  # rows without a SWAP positive stay in the batch
    assert batch["positive_mask"].tolist() == [
        [True, r[columns.HARD_POSITIVE_SWAP] is not None] for r in rows
    ]
    assert batch["negative_mask"].tolist() == [
        [True, r[columns.HARD_NEGATIVE_SWAP] is not None] for r in rows
    ]

    # Exactly the captions that exist were tokenised, in order: no placeholder for the missing ones.
    expected = [r["caption"] for r in rows]
    for cols in (columns.FINETUNE_POSITIVE_COLUMNS, columns.FINETUNE_NEGATIVE_COLUMNS):
        expected += [r[c] for r in rows for c in cols if r[c] is not None]
    decoded = processor.tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=True)
    assert [d.strip() for d in decoded] == expected
    assert batch["input_ids"].shape[0] == len(expected)

    # Each present slot points at its own text.
    for b, row in enumerate(rows):
        for j, col in enumerate(columns.FINETUNE_POSITIVE_COLUMNS):
            if row[col] is not None:
                assert decoded[batch["positive_index"][b, j]].strip() == row[col]


def test_collator_draws_one_hard_positive_and_one_hard_negative_per_row_and_epoch(tiny_clip_dir):
    """App. D.1 of the Hard Positive paper: one of each per sample. The draw is uniform over the row's
    non-null columns, a function of (seed, epoch, row index) only: the same in any batch composition."""
    import numpy as np

    from hf_hardpos.training.data_collator import ROW_INDEX, with_row_index

    _, processor = load_tiny(tiny_clip_dir)
    data = with_row_index(finetune_rows(24))
    assert data[ROW_INDEX] == list(range(24))
    collator = HardPosDataCollator(processor, sampling="one_per_row", seed=7)
    rows = [data[i] for i in range(24)]

    def drawn(epoch, order):
        collator.set_epoch(epoch)
        batch = collator([rows[i] for i in order])
        decoded = [
            d.strip() for d in processor.tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=True)
        ]
        assert batch["positive_index"].shape == (len(order), 1) and batch["negative_index"].shape == (
            len(order),
            1,
        )
        assert batch["input_ids"].shape[0] == 3 * len(
            order
        )  # caption + one positive + one negative, each row
        out = {}
        for b, i in enumerate(order):
            assert batch["positive_mask"][b, 0] and batch["negative_mask"][b, 0]
            out[i] = (decoded[batch["positive_index"][b, 0]], decoded[batch["negative_index"][b, 0]])
        return out

    epoch0 = drawn(0, list(range(24)))
    assert drawn(0, list(range(23, -1, -1))) == epoch0  # batch order does not matter
    for i, (positive, negative) in epoch0.items():
        present_p = [rows[i][c] for c in columns.FINETUNE_POSITIVE_COLUMNS if rows[i][c] is not None]
        present_n = [rows[i][c] for c in columns.FINETUNE_NEGATIVE_COLUMNS if rows[i][c] is not None]
        # restated: numpy SeedSequence of (seed, epoch, row, stream), uniform over the non-null columns
        assert positive == present_p[int(np.random.default_rng([7, 0, i, 0]).integers(len(present_p)))]
        assert negative == present_n[int(np.random.default_rng([7, 0, i, 1]).integers(len(present_n)))]
    swaps = lambda draws: sum(
        p.startswith("a " + rows[i]["caption"].split()[5]) for i, (p, _) in draws.items()
    )  # noqa: E731
    epochs = [drawn(e, list(range(24))) for e in range(4)]
    assert len({tuple(sorted(e.items())) for e in epochs}) == 4  # each epoch draws anew
    assert 0 < swaps(epoch0) < 24  # both columns are drawn
    with pytest.raises(KeyError, match="with_row_index"):
        collator([finetune_rows(2)[0]])
    with pytest.raises(ValueError, match="sampling"):
        HardPosDataCollator(processor, sampling="both")


def _pinning_without_a_gpu(monkeypatch) -> list[torch.Tensor]:
    """Make torch take its CUDA pin-memory path on this machine: the DataLoader believes an accelerator
    is there, and `Tensor.pin_memory` returns a copy (what it does on CUDA, minus page-locking).
    Returns the list of tensors "pinned", so a test can see the step really ran."""
    pinned: list[torch.Tensor] = []

    def pin(tensor, *args, **kwargs):
        pinned.append(tensor)
        return tensor.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: None)
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(
        torch.accelerator, "set_device_index", lambda index: None
    )  # the pin thread's first call
    return pinned


def test_a_collated_batch_survives_torchs_pin_memory_step_with_the_same_loss(
    tiny_clip_dir, tmp_path, monkeypatch
):
    """Every CUDA fine-tune pins its batches (`dataloader_pin_memory=True` is the Trainer's default):
    torch's `pin_memory` copies a mapping and calls `.update`, which `ModelOutput` forbids. The pinned
    batch must stay a `HardPosBatch`, move to the device whole and give the same loss."""
    from torch.utils.data._utils.pin_memory import pin_memory

    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model, args=make_args(tmp_path), train_dataset=finetune_rows(8), processor=processor
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    pinned_tensors = _pinning_without_a_gpu(monkeypatch)

    pinned = pin_memory(batch)
    assert type(pinned) is HardPosBatch and list(pinned) == list(batch)
    assert len(pinned_tensors) == len(batch)  # every field went through the pinning step
    for key in batch:
        assert (
            pinned[key] is getattr(pinned, key) and pinned[key] is not batch[key]
        )  # attribute and key agree
        torch.testing.assert_close(pinned[key], batch[key], rtol=0, atol=0)
    on_device = trainer._prepare_inputs(pinned)
    assert type(on_device) is HardPosBatch

    model.eval()  # no dropout in the tiny CLIP either way; eval() makes that explicit
    with torch.no_grad():
        before = trainer.compute_loss(model, batch)
        after = trainer.compute_loss(model, on_device)
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    with pytest.raises(KeyError, match="no field"):
        pinned.update(not_a_field=torch.zeros(1))


def test_training_runs_through_the_dataloaders_pin_memory_thread(tiny_clip_dir, tmp_path, monkeypatch):
    """The step-1 crash of every CUDA fine-tune, reproduced on the CPU: pinned memory (the Trainer's
    default) with a DataLoader worker, so the batch crosses torch's pin-memory thread."""
    pinned_tensors = _pinning_without_a_gpu(monkeypatch)
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(tmp_path, max_steps=2, dataloader_num_workers=1)
    args.dataloader_pin_memory = True  # transformers >= 5.2x turns it off under use_cpu; 5.17 did not
    trainer = HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(16), processor=processor)
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e and "train_runtime" not in e]
    assert len(losses) == 2 and all(np.isfinite(losses))
    assert len(pinned_tensors) >= 2 * len(
        HardPosBatch.__dataclass_fields__
    )  # both steps' batches were pinned


def test_collator_eval_schema_and_pixel_values_match_processor(tiny_clip_dir):
    _, processor = load_tiny(tiny_clip_dir)
    data = eval_rows(3)
    collator = HardPosDataCollator(
        processor, positive_columns=["hard_positive"], negative_columns=["hard_negative"]
    )
    batch = collator([data[i] for i in range(3)])
    assert batch["positive_mask"].shape == (3, 1) and bool(batch["positive_mask"].all())
    reference = processor.image_processor(images=[data[i]["image"] for i in range(3)], return_tensors="pt")
    torch.testing.assert_close(batch["pixel_values"], reference["pixel_values"])  # rescaled exactly once


@pytest.mark.parametrize("cache_size", [0, 5, 10_000])
@pytest.mark.parametrize("side", ["right", "left"])
def test_collator_tokens_are_the_tokenizers_whatever_it_has_cached(tiny_clip_dir, cache_size, side):
    """Three batches over the same rows, as three epochs read them: each batch's ids and mask equal one
    `tokenizer(texts, padding=True, truncation=True)` call, cached or not, texts cut at max_length included."""
    _, processor = load_tiny(tiny_clip_dir)
    processor.tokenizer.padding_side = side
    data = finetune_rows(8)
    rows = [dict(data[i]) for i in range(8)]
    rows[3][columns.CAPTION] = " ".join(["a red cube and a blue sphere"] * 12)  # longer than 16 tokens: cut
    collator = HardPosDataCollator(processor, max_length=16, token_cache_size=cache_size)
    for order in ([0, 1, 2, 3], [3, 2, 1, 0, 4, 5, 6, 7], [5, 3, 5, 0]):
        batch = collator([rows[i] for i in order])
        texts = [
            rows[i][columns.CAPTION] for i in order
        ]  # the layout of `HardPosBatch`: captions, positives, negatives
        for extra_columns in (columns.FINETUNE_POSITIVE_COLUMNS, columns.FINETUNE_NEGATIVE_COLUMNS):
            texts += [rows[i][c] for i in order for c in extra_columns if rows[i][c] is not None]
        reference = processor.tokenizer(
            texts, padding=True, truncation=True, max_length=16, return_tensors="pt"
        )
        assert torch.equal(batch["input_ids"], reference["input_ids"])
        assert torch.equal(batch["attention_mask"], reference["attention_mask"])
    assert batch["input_ids"].shape[1] == 16  # the long caption was cut, the rest padded to it
    text_columns = (columns.CAPTION, *columns.FINETUNE_POSITIVE_COLUMNS, *columns.FINETUNE_NEGATIVE_COLUMNS)
    distinct = {row[c] for row in rows for c in text_columns if row[c] is not None}
    assert len(collator._token_ids) == min(cache_size, len(distinct))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("caption", None, "column 'caption' is null"),
        ("image", None, "column 'image' is null"),
        (columns.HARD_POSITIVE_SWAP, "None", "placeholder 'None'"),
    ],
)
def test_collator_rejects_bad_rows_naming_row_and_column(tiny_clip_dir, column, value, message):
    _, processor = load_tiny(tiny_clip_dir)
    data = finetune_rows(3)
    rows = [data[i] for i in range(3)]
    rows[2] = {**rows[2], column: value}
    with pytest.raises(ValueError, match=rf"batch row 2 \(image_id='img2'\).*{message}"):
        HardPosDataCollator(processor)(rows)


def test_trainer_checks_columns_before_training(tiny_clip_dir, tmp_path):
    model, processor = load_tiny(tiny_clip_dir)
    with pytest.raises(ValueError, match=r"the training set lacks column\(s\) 'hard_negative_swap'"):
        HardPosTrainer(
            model=model,
            args=make_args(tmp_path),
            processor=processor,
            train_dataset=finetune_rows(4).remove_columns(columns.HARD_NEGATIVE_SWAP),
        )
    with pytest.raises(ValueError, match=r"eval set 'bad' lacks column\(s\) \['hard_positive'\]"):
        HardPosTrainer(
            model=model,
            args=make_args(tmp_path),
            processor=processor,
            train_dataset=finetune_rows(4),
            eval_datasets={"bad": eval_rows(4).remove_columns("hard_positive")},
        )


def test_training_arguments_force_remove_unused_columns_false(tmp_path):
    args = make_args(tmp_path, remove_unused_columns=True)
    assert args.remove_unused_columns is False
    assert args.positive_columns == list(columns.FINETUNE_POSITIVE_COLUMNS)
    with pytest.raises(ValueError, match="hard_positive_mode"):
        make_args(tmp_path, hard_positive_mode="bogus")


@pytest.mark.parametrize(
    "cores, local_processes, expected", [(16, None, 16), (64, None, 16), (32, "4", 8), (2, "4", 1)]
)
def test_auto_workers_share_the_cores_among_the_processes_of_a_machine(
    tmp_path, monkeypatch, cores, local_processes, expected
):
    """`dataloader_num_workers: -1` (the recipes' value): the cores this process may use, divided among the
    processes a launcher started on this machine, at most 16 — the same rule as `hardpos eval`'s default."""
    from hf_hardpos.compute import default_num_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    if local_processes is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_processes)
    assert default_num_workers() == expected
    assert make_args(tmp_path, dataloader_num_workers=-1).dataloader_num_workers == expected
    with pytest.raises(ValueError, match="dataloader_num_workers"):
        make_args(tmp_path, dataloader_num_workers=-2)


def test_the_python_api_logs_lines_of_numbers_like_the_command(tiny_clip_dir, tmp_path, capsys):
    """`HardPosTrainer` used directly (not through `hardpos train`) logs one JSON line of numbers per entry,
    not the Trainer's dict of strings or its redrawn bars."""
    import json

    from transformers import PrinterCallback, ProgressCallback

    from hf_hardpos.training.log_lines import LogLinesCallback

    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=2),
        train_dataset=finetune_rows(8),
        processor=processor,
    )
    kinds = [type(c) for c in trainer.callback_handler.callbacks]
    assert LogLinesCallback in kinds and PrinterCallback not in kinds and ProgressCallback not in kinds
    capsys.readouterr()
    trainer.train()
    out = capsys.readouterr()
    logged = [
        json.loads(line[line.index("{") :]) for line in (out.out + out.err).splitlines() if '"loss"' in line
    ]
    assert len(logged) == 2 and all(isinstance(entry["loss"], float) for entry in logged)
    assert "\r" not in out.out + out.err


# --- training ------------------------------------------------------------------------------------


def test_training_decreases_loss_logs_every_term_and_evaluates(tiny_clip_dir, tmp_path):
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(tmp_path, max_steps=6, imc_weight=0.2, cmr_weight=0.4, per_device_train_batch_size=16)
    trainer = HardPosTrainer(
        model=model,
        args=args,
        train_dataset=finetune_rows(16),
        eval_datasets={"toy": eval_rows(8)},
        processor=processor,
    )
    trainer.train()
    logs = [e for e in trainer.state.log_history if "loss" in e and "train_runtime" not in e]
    assert len(logs) == 6
    assert logs[-1]["loss"] < logs[0]["loss"]  # one fixed batch: the model must fit it
    for term in TERMS:
        assert all(np.isfinite(e[term]) for e in logs), term
    for name in ("hard_negative_replace", "hard_negative_swap"):
        assert f"cmr_threshold/{name}" in logs[-1]
    assert all(0 < e["logit_scale"] <= 100 + 1e-4 for e in logs)

    trainer.model.train()
    metrics = trainer.evaluate()
    assert trainer.model.training  # the evaluator's eval() mode is undone
    for key in ("original_accuracy", "augmented_accuracy", "brittleness", "mean_positive_score"):
        assert isinstance(metrics[f"eval_toy_{key}"], float)
    assert metrics["eval_toy_num_examples"] == 8
    assert (
        trainer.state.log_history[-1]["eval_toy_augmented_accuracy"] == metrics["eval_toy_augmented_accuracy"]
    )


def test_logit_scale_is_clamped_after_each_step(tiny_clip_dir, tmp_path):
    model, processor = load_tiny(tiny_clip_dir)
    with torch.no_grad():
        model.logit_scale.fill_(np.log(100.0) + 1.0)  # above CLIP's ceiling
    # learning rate 0: the optimiser moves nothing, so only the clamp can change the scale
    args = make_args(tmp_path, max_steps=1, learning_rate=0.0, hard_positive_weight=0.0)
    trainer = HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(8), processor=processor)
    trainer.train()
    assert float(model.logit_scale) == pytest.approx(np.log(100.0), abs=1e-6)


def test_non_finite_loss_stops_with_the_term_named(tiny_clip_dir, tmp_path, monkeypatch):
    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=3),
        train_dataset=finetune_rows(8),
        processor=processor,
    )
    term = trainer.objective.terms["hn"]
    original = term.forward
    calls = []

    def third_step_breaks(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs) * (float("nan") if len(calls) == 3 else 1.0)

    monkeypatch.setattr(term, "forward", third_step_breaks)
    # The step in the message is the step the Trainer would have logged for this batch.
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss term loss_hn at step 3 \(loss_hn=nan"):
        trainer.train()
    assert [e["step"] for e in trainer.state.log_history if "loss" in e] == [1, 2]


def _final_state(trainer) -> tuple[dict, dict]:
    loss_state = {k: v.clone() for k, v in trainer.objective.state_dict().items()}
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    return loss_state, weights


def test_resume_restores_loss_state_and_continues_identically(tiny_clip_dir, tmp_path):
    def run(output_dir, resume=None, max_steps=4):
        model, processor = load_tiny(tiny_clip_dir)
        args = make_args(output_dir, max_steps=max_steps, cmr_weight=0.4, save_strategy="steps", save_steps=2)
        trainer = HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(24), processor=processor)
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    straight = run(tmp_path / "straight")
    checkpoint = tmp_path / "straight" / "checkpoint-2"
    saved = torch.load(checkpoint / LOSS_STATE_NAME, weights_only=True)
    assert saved and any(v.abs().sum() > 0 for v in saved.values())  # thresholds were learned
    assert (checkpoint / "README.md").is_file() and (checkpoint / "processor_config.json").is_file()

    resumed = run(tmp_path / "straight", resume=str(checkpoint))
    state_a, weights_a = _final_state(straight)
    state_b, weights_b = _final_state(resumed)
    for key in state_a:
        torch.testing.assert_close(state_b[key], state_a[key])
    for key in weights_a:
        torch.testing.assert_close(weights_b[key], weights_a[key])
    logged = [e["loss_cmr"] for e in straight.state.log_history if "loss_cmr" in e]
    relogged = [e["loss_cmr"] for e in resumed.state.log_history if "loss_cmr" in e]
    assert relogged[-1] == pytest.approx(logged[-1], rel=1e-5)

    (checkpoint / LOSS_STATE_NAME).unlink()
    with pytest.raises(FileNotFoundError, match="no loss state"):
        run(tmp_path / "straight", resume=str(checkpoint))


def test_saved_folder_round_trips_with_identical_scores(tiny_clip_dir, tmp_path):
    from transformers import CLIPModel, CLIPProcessor

    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=2),
        train_dataset=finetune_rows(8),
        processor=processor,
    )
    trainer.train()
    out = tmp_path / "final"
    trainer.save_model(str(out))
    loaded, loaded_processor = CLIPModel.from_pretrained(out), CLIPProcessor.from_pretrained(out)

    data = eval_rows(4)
    texts = list(data["caption"]) + list(data["hard_negative"])

    def scores(m, p):
        inputs = p(text=texts, images=list(data["image"]), return_tensors="pt", padding=True)
        with torch.no_grad():
            return m.eval()(**inputs).logits_per_image

    torch.testing.assert_close(
        scores(loaded, loaded_processor), scores(trainer.model, processor), rtol=0, atol=0
    )


def test_finetune_arguments_cli_config_file_and_defaults(tmp_path):
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.training import finetune_args

    with pytest.raises(UserInputError, match="--dataset is required"):
        finetune_args.parse_arguments(["--output_dir", str(tmp_path), "--learning_rate", "1e-4"])
    model = ["--model_name_or_path", "openai/clip-vit-base-patch32"]
    _, data_args, args, _ = finetune_args.parse_arguments(
        [*model, "--dataset", "hardpos/coco", "--output_dir", str(tmp_path)]
    )
    assert data_args.dataset == "hardpos/coco" and args.num_train_epochs == 5  # the paper's recipe
    _, data_args, args, _ = finetune_args.parse_arguments(
        [
            *model,
            "--dataset",
            "hardpos/coco",
            "--output_dir",
            str(tmp_path),
            "--max_steps",
            "7",
            "--use_lora",
            "--lora_r",
            "4",
        ]
    )
    assert args.max_steps == 7 and args.use_lora and args.lora_r == 4 and args.remove_unused_columns is False
    assert args.inert_options() == {}  # the mode's 5 epochs are not set when --max_steps sets the length

    config = tmp_path / "recipe.yaml"
    config.write_text(
        "model_name_or_path: openai/clip-vit-base-patch32\ndataset: hardpos/coco\n"
        "hard_negative_weight: 0.25\n"
        "eval_datasets: [hardpos/replace:attributes, rel=hardpos/replace:relations:validation]\n"
    )  # output settings come from the command line only (a file naming output_dir is refused)
    model_args, data_args, args, recipe = finetune_args.parse_arguments(
        [str(config), "--output_dir", str(tmp_path)]
    )
    assert recipe is None  # a plain flags file: no `recipe:` header
    assert model_args.model_name_or_path == "openai/clip-vit-base-patch32"
    assert args.hard_negative_weight == 0.25 and args.num_train_epochs == 5
    specs = [finetune_args.parse_eval_spec(s, "test") for s in data_args.eval_datasets]
    assert specs == [
        ("attributes", "hardpos/replace", "attributes", "test"),
        ("rel", "hardpos/replace", "relations", "validation"),
    ]


@pytest.mark.slow
def test_finetune_example_runs_on_two_cpu_processes(tiny_clip_dir, tmp_path):
    """`torchrun` with 2 processes: the example trains, evaluates and saves."""
    output_dir = tmp_path / "ddp"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        str(REPO / "examples" / "finetune.py"),
        "--use_cpu",
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "8",
        "--model_name_or_path",
        str(tiny_clip_dir),
        "--dataset",
        str(finetune_folder(tmp_path / "data", 64)),
        "--eval_datasets",
        f"swap={swap_eval_folder(tmp_path / 'swap')}",
        "--max_eval_samples",
        "16",
        "--logging_steps",
        "1",
        "--eval_strategy",
        "no",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
    ]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HOME": str(tmp_path / "hf_home"),
    }  # the start model's cache
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]

    import json

    state = json.loads((output_dir / "trainer_state.json").read_text())
    steps = [e for e in state["log_history"] if "loss_hn" in e]
    # 64 rows, 8 per process and step: 2 steps are half an epoch only if two processes shared the data.
    assert steps[-1]["epoch"] == pytest.approx(0.5)
    assert any("eval_swap_augmented_accuracy" in e for e in state["log_history"])
    assert (output_dir / "README.md").is_file() and (output_dir / "model.safetensors").is_file()
    # The checkpoint was staged and renamed only after both processes wrote their RNG state.
    checkpoint = output_dir / "checkpoint-2"
    assert {"rng_state_0.pth", "rng_state_1.pth", "trainer_state.json", LOSS_STATE_NAME} <= {
        p.name for p in checkpoint.iterdir()}  # fmt: skip
    assert not list(output_dir.glob("_incomplete-*"))


# --- supported models, weight decay, precision -----------------------------------------------------


def test_trainer_refuses_models_other_than_clip(tiny_clip_dir, tmp_path):
    from hf_hardpos.errors import UserInputError

    model, processor = load_tiny(tiny_clip_dir)
    for wrong in (torch.nn.Linear(2, 2), model.text_model):
        with pytest.raises(
            UserInputError, match=rf"trains a transformers CLIPModel .*got {type(wrong).__name__}"
        ):
            HardPosTrainer(
                model=wrong, args=make_args(tmp_path), processor=processor, train_dataset=finetune_rows(4)
            )
    with pytest.raises(UserInputError, match="needs a model"):
        HardPosTrainer(
            model=None, args=make_args(tmp_path), processor=processor, train_dataset=finetune_rows(4)
        )
    plain_lists = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=1),
        processor=processor,
        train_dataset=finetune_rows(4),
        data_collator=lambda rows: rows,
    )
    with pytest.raises(TypeError, match=r"returned list, not a HardPosBatch"):
        plain_lists.train()


@pytest.mark.parametrize("use_lora", [False, True])
def test_weight_decay_on_every_parameter_with_two_or_more_dims_but_the_logit_scale(
    tiny_clip_dir, tmp_path, use_lora
):
    """open_clip <= v3.3 / TSVLC / CE-CLIP's rule: exclude `p.ndim < 2 or "bn"/"ln"/"bias"/"logit_scale" in
    name` (TSVLC src/training/main.py @90b18e7); CLIP's bn/ln/bias tensors are all 1-D, so it is ndim >= 2
    minus the logit scale, position embeddings included, LoRA's A/B matrices included."""
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(tmp_path, weight_decay=0.1, use_lora=use_lora, lora_r=2, lora_alpha=2,
                     lora_target_modules=["q_proj", "v_proj"])  # fmt: skip
    trainer = HardPosTrainer(model=model, args=args, processor=processor, train_dataset=finetune_rows(4))
    shapes = dict(trainer.model.named_parameters())
    expected = {n for n, p in shapes.items() if p.ndim >= 2 and not n.endswith("logit_scale")}
    decayed = trainer.get_decay_parameter_names(trainer.model)
    assert len(decayed) == len(set(decayed)) and set(decayed) == expected
    for name in (
        "vision_model.embeddings.position_embedding.weight",
        "text_model.embeddings.position_embedding.weight",
    ):
        assert any(n.endswith(name) for n in decayed), name
    assert not [n for n in decayed if "class_embedding" in n or "layer_norm" in n or n.endswith("bias")]
    assert any("lora_A" in n for n in decayed) == use_lora
    # The optimizer the Trainer builds follows it: the logit scale sits in the group without decay.
    optimizer = trainer.create_optimizer()
    group_of = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    trainable = {n: p for n, p in shapes.items() if p.requires_grad}
    for name, parameter in trainable.items():
        assert group_of[id(parameter)] == (0.1 if name in expected else 0.0), name
    if not use_lora:
        assert group_of[id(model.logit_scale)] == 0.0
        assert group_of[id(model.text_model.embeddings.position_embedding.weight)] == 0.1
    assert optimizer.defaults["betas"] == (
        0.9,
        0.999,
    )  # TrainingArguments defaults unless a recipe says otherwise


def test_loss_is_computed_in_fp32_from_renormalised_embeddings_under_bf16(
    tiny_clip_dir, tmp_path, monkeypatch
):
    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=1, bf16=True),
        train_dataset=finetune_rows(8),
        processor=processor,
    )
    projection_dtypes, seen = [], []
    model.visual_projection.register_forward_hook(lambda m, i, out: projection_dtypes.append(out.dtype))
    original = trainer.objective.forward

    def record(**kwargs):
        seen.append(kwargs)
        out = original(**kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(trainer.objective, "forward", record)
    trainer.train()
    assert projection_dtypes and projection_dtypes[0] == torch.bfloat16  # the towers ran under bf16 autocast
    inputs, terms = seen[0], seen[1]
    for key in ("image_embeds", "text_embeds", "positive_embeds", "negative_embeds", "logit_scale"):
        assert inputs[key].dtype == torch.float32, key
    for key in ("image_embeds", "text_embeds"):
        norms = inputs[key].norm(dim=-1)
        torch.testing.assert_close(
            norms, torch.ones_like(norms), rtol=0, atol=1e-6
        )  # bf16 norms are off by ~1e-3
    assert all(v.dtype == torch.float32 for k, v in terms.items() if k.startswith("loss"))


def test_collator_unflatten_reads_its_own_layout(tiny_clip_dir):
    _, processor = load_tiny(tiny_clip_dir)
    data = finetune_rows(6)
    collator = HardPosDataCollator(processor)
    batch = collator([data[i] for i in range(6)])
    texts = batch["input_ids"].shape[0]
    identity = torch.eye(texts)  # text t embeds as the one-hot e_t: the output names the text it came from
    assert isinstance(batch, HardPosBatch) and list(batch) == [
        f.name for f in dataclasses.fields(HardPosBatch)
    ]
    out = batch.unflatten(identity)
    torch.testing.assert_close(out["text_embeds"], identity[:6])
    decoded = [
        d.strip() for d in processor.tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=True)
    ]
    layout = (
        ("positive", columns.FINETUNE_POSITIVE_COLUMNS),
        ("negative", columns.FINETUNE_NEGATIVE_COLUMNS),
    )
    for kind, cols in layout:
        embeds, mask = out[f"{kind}_embeds"], out[f"{kind}_mask"]
        assert embeds.shape == (6, len(cols), texts)
        for b in range(6):
            for j, col in enumerate(cols):
                row = data[b]
                if row[col] is None:
                    assert not mask[b, j] and not embeds[b, j].any()
                else:
                    assert mask[b, j] and decoded[int(embeds[b, j].argmax())] == row[col]
    empty = HardPosDataCollator(processor, positive_columns=[], negative_columns=[])
    out = empty([data[i] for i in range(6)]).unflatten(identity[:6])
    assert out["positive_embeds"] is None and out["negative_mask"] is None


# --- checkpoints, resume, inert options, no eval sets ------------------------------------------------


def test_interrupted_save_leaves_nothing_resume_picks_and_resume_falls_back(
    tiny_clip_dir, tmp_path, monkeypatch, caplog
):
    from transformers.trainer_utils import get_last_checkpoint

    from hf_hardpos.errors import UserInputError

    def trainer_for(max_steps):
        model, processor = load_tiny(tiny_clip_dir)
        args = make_args(tmp_path, max_steps=max_steps, cmr_weight=0.4, save_strategy="steps", save_steps=2)
        return HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(24), processor=processor)

    first = trainer_for(4)
    saves = []
    original = first.objective.state_dict

    def dies_during_second_save(*args, **kwargs):  # the model is written, the loss state is not yet
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt("killed during the save of step 4")
        return original(*args, **kwargs)

    monkeypatch.setattr(first.objective, "state_dict", dies_during_second_save)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    assert sorted(p.name for p in tmp_path.iterdir() if "checkpoint" in p.name) == [
        "_incomplete-checkpoint-4", "checkpoint-2"]  # fmt: skip
    assert (
        tmp_path / "_incomplete-checkpoint-4" / "checkpoint-4" / "config.json"
    ).is_file()  # partly written
    assert get_last_checkpoint(str(tmp_path)).endswith("checkpoint-2")  # transformers' own lookup is safe too

    with caplog.at_level("WARNING", logger="hf_hardpos.training.checkpointing"):
        resumed = trainer_for(4)
        resumed.train(resume_from_checkpoint=True)
    ignored = "Ignoring %s: left by a save that was interrupted (safe to delete)."
    assert logged_args(caplog, ignored) == [("_incomplete-checkpoint-4",)]
    assert resumed.state.global_step == 4 and (tmp_path / "checkpoint-4" / LOSS_STATE_NAME).is_file()
    assert not (tmp_path / "_incomplete-checkpoint-4").exists()  # the next save of that step replaced it

    # A checkpoint folder left half-written by an older version (only config.json): skipped, and said so.
    broken = tmp_path / "checkpoint-5"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    caplog.clear()
    with caplog.at_level("WARNING", logger="hf_hardpos.training.checkpointing"):
        again = trainer_for(6)
        again.train(resume_from_checkpoint="last")
    [(resumed_from, skipped)] = logged_args(caplog, SKIPPED)
    assert resumed_from == "checkpoint-4"
    assert skipped.startswith("checkpoint-5 (incomplete: no trainer_state.json, model weights")
    assert again.state.global_step == 6
    with pytest.raises(
        UserInputError,
        match=r"checkpoint-5 is unusable \(incomplete: no .*The last complete one there is checkpoint-6",
    ):  # noqa: E501
        trainer_for(6).train(resume_from_checkpoint=str(broken))


def test_options_without_effect_are_reported(tiny_clip_dir, tmp_path, caplog):
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(tmp_path, save_strategy="epoch", save_steps=7, lora_r=8, cmr_upper_bound=5.0)
    inert = args.inert_options()
    assert sorted(inert) == ["cmr_upper_bound", "lora_r", "save_steps"]
    assert (
        inert["save_steps"] == "save_steps=7 has no effect under save_strategy='epoch'"
    )  # the one golden message
    with caplog.at_level("WARNING", logger="hf_hardpos.training.trainer"):
        HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(4), processor=processor)
    assert {f"{message}." for message in inert.values()} <= {record.getMessage() for record in caplog.records}
    assert make_args(tmp_path, save_strategy="steps", save_steps=7).inert_options() == {}

    from hf_hardpos.training.finetune_args import parse_arguments

    *_, args, _ = parse_arguments(["--dataset", "d", "--output_dir", str(tmp_path), "--save_steps", "3"])
    assert args.save_strategy == "steps" and args.save_steps == 3  # --save_steps alone switches the strategy
    *_, args, _ = parse_arguments(
        ["--dataset", "d", "--output_dir", str(tmp_path), "--save_steps", "3", "--save_strategy", "epoch"]
    )
    assert args.save_strategy == "epoch" and list(args.inert_options()) == ["save_steps"]


def test_dataset_without_eval_sets_trains_without_evaluation(tiny_clip_dir, tmp_path):
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.training.finetune_args import parse_arguments

    *_, args, _ = parse_arguments(["--dataset", "d", "--output_dir", str(tmp_path)])
    assert args.eval_strategy == "no" and args.save_strategy == "epoch" and not args.eval_on_start
    *_, args, _ = parse_arguments(["--dataset", "d", "--output_dir", str(tmp_path), "--eval_datasets", "e"])
    assert args.eval_strategy == "epoch"

    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=1),
        train_dataset=finetune_rows(8),
        processor=processor,
    )
    trainer.train()  # no eval sets, eval_strategy "no": trains
    assert trainer.state.global_step == 1
    with pytest.raises(UserInputError, match=r"eval_strategy='epoch' but there are no eval sets"):
        HardPosTrainer(
            model=model,
            args=make_args(tmp_path, eval_strategy="epoch"),
            train_dataset=finetune_rows(8),
            processor=processor,
        )


# --- kill -9 and resume: CE-CLIP's thresholds and SVLC's per-row draws ---------------------------------

KILL_SETTINGS = {
    # CE-CLIP's terms: the thresholds are state across steps and reset at each epoch start
    "ce-clip": dict(hard_negative_weight=0.0, hard_positive_weight=0.0, imc_weight=0.2, cmr_weight=0.4,
                    contrastive_hard_negatives=True),
    # SVLC's terms on one drawn hard positive and negative per row and epoch
    "svlc": dict(hard_example_sampling="one_per_row"),
}  # fmt: skip


def _killable_run(tiny_clip_dir, output_dir, recipe, resume=None, kill_after=None) -> dict[int, dict]:
    """7 steps of 8 rows out of 24 (3 steps per epoch, last partial batch dropped, as the recipes), a checkpoint
    every `save_steps`; with `kill_after`, SIGKILL right after that step's checkpoint was written."""
    from transformers import TrainerCallback

    class KillNine(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == kill_after:
                os.kill(os.getpid(), 9)

    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(output_dir, max_steps=7, save_strategy="steps", save_steps=kill_after or 3,
                     dataloader_drop_last=True, max_grad_norm=0.0, **KILL_SETTINGS[recipe])  # fmt: skip
    trainer = HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(26), processor=processor,
                             callbacks=[KillNine()])  # fmt: skip
    trainer.train(resume_from_checkpoint=resume)
    return {e["step"]: e for e in trainer.state.log_history if "loss" in e and "train_runtime" not in e}


@pytest.mark.slow
@pytest.mark.parametrize(("recipe", "kill_after"), [("ce-clip", 4), ("ce-clip", 3), ("svlc", 4)])
def test_kill_nine_and_resume_reproduces_the_uninterrupted_losses(
    tiny_clip_dir, tmp_path, recipe, kill_after
):
    """A process killed with SIGKILL right after checkpoint `kill_after` (inside epoch 1, or at the end of
    epoch 0), then resumed, logs the same loss terms and CMR thresholds at every later step as a run that
    was never interrupted: the thresholds come back from the checkpoint with the epoch they belong to (kept
    inside epoch 1, reset when epoch 1 starts fresh), the draws are seeded by (seed, epoch, row)."""
    straight = _killable_run(tiny_clip_dir, tmp_path / "straight", recipe)
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); from pathlib import Path; "
        f"import {__name__} as t; t._killable_run(Path({str(tiny_clip_dir)!r}), Path({str(tmp_path / 'killed')!r}), "
        f"{recipe!r}, kill_after={kill_after})"
    )
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (tmp_path / "killed" / f"checkpoint-{kill_after}").is_dir()
    resumed = _killable_run(tiny_clip_dir, tmp_path / "killed", recipe, resume="last")
    assert sorted(resumed) == list(range(1, 8))  # the earlier steps come back from the checkpoint's state
    for step in range(kill_after + 1, 8):
        keys = [k for k in straight[step] if k.startswith(("loss", "cmr_threshold/"))]
        assert keys and {k: resumed[step][k] for k in keys} == {k: straight[step][k] for k in keys}, step
    if recipe == "ce-clip":
        used = {
            step: [v for k, v in straight[step].items() if k.startswith("cmr_threshold/")]
            for step in straight
        }
        assert all(v == 0 for v in used[4]) and all(v == 0 for v in used[7])  # epochs 1 and 2 start from 0
        assert any(v > 0 for step in (5, 6) for v in used[step])  # inside an epoch, the previous step's


def test_cmr_thresholds_move_once_per_optimiser_step_from_all_its_micro_batches(tiny_clip_dir, tmp_path):
    """Under gradient accumulation CE-CLIP's threshold update (Enhance-FineGrained @ef87eb7 `get_cmr_loss`,
    'mean') is taken after the optimiser step over every row of the step: clamp(mean S(I,T) - mean over rows
    with a type-k negative of S(I,T_k), 0, u)."""
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(tmp_path, max_steps=3, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                     hard_negative_weight=0.0, hard_positive_weight=0.0, cmr_weight=0.4, learning_rate=1e-2)  # fmt: skip
    trainer = HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(24), processor=processor)
    seen, original = [], trainer.objective.forward

    def record(**kwargs):
        out = original(**kwargs)
        seen.append(({k: v.detach().clone() for k, v in kwargs.items() if torch.is_tensor(v)},
                     trainer.objective.terms["cmr"].thresholds.clone(), out))  # fmt: skip
        return out

    trainer.objective.forward = record
    trainer.train()
    assert len(seen) == 6
    moved = []
    for step in range(3):
        (first, _, out_a), (second, _, out_b) = seen[2 * step], seen[2 * step + 1]
        used_a = [v for k, v in out_a.items() if k.startswith("cmr_threshold/")]
        used_b = [v for k, v in out_b.items() if k.startswith("cmr_threshold/")]
        assert used_a == used_b  # both micro-batches of a step use the same thresholds
        both = {k: torch.cat([first[k], second[k]]) for k in ("image_embeds", "text_embeds", "negative_embeds",
                                                             "negative_mask")}  # fmt: skip
        s = first["logit_scale"]
        original_scores = s * (both["image_embeds"] * both["text_embeds"]).sum(-1)
        negative_scores = s * torch.einsum("bd,bkd->bk", both["image_embeds"], both["negative_embeds"])
        mask = both["negative_mask"]
        expected = [
            (original_scores.mean() - negative_scores[mask[:, k], k].mean()).clamp(0, 10.0)
            for k in range(mask.shape[1])
        ]
        if step < 2:  # the next step uses what this step's rows gave
            next_used = [v for k, v in seen[2 * step + 2][2].items() if k.startswith("cmr_threshold/")]
            assert next_used == pytest.approx([float(e) for e in expected], rel=1e-5, abs=1e-6)
            moved.extend(next_used)
    assert any(value > 0 for value in moved)


def test_python_api_pins_memory_only_with_an_accelerator(tiny_clip_dir, tmp_path, recwarn):
    """`HardPosTrainingArguments` made in Python, nothing said about pinning: no torch warning about pinned
    memory on a machine without an accelerator (the Trainer's default pins everywhere)."""
    from hf_hardpos.training import HardPosTrainingArguments

    model, processor = load_tiny(tiny_clip_dir)
    args = HardPosTrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4,
                                    report_to="none", disable_tqdm=True, save_strategy="no")  # fmt: skip
    HardPosTrainer(model=model, args=args, train_dataset=finetune_rows(4), processor=processor).train()
    assert not [w for w in recwarn if "pin_memory" in str(w.message)]
    assert args.dataloader_pin_memory == torch.cuda.is_available()
    assert not HardPosTrainingArguments(output_dir=str(tmp_path), use_cpu=True).dataloader_pin_memory
