"""Training robustness: best checkpoint across resumes, damaged checkpoints, Ctrl-C, exact resume with
random crops, up-front validation of the training data (tiny CLIP, real steps, real checkpoints)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from hf_hardpos.evaluation.section import Section
from hf_hardpos.training import HardPosTrainer
from tests.support.training import (
    SKIPPED,
    eval_rows,
    finetune_rows,
    load_tiny,
    logged_args,
    make_args,
)

# --- the best checkpoint survives a resume (load_best_model_at_end) ----------------------------------


def _best_run(tiny_clip_dir, output_dir, max_steps, resume=None):
    """Evaluate and save every 2 steps, keep 1 checkpoint besides the best. The metric is a constant
    (the eval set's row count), so the first evaluated checkpoint, step 2, stays the best for good."""
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(
        output_dir,
        max_steps=max_steps,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        save_total_limit=2,
        load_best_model_at_end=True,
        metric_for_best_model="eval_toy_num_examples",
        greater_is_better=True,
    )
    trainer = HardPosTrainer(
        model=model,
        args=args,
        train_dataset=finetune_rows(48),
        processor=processor,
        eval_datasets={"toy": eval_rows(4)},
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _assert_best_survives_resume(tiny_clip_dir, output_dir: Path):
    best = output_dir / "checkpoint-2"
    best_weights = load_file(best / "model.safetensors")
    resumed = _best_run(tiny_clip_dir, output_dir, max_steps=6, resume=True)
    assert resumed.state.global_step == 6
    assert sorted(p.name for p in output_dir.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-6"]
    assert resumed.state.best_model_checkpoint == str(best)
    final = resumed.model.state_dict()
    for key, value in best_weights.items():  # load_best_model_at_end loaded step 2's weights
        torch.testing.assert_close(final[key], value, rtol=0, atol=0)
    assert json.loads((output_dir / "checkpoint-6" / "trainer_state.json").read_text())[
        "best_model_checkpoint"
    ] == str(best)


def test_best_checkpoint_is_recorded_by_its_final_path_and_survives_a_resume(tiny_clip_dir, tmp_path):
    _best_run(tiny_clip_dir, tmp_path, max_steps=2)
    state = json.loads((tmp_path / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["best_model_checkpoint"] == str(tmp_path / "checkpoint-2")
    assert state["best_global_step"] == 2
    _assert_best_survives_resume(tiny_clip_dir, tmp_path)


def test_resume_repairs_a_best_checkpoint_recorded_under_its_staging_path(tiny_clip_dir, tmp_path):
    """Checkpoints written before the fix named the best one `_incomplete-checkpoint-N/checkpoint-N`."""
    _best_run(tiny_clip_dir, tmp_path, max_steps=2)
    path = tmp_path / "checkpoint-2" / "trainer_state.json"
    state = json.loads(path.read_text())
    state["best_model_checkpoint"] = str(tmp_path / "_incomplete-checkpoint-2" / "checkpoint-2")
    path.write_text(json.dumps(state))
    _assert_best_survives_resume(tiny_clip_dir, tmp_path)
    assert json.loads(path.read_text())["best_model_checkpoint"] == str(tmp_path / "checkpoint-2")


# --- a damaged last checkpoint: detected, the previous one used, said in the log ---------------------


class StepsRun(TrainerCallback):
    """Records the optimiser steps this run itself trained."""

    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def _steps_run(tiny_clip_dir, output_dir, max_steps, resume=None, **overrides):
    model, processor = load_tiny(tiny_clip_dir)
    args = make_args(
        output_dir, **{"max_steps": max_steps, "save_strategy": "steps", "save_steps": 2, **overrides}
    )
    trainer = HardPosTrainer(
        model=model, args=args, train_dataset=finetune_rows(48), processor=processor, callbacks=[StepsRun()]
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _trained_steps(trainer) -> list[int]:
    return next(c for c in trainer.callback_handler.callbacks if isinstance(c, StepsRun)).steps


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt", "trainer_state.json"])
def test_truncated_last_checkpoint_falls_back_to_the_previous_one(tiny_clip_dir, tmp_path, caplog, damaged):
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.training.checkpointing import corrupt_parts

    _steps_run(tiny_clip_dir, tmp_path, max_steps=4)
    assert corrupt_parts(tmp_path / "checkpoint-4") == [] and corrupt_parts(tmp_path / "checkpoint-2") == []
    _truncate(tmp_path / "checkpoint-4" / damaged)
    problems = corrupt_parts(tmp_path / "checkpoint-4")
    assert [p.split()[0] for p in problems] == [damaged]

    with caplog.at_level("WARNING", logger="hf_hardpos.training.checkpointing"):
        resumed = _steps_run(tiny_clip_dir, tmp_path, max_steps=6, resume="last")
    [(resumed_from, skipped)] = logged_args(caplog, SKIPPED)
    assert resumed_from == "checkpoint-2" and skipped.startswith(f"checkpoint-4 (corrupt: {damaged}")
    assert _trained_steps(resumed) == [3, 4, 5, 6]  # this run started from step 2

    _truncate(tmp_path / "checkpoint-6" / damaged)
    with pytest.raises(UserInputError, match=rf"checkpoint-6 is unusable \(corrupt: {damaged}"):
        _steps_run(tiny_clip_dir, tmp_path, max_steps=8, resume=str(tmp_path / "checkpoint-6"))


def test_safetensors_damage_is_measured_against_its_header(tmp_path):
    from safetensors.torch import save_file

    from hf_hardpos.training.checkpointing import corrupt_parts

    save_file({"w": torch.arange(10.0)}, str(tmp_path / "model.safetensors"))
    size = (tmp_path / "model.safetensors").stat().st_size
    assert corrupt_parts(tmp_path) == []
    _truncate(tmp_path / "model.safetensors", keep=(size - 4) / size)
    assert corrupt_parts(tmp_path) == [f"model.safetensors is truncated ({size - 4} of {size} bytes)"]
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert corrupt_parts(tmp_path) == ["model.safetensors is empty"]


# --- the card describes the model it ships: the loaded best checkpoint's evaluation ------------------


@pytest.mark.parametrize("sections_saved", [True, False])
def test_card_reports_the_loaded_best_checkpoints_evaluation(
    tiny_clip_dir, tmp_path, monkeypatch, sections_saved
):
    from huggingface_hub import ModelCard

    if not sections_saved:  # a best checkpoint without eval sections: the loaded model is evaluated again
        from hf_hardpos.training import atomic_checkpoints
        from hf_hardpos.training.checkpointing import EVAL_SECTIONS_NAME, save_extras

        def without_sections(folder, *args, **kwargs):  # as an older version wrote checkpoints
            save_extras(folder, *args, **kwargs)
            (Path(folder) / EVAL_SECTIONS_NAME).unlink()

        monkeypatch.setattr(atomic_checkpoints, "save_extras", without_sections)
    trainer = _best_run(tiny_clip_dir, tmp_path / "run", max_steps=6)
    assert trainer.best_model_loaded["step"] == 2 and trainer.best_model_loaded["last_step"] == 6
    evals = {}  # the evaluations during training (a re-evaluation after loading the best one comes later)
    for entry in trainer.state.log_history:
        if "eval_toy_augmented_accuracy" in entry:
            evals.setdefault(entry["step"], entry)
    scores = [f"eval_toy_mean_{k}_score" for k in ("original", "negative", "positive")]
    assert [evals[2][k] for k in scores] != [evals[6][k] for k in scores]  # the two evaluations differ

    # What the card is generated from is step 2's evaluation, and so is what the card says.
    section = Section.from_dict(trainer.eval_sections["toy"]).flat_metrics("toy", "eval")
    assert {k: section[k] for k in scores} == pytest.approx({k: evals[2][k] for k in scores}, rel=1e-6)
    assert trainer.eval_sections["toy"]["step"] == 2
    trainer.save_model(str(tmp_path / "final"))
    card = ModelCard.load(tmp_path / "final" / "README.md")
    rates = ("original_accuracy", "augmented_accuracy", "brittleness")
    reported = {r.metric_type: r.metric_value for r in card.data.eval_results if r.metric_type in rates}
    assert reported == pytest.approx({m: evals[2][f"eval_toy_{m}"] for m in rates})


# --- random crops: seeded per (seed, epoch, row), so a resume trains on the same crops ------------------


class KillAfterSave(TrainerCallback):
    """Stands in for a kill right after the checkpoint of `step` was written."""

    def __init__(self, step: int):
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt(f"killed after the save of step {self.step}")


def _crop_run(tiny_clip_dir, output_dir, resume=None, callbacks=(), **overrides):
    model, processor = load_tiny(tiny_clip_dir)
    settings = dict(max_steps=7, save_strategy="steps", save_steps=4, train_crop_scale=[0.3, 1.0])
    args = make_args(output_dir, **{**settings, **overrides})
    trainer = HardPosTrainer(
        model=model,
        args=args,
        train_dataset=finetune_rows(24),
        processor=processor,
        callbacks=list(callbacks),
    )
    trainer.train(resume_from_checkpoint=resume)
    return {
        e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e and "train_runtime" not in e
    }


def test_kill_and_resume_with_random_crops_trains_the_same_losses(tiny_clip_dir, tmp_path):
    """24 rows, 8 per step: 3 steps per epoch, so the resume at step 4 starts inside epoch 1, where the
    Trainer skips a batch and restores the global RNG only after it; steps 5-7 cross into epoch 2."""
    straight = _crop_run(tiny_clip_dir, tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        _crop_run(tiny_clip_dir, tmp_path / "killed", callbacks=[KillAfterSave(4)])
    resumed = _crop_run(tiny_clip_dir, tmp_path / "killed", resume="last")
    assert sorted(resumed) == list(range(1, 8))
    for step in (5, 6, 7):
        assert resumed[step] == straight[step], step
    # Crops really vary: the same data without crops trains to other losses.
    plain = _crop_run(tiny_clip_dir, tmp_path / "plain", train_crop_scale=None)
    assert plain[1] != straight[1]


def test_crops_depend_on_seed_epoch_and_row_only(tiny_clip_dir):
    from hf_hardpos.training import HardPosDataCollator, RandomResizedCrop
    from hf_hardpos.training.data_collator import ROW_INDEX

    _, processor = load_tiny(tiny_clip_dir)
    rows = [{**finetune_rows(4)[i], ROW_INDEX: 10 + i} for i in range(4)]
    collator = HardPosDataCollator(
        processor, image_transform=RandomResizedCrop((32, 32), scale=(0.3, 1.0)), seed=3
    )

    def pixels(epoch, batch, global_seed):
        torch.manual_seed(global_seed)  # the global RNG (dataloader workers reseed it) plays no part
        collator.set_epoch(epoch)
        return collator(batch)["pixel_values"]

    first = pixels(0, rows, global_seed=0)
    torch.testing.assert_close(pixels(0, rows, global_seed=99), first, rtol=0, atol=0)
    # A row's crop does not depend on its batch or its position in it.
    torch.testing.assert_close(pixels(0, rows[::-1], global_seed=5), first.flip(0), rtol=0, atol=0)
    next_epoch = pixels(1, rows, global_seed=0)
    assert all(not torch.equal(next_epoch[i], first[i]) for i in range(4))


# --- Ctrl-C: the current step is saved, then a one-line message and exit status 130 --------------------


class CtrlCDuring(TrainerCallback):
    """Sends this process a real SIGINT while step `step` runs."""

    def __init__(self, step: int):
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_saves_the_current_step_and_resume_continues_from_it(tiny_clip_dir, tmp_path):
    from hf_hardpos.training import TrainingInterrupted
    from hf_hardpos.training.checkpointing import corrupt_parts, missing_parts

    model, processor = load_tiny(tiny_clip_dir)
    trainer = HardPosTrainer(
        model=model,
        args=make_args(tmp_path, max_steps=5),
        train_dataset=finetune_rows(48),
        processor=processor,
        callbacks=[CtrlCDuring(2)],
    )  # save_strategy "no"
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN under nohup / a background job
    with pytest.raises(TrainingInterrupted) as stopped:
        trainer.train()
    assert (stopped.value.step, stopped.value.exit_code) == (2, 130)
    assert stopped.value.checkpoint == str(tmp_path / "checkpoint-2")
    assert missing_parts(tmp_path / "checkpoint-2") == [] and corrupt_parts(tmp_path / "checkpoint-2") == []
    assert signal.getsignal(signal.SIGINT) is before  # the handler installed before training is back

    resumed = _steps_run(tiny_clip_dir, tmp_path, max_steps=5, resume="last", save_strategy="no")
    assert _trained_steps(resumed) == [3, 4, 5]


def test_example_exit_codes_and_one_line_messages(monkeypatch, capsys):
    from hf_hardpos.commands import train
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.training import TrainingInterrupted

    outcomes = {
        TrainingInterrupted(7, "out/checkpoint-7"): 130,
        KeyboardInterrupt(): 130,
        UserInputError("--learning_rate must be >= 0"): 2,
    }
    for raised, code in outcomes.items():

        def main(argv=None, prog=None, raised=raised):
            raise raised

        monkeypatch.setattr(train, "main", main)
        assert train.finetune([]) == code
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


# --- the training set is validated before step 1 ---------------------------------------------------------


def _validate(data, **overrides):
    from hf_hardpos.training.validation import validate_training_data

    return validate_training_data(data, make_args("unused", **overrides))


def _with(data, column, values):
    return data.remove_columns(column).add_column(column, values, feature=data.features[column])


def _with_image_cells(data, edit):
    """`data` with its stored image cells ({bytes, path} or None) changed by `edit(cells)`."""
    from datasets import Image as ImageFeature

    raw = data.cast_column("image", ImageFeature(decode=False))
    cells = edit(list(raw["image"]))
    return (
        raw.remove_columns("image")
        .add_column("image", cells, feature=ImageFeature(decode=False))
        .cast_column("image", ImageFeature())
    )


def test_nulls_placeholders_and_missing_columns_are_named_by_row_before_training(tiny_clip_dir, tmp_path):
    from hf_hardpos.errors import UserInputError

    data = finetune_rows(12)
    assert _validate(data) == {"rows": 12, "images_decoded": 12}
    captions = list(data["caption"])
    captions[4] = captions[9] = None
    with pytest.raises(UserInputError, match=r"column 'caption' is null in 2 of 12 rows \(rows 4, 9\)"):
        _validate(_with(data, "caption", captions))
    # Row numbers are positions in the dataset as given, also through an indices mapping (select/shuffle).
    reordered = _with(data, "caption", captions).select([11, 9, 0, 4, 2])
    assert reordered._indices is not None
    with pytest.raises(UserInputError, match=r"null in 2 of 5 rows \(rows 1, 3\)"):
        _validate(reordered)
    swaps = list(data["hard_positive_swap"])
    swaps[7] = " None "
    with pytest.raises(
        UserInputError, match=r"'hard_positive_swap' holds an empty or placeholder .* rows 7;"
    ):
        _validate(_with(data, "hard_positive_swap", swaps))
    with pytest.raises(UserInputError, match=r"column 'image' is null in 1 of 12 rows \(rows 3\)"):
        _validate(_with_image_cells(data, lambda cells: [None if i == 3 else c for i, c in enumerate(cells)]))
    renamed = data.rename_column("hard_negative_swap", "hard_negatives_swap")
    with pytest.raises(
        UserInputError,
        match=r"lacks column\(s\) 'hard_negative_swap' \(did you mean 'hard_negatives_swap'\?\)",
    ):  # noqa: E501
        _validate(renamed)
    # The trainer runs the same checks at construction, before any step.
    model, processor = load_tiny(tiny_clip_dir)
    with pytest.raises(UserInputError, match=r"rows 4, 9"):
        HardPosTrainer(
            model=model,
            args=make_args(tmp_path),
            processor=processor,
            train_dataset=_with(data, "caption", captions),
        )


def test_all_null_hard_example_columns_are_refused_unless_their_weight_is_zero(caplog):
    from hf_hardpos.errors import UserInputError

    data = finetune_rows(8)
    no_positives = data
    for column in ("hard_positive_replace", "hard_positive_swap"):
        no_positives = _with(no_positives, column, [None] * 8)
    with pytest.raises(
        UserInputError,
        match=r"hard-positive column\(s\) \['hard_positive_replace', 'hard_positive_swap'\] are null on all 8 rows",
    ):  # noqa: E501
        _validate(no_positives)
    assert _validate(no_positives, hard_positive_weight=0.0)["rows"] == 8
    only = _with(data, "hard_negative_replace", [None] * 8).remove_columns("hard_negative_swap")
    with pytest.raises(
        UserInputError, match=r"hard-negative column\(s\) \['hard_negative_replace'\] are null on all"
    ):
        _validate(only, negative_columns=["hard_negative_replace"])
    assert _validate(only, negative_columns=["hard_negative_replace"], hard_negative_weight=0.0)["rows"] == 8
    # One all-null column beside one with captions: the term still trains (on the other), with a warning.
    with caplog.at_level("WARNING", logger="hf_hardpos.training.validation"):
        assert _validate(_with(data, "hard_negative_swap", [None] * 8))["rows"] == 8
    assert "['hard_negative_swap'] are null on all 8 rows" in caplog.text


def test_undecodable_images_are_found_by_row_sampled_or_all():
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.training.validation import validate_training_data

    def truncate_13(cells):
        cells[13] = {"bytes": cells[13]["bytes"][:40], "path": None}  # a truncated PNG
        return cells

    broken = _with_image_cells(finetune_rows(40), truncate_13)
    args = make_args("unused")
    with pytest.raises(UserInputError, match=r"do not decode \(every image checked\): row 13 "):
        validate_training_data(broken, args)
    # A sample of 4 evenly spaced rows (0, 13, 26, 39) hits it; one of 3 (0, 20, 39) does not, unless all are asked.
    with pytest.raises(UserInputError, match=r"\(a sample of 4 images checked\): row 13 "):
        validate_training_data(broken, args, sample_images=4)
    assert validate_training_data(broken, args, sample_images=3) == {"rows": 40, "images_decoded": 3}
    with pytest.raises(UserInputError, match=r"row 13 "):
        validate_training_data(broken, args, sample_images=3, all_images=True)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"max_steps": 0}, "max_steps=0"),
        ({"per_device_train_batch_size": 0}, "per_device_train_batch_size must be >= 1"),
        ({"learning_rate": -1e-4}, "learning_rate must be a finite number >= 0"),
        ({"gradient_accumulation_steps": 0}, "gradient_accumulation_steps must be >= 1"),
        ({"max_steps": -1, "num_train_epochs": 0}, "num_train_epochs must be > 0"),
    ],
)
def test_numeric_options_that_cannot_train_are_refused(tiny_clip_dir, tmp_path, overrides, named):
    from hf_hardpos.errors import UserInputError

    model, processor = load_tiny(tiny_clip_dir)
    with pytest.raises(UserInputError, match=named):
        HardPosTrainer(
            model=model,
            args=make_args(tmp_path, **overrides),
            processor=processor,
            train_dataset=finetune_rows(8),
        )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--learning_rte", "1e-4"],
            r"unknown option\(s\): --learning_rte \(did you mean --learning_rate\?\)",
        ),
        (["--learning_rate", "abc"], r"invalid float value: 'abc'"),
        (["--warmup_steps", "-1"], r"warmup_steps >= 0"),
        (["--max_steps", "0"], r"max_steps=0"),
        (["--per_device_train_batch_size", "0"], r"per_device_train_batch_size must be >= 1"),
        (["stray"], r"unexpected argument\(s\) \['stray'\]"),
    ],
)
def test_example_bad_flags_and_values_are_one_line_errors_with_exit_2(tmp_path, capsys, argv, message):
    import re

    from hf_hardpos.commands.train import finetune

    assert (
        finetune(["--dataset", "d", *argv, "--output_dir", str(tmp_path)]) == 2
    )  # a run of one's own: --dataset
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err


def test_random_crops_do_not_depend_on_the_number_of_dataloader_workers(tiny_clip_dir, tmp_path):
    """Workers reseed torch's global RNG; per-row generators make that irrelevant."""
    in_process = _crop_run(tiny_clip_dir, tmp_path / "w0", max_steps=3, save_strategy="no")
    with_workers = _crop_run(
        tiny_clip_dir, tmp_path / "w2", max_steps=3, save_strategy="no", dataloader_num_workers=2
    )
    assert with_workers == in_process
