"""`HardPosTrainer`: the `transformers.Trainer` for hard-positive / hard-negative CLIP fine-tuning.

What it adds to the stock Trainer, and why:

- `compute_loss` runs the CLIP forward once per batch (images once, every present caption in one
  text-tower call) and hands normalised embeddings to `HardPosObjective`; each loss term and each CMR
  threshold is logged, so a run shows *which* term moved, not only the total.
- A non-finite loss stops training with an error naming the term, instead of the Trainer's default
  of silently substituting the running mean (`logging_nan_inf_filter`).
- The logit scale is clamped to CLIP's ceiling of 100 after every optimiser step, as CLIP does.
- The objective's state (CE-CLIP's adaptive thresholds) is saved into every checkpoint next to the
  optimizer state and restored on `resume_from_checkpoint`, so a resumed run computes the same loss.
- `evaluate()` runs the package's evaluator (augmented accuracy, brittleness, ...) on each eval set,
  logged as `eval_<name>_<metric>`; there is no eval *loss*, since the metrics are what matters.
- Every save writes the processor and a model card generated from the run (`model_card.py`); with
  LoRA, checkpoints hold the adapter and `save_merged()` exports a plain `CLIPModel`.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from typing import Any

import torch
from datasets import Dataset
from transformers import Trainer, TrainerCallback

from .. import columns
from .data_collator import HardPosDataCollator
from .logit_scale import clamp_logit_scale, unwrap_model
from .lora import apply_lora, is_peft_model, merge_lora, unwrap_ddp
from .model_card import HardPosModelCardData, generate_model_card
from .training_args import HardPosTrainingArguments

logger = logging.getLogger(__name__)

LOSS_STATE_NAME = "hardpos_loss_state.pt"
MODEL_CARD_NAME = "README.md"


class NonFiniteLossError(FloatingPointError):
    """A loss term became NaN or infinite; the message names the term."""


class LogitScaleClampCallback(TrainerCallback):
    """Clamp CLIP's logit scale to ln(100) after every optimiser step, as CLIP's own training does."""

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is not None:
            clamp_logit_scale(model)


class HardPosTrainer(Trainer):
    """Fine-tune a `CLIPModel` with hard positives and hard negatives.

    Args:
        model: a `CLIPModel` (wrapped in LoRA here when `args.use_lora`; an existing `PeftModel` is kept).
        args: `HardPosTrainingArguments`.
        train_dataset: rows with an image, a caption and the positive/negative columns of `args`.
        eval_datasets: `{name: Dataset}` in the eval schema (image, caption, hard_negative,
            hard_positive), or one Dataset (named "eval"). Evaluated with `evaluate_dataset`.
        processor: the model's `CLIPProcessor`; used by the collator and the evaluator, and saved
            with every checkpoint.
        data_collator: defaults to a `HardPosDataCollator` built from `args`' column names.
        objective: defaults to `HardPosObjective` built from `args`' loss options.
        model_card_data: facts for the model card the trainer cannot know (dataset ids, license...).
        **kwargs: passed to `transformers.Trainer` (callbacks, optimizers, ...).
    """

    def __init__(
        self,
        model=None,
        args: HardPosTrainingArguments | None = None,
        train_dataset: Dataset | None = None,
        eval_datasets: dict[str, Dataset] | Dataset | None = None,
        processor=None,
        data_collator=None,
        objective: torch.nn.Module | None = None,
        model_card_data: HardPosModelCardData | None = None,
        **kwargs: Any,
    ):
        if args is None:
            args = HardPosTrainingArguments(output_dir="hardpos_trainer_output")
        if not isinstance(args, HardPosTrainingArguments):
            raise TypeError(
                "HardPosTrainer needs HardPosTrainingArguments (loss weights, columns, LoRA), "
                f"got {type(args).__name__}"
            )
        if processor is None:
            raise ValueError("HardPosTrainer needs the model's processor (CLIPProcessor) to build batches")
        if "eval_dataset" in kwargs:
            raise TypeError("pass eval sets as eval_datasets={name: Dataset}")
        if model is not None and args.use_lora and not is_peft_model(model):
            model = apply_lora(model, args.lora_r, args.lora_alpha, args.lora_dropout, args.lora_target_modules)
        if data_collator is None:
            data_collator = HardPosDataCollator(
                processor, args.image_column, args.caption_column, args.positive_columns, args.negative_columns
            )
        if isinstance(eval_datasets, Dataset):
            eval_datasets = {"eval": eval_datasets}
        self.eval_datasets: dict[str, Dataset] = dict(eval_datasets or {})
        # Fail before hours of training, not at the first batch or the first evaluation.
        if train_dataset is not None:
            _check_columns(
                train_dataset,
                [args.image_column, args.caption_column, *args.positive_columns, *args.negative_columns],
                "the training set",
            )
        for name, dataset in self.eval_datasets.items():
            _check_columns(dataset, [columns.IMAGE, *columns.EVAL_CAPTION_COLUMNS], f"eval set {name!r}")
        if objective is None:
            objective = self.build_objective(args)

        super().__init__(
            model=model,
            args=args,
            data_collator=data_collator,
            train_dataset=train_dataset,
            eval_dataset=self.eval_datasets or None,
            processing_class=processor,
            **kwargs,
        )
        self.objective = objective.to(self.args.device)
        self.model_card_data = model_card_data or HardPosModelCardData()
        # Our loss is a per-batch mean: let the Trainer divide it over gradient-accumulation steps.
        self.loss_is_scaled_for_ga = False
        self.add_callback(LogitScaleClampCallback())
        self._term_sums: dict[str, torch.Tensor | float] = {}
        self._term_steps = 0

    @staticmethod
    def build_objective(args: HardPosTrainingArguments) -> torch.nn.Module:
        """The `HardPosObjective` that `args` describes; one hard-negative type per negative column."""
        from .losses import HardPosObjective

        return HardPosObjective(
            hard_negative_weight=args.hard_negative_weight,
            hard_positive_weight=args.hard_positive_weight,
            imc_weight=args.imc_weight,
            cmr_weight=args.cmr_weight,
            cmr_upper_bound=args.cmr_upper_bound,
            negative_types=tuple(args.negative_columns),
            gather_across_processes=args.gather_across_processes,
            hard_positive_mode=args.hard_positive_mode,
        )

    # --- loss ------------------------------------------------------------------------------------

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """Encode the batch once and return the objective's total loss.

        The forward goes through `model` itself (not `get_image_features` on the unwrapped module) so
        that DDP's gradient hooks see it; `CLIPModel.forward` returns the L2-normalised
        `image_embeds`/`text_embeds` of `pooler_output`, which is what the objective expects.
        """
        outputs = model(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            pixel_values=inputs["pixel_values"],
        )
        image_embeds, text_embeds = outputs.image_embeds, outputs.text_embeds
        batch = image_embeds.shape[0]
        logit_scale = unwrap_model(model).logit_scale.exp()
        positives, positive_mask = _gather_slots(text_embeds, inputs["positive_index"], inputs["positive_mask"])
        negatives, negative_mask = _gather_slots(text_embeds, inputs["negative_index"], inputs["negative_mask"])
        terms = self.objective(
            image_embeds=image_embeds,
            text_embeds=text_embeds[:batch],
            logit_scale=logit_scale,
            positive_embeds=positives,
            positive_mask=positive_mask,
            negative_embeds=negatives,
            negative_mask=negative_mask,
        )
        self._check_finite(terms, logit_scale)
        if model.training:
            self._accumulate(terms)
        loss = terms["loss"]
        if return_outputs:
            return loss, {"image_embeds": image_embeds, "text_embeds": text_embeds[:batch]}
        return loss

    def _check_finite(self, terms: dict[str, Any], logit_scale: torch.Tensor) -> None:
        parts = {k: v for k, v in terms.items() if k.startswith("loss") and torch.is_tensor(v)}
        if bool(torch.isfinite(torch.stack([v.detach().float() for v in parts.values()])).all()):
            return  # one device sync per step; names are worked out only on failure
        bad = {k: float(v.detach()) for k, v in parts.items() if not math.isfinite(float(v.detach()))}
        named = [k for k in bad if k != "loss"] or ["loss"]
        values = ", ".join(f"{k}={bad[k]}" for k in named)
        raise NonFiniteLossError(
            f"non-finite loss term {', '.join(named)} at step {self.state.global_step} ({values}; "
            f"logit scale {float(logit_scale.detach()):.4g}). Training stopped rather than continue on a "
            "corrupted loss: lower the learning rate or the weight of that term, or check this batch's data."
        )

    def _accumulate(self, terms: dict[str, Any]) -> None:
        """Sum each term over the steps since the last log (on device: no sync until logging)."""
        for key, value in terms.items():
            if key == "loss":
                continue  # the Trainer logs the total itself
            value = value.detach().float() if torch.is_tensor(value) else float(value)
            self._term_sums[key] = self._term_sums.get(key, 0.0) + value
        self._term_steps += 1

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the mean of each loss term, the CMR thresholds and the logit scale to training logs."""
        if "loss" in logs and self._term_steps:
            local = {k: float(v) / self._term_steps for k, v in self._term_sums.items()}
            logs.update(_mean_over_processes(local, self.args.world_size))
            logs["logit_scale"] = float(unwrap_model(self.model).logit_scale.detach().exp())
            self._term_sums, self._term_steps = {}, 0
        super().log(logs, start_time)

    # --- evaluation ------------------------------------------------------------------------------

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
        """Hard-positive metrics of the current model on each eval set, logged as `eval_<name>_<metric>`.

        `eval_dataset` may be a name from `eval_datasets`, a Dataset, or a `{name: Dataset}` dict;
        by default all `eval_datasets` are evaluated. Every process scores the full sets, so every
        process holds the same metrics (`metric_for_best_model` works under DDP).
        """
        from ..evaluation import evaluate_dataset

        sets = self._resolve_eval_sets(eval_dataset)
        model = unwrap_model(self.model)
        was_training = model.training
        start = time.time()
        metrics: dict[str, float] = {}
        try:
            for name, dataset in sets.items():
                result = evaluate_dataset(
                    model,
                    self.processing_class,
                    dataset,
                    batch_size=self.args.per_device_eval_batch_size,
                    device=str(self.args.device),
                    progress=not self.args.disable_tqdm and self.is_local_process_zero(),
                )
                for key, value in result.items():
                    metrics[f"{metric_key_prefix}_{name}_{key}"] = value if isinstance(value, int) else float(value)
        finally:
            model.train(was_training)
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _resolve_eval_sets(self, eval_dataset) -> dict[str, Dataset]:
        if eval_dataset is None:
            if not self.eval_datasets:
                raise ValueError("no eval sets: pass eval_datasets={name: Dataset} to HardPosTrainer")
            return self.eval_datasets
        if isinstance(eval_dataset, str):
            if eval_dataset not in self.eval_datasets:
                raise KeyError(f"unknown eval set {eval_dataset!r}; known: {sorted(self.eval_datasets)}")
            return {eval_dataset: self.eval_datasets[eval_dataset]}
        if isinstance(eval_dataset, dict):
            return eval_dataset
        return {"eval": eval_dataset}

    # --- saving and resuming ---------------------------------------------------------------------

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """`save_pretrained` model (or adapter) + processor, then the model card of this run."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        super()._save(output_dir, state_dict)
        if self.args.should_save:
            self.write_model_card(output_dir)

    def write_model_card(self, output_dir: str, **overrides: Any) -> str:
        """Write `README.md` into `output_dir`; returns its path."""
        card = generate_model_card(self, self.model_card_data, **overrides)
        path = os.path.join(output_dir, MODEL_CARD_NAME)
        card.save(path)
        return path

    def create_model_card(
        self,
        language: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """The Trainer's hook (called by `push_to_hub`): our generated card, with the given overrides."""
        if not self.is_world_process_zero():
            return
        data = self.model_card_data
        if language is not None:
            data.language = language
        if license is not None:
            data.license = license
        if tags is not None:
            data.tags = list(dict.fromkeys([*data.tags, *([tags] if isinstance(tags, str) else tags)]))
        if finetuned_from is not None:
            data.base_model = finetuned_from
        if isinstance(dataset, str) and data.train_dataset_id is None:
            data.train_dataset_id = dataset
        os.makedirs(self.args.output_dir, exist_ok=True)
        self.write_model_card(self.args.output_dir, model_name=model_name)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Mid-training pushes upload `output_dir`; give it the checkpoint's card (the Trainer copies weights only)."""
        card = os.path.join(checkpoint_folder, MODEL_CARD_NAME)
        if self.is_world_process_zero() and os.path.isfile(card):
            shutil.copy(card, os.path.join(self.args.output_dir, MODEL_CARD_NAME))
        super()._push_from_checkpoint(checkpoint_folder)

    def save_merged(self, output_dir: str) -> str:
        """Save a plain `CLIPModel` + processor + card: LoRA adapters merged in (the trainer's model is untouched).

        Without LoRA this is the same as `save_model(output_dir)`.
        """
        model = unwrap_ddp(self.model)
        if not is_peft_model(model):
            self.save_model(output_dir)
            return output_dir
        if self.args.should_save:
            merged = merge_lora(model)
            os.makedirs(output_dir, exist_ok=True)
            merged.save_pretrained(output_dir)
            self.processing_class.save_pretrained(output_dir)
            self.write_model_card(output_dir, is_adapter=False)
        self.accelerator.wait_for_everyone()
        return output_dir

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        """Training state: the optimizer and scheduler, plus the loss state (CMR thresholds)."""
        super()._save_optimizer_and_scheduler(output_dir)
        if self.args.should_save:
            torch.save(self.objective.state_dict(), os.path.join(output_dir, LOSS_STATE_NAME))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, LOSS_STATE_NAME)
        if not os.path.isfile(path):
            if self.objective.state_dict():
                raise FileNotFoundError(
                    f"{path} is missing: the checkpoint has no loss state (CMR thresholds), so resuming "
                    "would change the loss. Was it written by HardPosTrainer?"
                )
            return
        state = torch.load(path, map_location=self.args.device, weights_only=True)
        self.objective.load_state_dict(state)
        logger.info("Restored the loss state from %s", path)


def _check_columns(dataset, needed: list[str], what: str) -> None:
    names = getattr(dataset, "column_names", None)
    if names is None:  # an IterableDataset without known features, or a torch Dataset
        return
    missing = [c for c in needed if c not in names]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}; it has {names}")


def _gather_slots(
    text_embeds: torch.Tensor, index: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """[B, S, D] embeddings of each row's extra captions (zeros where masked) and the [B, S] mask."""
    if index.shape[1] == 0:
        return None, None
    slots = text_embeds[index]  # masked slots point at text 0; zeroed below
    return slots * mask.unsqueeze(-1).to(slots.dtype), mask


def _mean_over_processes(values: dict[str, float], world_size: int) -> dict[str, float]:
    """Per-key mean over processes (keys may differ between processes; one collective either way)."""
    if world_size <= 1:
        return values
    from accelerate.utils import gather_object

    gathered = gather_object([values])
    keys = dict.fromkeys(k for d in gathered for k in d)
    return {k: sum(d[k] for d in gathered if k in d) / sum(1 for d in gathered if k in d) for k in keys}
