"""`HardPosTrainer`: the `transformers.Trainer` for hard-positive / hard-negative CLIP fine-tuning.

What it adds to the stock Trainer, and why:

- It trains a `CLIPModel` (or a peft wrapper of one) and refuses anything else at construction,
  with a message naming the class, rather than failing inside the first forward.
- `compute_loss` runs the CLIP forward once per batch (images once, every present caption in one
  text-tower call), has the batch (`HardPosBatch`) split the text embeddings back into rows, hands them to
  `HardPosObjective` in fp32 (re-normalised, autocast off) even under bf16/fp16 mixed precision; each
  loss term and each CMR threshold is logged, so a run shows *which* term moved, not only the total.
- A non-finite loss stops every process together (`loss_guard`), naming the term and the step the
  Trainer would have logged, instead of the Trainer's default of silently substituting the running
  mean (`logging_nan_inf_filter`).
- Weight decay applies to every parameter with two or more dimensions except the logit scale
  (`get_decay_parameter_names`), as mlfoundations' CLIP training code, SVLC and CE-CLIP train CLIP: the
  position embeddings are decayed, biases, norms and the class embedding (all 1-D) are not.
- The logit scale is clamped to CLIP's ceiling of 100 after every optimiser step, as CLIP does.
- The objective's state (CE-CLIP's adaptive thresholds) is saved into every checkpoint next to the
  optimizer state and restored on `resume_from_checkpoint`, so a resumed run computes the same loss.
- Checkpoints are written atomically (a staging folder renamed when complete: `atomic_checkpoints`), and a
  resume uses the last *complete* checkpoint, saying which incomplete ones it skipped (`checkpointing`).
- Options that have no effect with the others chosen (`--save_steps` under `save_strategy=epoch`,
  LoRA options without `--use_lora`, ...) are reported at construction; an `eval_strategy` without
  eval sets is a clear error instead of the Trainer's.
- `evaluate()` runs each eval set's benchmark: hard-positive sets through the package's evaluator
  (augmented accuracy, brittleness, ...), and any other benchmark `hardpos eval` knows (caption
  selection, Winoground, zero-shot classification and retrieval: `evaluation.training_sets.BenchmarkEvalSet`)
  through the same code as the CLI, so compositionality and zero-shot retention are logged side by
  side as `eval_<set>[_<row>]_<metric>` (naming: `eval_sets`). There is no eval *loss*, since the
  metrics are what matters. The latest section of each set (table, tie rule, aggregation) feeds the
  model card and is saved into every checkpoint, so a resumed run's card still shows it
  (`trainer_evaluation`, with the loading of the best checkpoint's evaluation).
- Every save writes the processor and a model card generated from the run (`model_card.py`); with
  LoRA, checkpoints hold the adapter and `save_merged()` exports a plain `CLIPModel`.

What can be a `TrainerCallback` is one (logit-scale clamp, epoch start, Ctrl-C); each method of the
Trainer overridden here says in its docstring why no callback event or constructor argument does it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
import torch.nn.functional as F
from datasets import Dataset
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..errors import UserInputError
from ..evaluation.training_sets import BenchmarkEvalSet, as_benchmark_eval_set
from .atomic_checkpoints import AtomicCheckpoints
from .callbacks import EpochStateCallback, LogitScaleClampCallback
from .card_data import HardPosModelCardData
from .checkpointing import load_loss_state, read_eval_sections, repair_best_checkpoint, resolve_checkpoint
from .data_collator import HardPosBatch, HardPosDataCollator
from .interrupt import InterruptCallback, TrainingInterrupted, stop_on_interrupt
from .log_lines import use_log_lines
from .logit_scale import unwrap_model
from .lora import apply_lora, is_peft_model, merge_lora
from .loss_guard import check_finite_loss
from .model_card import MODEL_CARD_NAME, generate_model_card
from .recipe import batch_layout
from .run_facts import padded_rows_per_epoch
from .trainer_evaluation import TrainerEvaluation
from .trainer_setup import checked_arguments, default_collator, prepared_train_dataset, require_clip
from .training_args import HardPosTrainingArguments

logger = logging.getLogger(__name__)

# The one parameter name excluded from weight decay whatever its shape. mlfoundations' CLIP training
# code (up to v3.3), TSVLC and CE-CLIP exclude `p.ndim < 2 or "bn"/"ln"/"bias"/"logit_scale" in name`;
# every bn/ln/bias tensor of CLIP is 1-D, so the rule is "ndim >= 2, except the logit scale" (position embeddings included).
NO_DECAY_NAME = "logit_scale"


class HardPosTrainer(AtomicCheckpoints, TrainerEvaluation, Trainer):
    """Fine-tune a `CLIPModel` with hard positives and hard negatives.

    Args:
        model: a `CLIPModel` (wrapped in LoRA here when `args.use_lora`) or a peft wrapper of one.
            Anything else is refused: the loss reads CLIP's towers and logit scale.
        args: `HardPosTrainingArguments`.
        train_dataset: rows with an image, a caption and the positive/negative columns of `args`.
        eval_datasets: `{name: Dataset | BenchmarkEvalSet}`, or one of them (named "eval"). A `Dataset`
            is a hard-positive set (image, caption, hard_negative, hard_positive), evaluated with
            `evaluate_dataset`; a `BenchmarkEvalSet` is any benchmark `hardpos eval` knows (a zero-shot
            retention set, SugarCrepe, ARO, Winoground, ...), run as the CLI runs it.
        processor: the model's `CLIPProcessor`; used by the collator and the evaluator, and saved
            with every checkpoint.
        data_collator: defaults to a `HardPosDataCollator` built from `args`' column names and
            augmentation; a custom one must return a `HardPosBatch`.
        objective: defaults to `HardPosObjective` built from `args`' loss options.
        model_card_data: facts for the model card the trainer cannot know (dataset ids, recipe...).
        **kwargs: passed to `transformers.Trainer` (callbacks, optimizers, ...).
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        args: HardPosTrainingArguments | None = None,
        train_dataset: Dataset | None = None,
        eval_datasets: dict[str, Dataset | BenchmarkEvalSet] | Dataset | BenchmarkEvalSet | None = None,
        processor=None,
        data_collator: HardPosDataCollator | None = None,
        objective: torch.nn.Module | None = None,
        model_card_data: HardPosModelCardData | None = None,
        **kwargs: Any,
    ):
        args = checked_arguments(args)
        require_clip(model)
        if processor is None:
            raise UserInputError(
                "HardPosTrainer needs the model's processor (CLIPProcessor) to build batches"
            )
        if "eval_dataset" in kwargs:
            raise TypeError("pass eval sets as eval_datasets={name: Dataset}")
        if args.use_lora and not is_peft_model(model):
            model = apply_lora(
                model,
                args.lora_r,
                args.lora_alpha,
                args.lora_dropout,
                args.lora_target_modules,
                seed=args.seed,
            )
        if data_collator is None:
            data_collator = default_collator(args, processor)
        if isinstance(eval_datasets, (Dataset, BenchmarkEvalSet)):
            eval_datasets = {"eval": eval_datasets}
        train_dataset = prepared_train_dataset(train_dataset, args)
        # Each eval set resolved now: its task recognised, its columns checked, hard-positive rows loaded.
        self.eval_datasets: dict[str, BenchmarkEvalSet] = {
            name: as_benchmark_eval_set(name, value) for name, value in (eval_datasets or {}).items()
        }
        # The latest evaluation of each set, {name: section with its "step"}: what the model card shows.
        self.eval_sections: dict[str, dict] = {}
        strategy = getattr(args.eval_strategy, "value", args.eval_strategy)
        if not self.eval_datasets and strategy != "no":
            raise UserInputError(
                f"eval_strategy={strategy!r} but there are no eval sets: pass eval_datasets={{name: Dataset}} "
                "(--eval_datasets) or set eval_strategy='no'"
            )
        for message in args.inert_options().values():
            logger.warning("%s.", message)
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
        if train_dataset is not None and hasattr(train_dataset, "__len__"):
            _warn_padded_rounds(len(train_dataset), self.args)
        if callable(getattr(self.objective, "defer_state_updates", None)):
            self.objective.defer_state_updates()  # CMR thresholds move once per optimiser step
        self.model_card_data = model_card_data or HardPosModelCardData()
        # Our loss is a per-batch mean: let the Trainer divide it over gradient-accumulation steps.
        self.loss_is_scaled_for_ga = False
        self.add_callback(LogitScaleClampCallback())
        self.add_callback(EpochStateCallback(self.objective, self.data_collator))
        use_log_lines(self)  # one line of numbers per log entry in a file, from every entry point
        self._term_sums: dict[str, torch.Tensor | float] = {}
        self._term_steps = 0
        # {checkpoint, step, metric, value, last_step} once load_best_model_at_end loaded the best checkpoint
        self.best_model_loaded: dict[str, Any] | None = None

    @staticmethod
    def build_objective(args: HardPosTrainingArguments) -> torch.nn.Module:
        """The `HardPosObjective` that `args` describes (every registered term's weight and options, one
        hard-negative type per negative column)."""
        from .losses import HardPosObjective
        from .losses.registry import settings_of

        return HardPosObjective(
            negative_types=tuple(args.negative_columns),
            gather_across_processes=args.gather_across_processes,
            contrastive_hard_negatives=args.contrastive_hard_negatives,
            **settings_of(args),
        )

    def get_decay_parameter_names(self, model: torch.nn.Module) -> list[str]:
        """Names of the parameters that get weight decay: every parameter with ndim >= 2 except the logit
        scale, as mlfoundations' CLIP training code (up to v3.3), TSVLC and CE-CLIP build their AdamW groups.

        So weight matrices, conv kernels, both position embedding tables and (with LoRA) the adapters'
        A/B matrices are decayed; biases, norms and the class embedding (1-D) and the logit scale are
        not. The stock Trainer excludes only LayerNorm modules and names with "bias"/"norm", so it would
        decay CLIP's `logit_scale` (pulling the temperature towards 1) and `class_embedding`.

        An override: the Trainer builds its optimizer's groups from this method, and no argument names
        them (a whole `optimizers=` pair would also replace the Trainer's choice of optimizer).
        """
        return [
            name
            for name, parameter in model.named_parameters()
            if parameter.ndim >= 2 and NO_DECAY_NAME not in name.split(".")
        ]

    # --- loss ------------------------------------------------------------------------------------

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """Encode the batch once and return the objective's total loss.

        The forward goes through `model` itself (not `get_image_features` on the unwrapped module) so
        that DDP's gradient hooks see it; `CLIPModel.forward` returns the L2-normalised
        `image_embeds`/`text_embeds` of `pooler_output`. Under mixed precision those were normalised in
        half precision, so the loss starts from them cast to fp32 and re-normalised, and runs with
        autocast off: the strict comparisons the metrics make are decided by fp32 cosines.

        An override, not a `compute_loss_func` argument: that function receives the outputs of
        `model(**inputs)`, and CLIP's forward neither takes the batch's layout nor returns per-row texts.
        """
        if not isinstance(inputs, HardPosBatch):
            raise TypeError(
                f"the data_collator returned {type(inputs).__name__}, not a HardPosBatch: the loss reads the "
                "batch's layout (where each row's hard positives and negatives sit among its texts)"
            )
        outputs = model(
            input_ids=inputs.input_ids,
            attention_mask=inputs.attention_mask,
            pixel_values=inputs.pixel_values,
        )
        device_type = outputs.image_embeds.device.type
        with torch.autocast(device_type=device_type, enabled=False):
            image_embeds = F.normalize(outputs.image_embeds.float(), dim=-1)
            text_embeds = F.normalize(outputs.text_embeds.float(), dim=-1)
            logit_scale = unwrap_model(model).logit_scale.float().exp()
            texts = inputs.unflatten(text_embeds)
            self.objective.train(model.training)  # loss state (CMR thresholds) moves on training steps only
            terms = self.objective(image_embeds=image_embeds, logit_scale=logit_scale, **texts)
        # The logged step of this batch: global_step counts the optimiser steps already completed.
        check_finite_loss(terms, step=self.state.global_step + 1, logit_scale=logit_scale)
        if model.training:
            self._accumulate(terms)
        loss = terms["loss"]
        if return_outputs:
            return loss, {"image_embeds": image_embeds, "text_embeds": texts["text_embeds"]}
        return loss

    def _accumulate(self, terms: dict[str, Any]) -> None:
        """Sum each term over the steps since the last log (on device: no sync until logging)."""
        for key, value in terms.items():
            if key == "loss":
                continue  # the Trainer logs the total itself
            value = value.detach().float() if torch.is_tensor(value) else float(value)
            self._term_sums[key] = self._term_sums.get(key, 0.0) + value
        self._term_steps += 1

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the mean of each loss term, the CMR thresholds and the logit scale to training logs.

        An override, not an `on_log` callback: the Trainer records `logs` in `state.log_history` and
        hands them to the reporting callbacks before any callback of ours could add to them.
        """
        if "loss" in logs and self._term_steps:
            local = {k: float(v) / self._term_steps for k, v in self._term_sums.items()}
            logs.update(_mean_over_processes(local, self.args.world_size))
            logs["logit_scale"] = float(unwrap_model(self.model).logit_scale.detach().exp())
            self._term_sums, self._term_steps = {}, 0
        super().log(logs, start_time)

    # --- saving and resuming ---------------------------------------------------------------------

    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial=None,
        ignore_keys_for_eval=None,
        **kwargs,
    ):
        """`Trainer.train`, resuming only from a complete checkpoint, with the loss state and eval sections it holds.

        `resume_from_checkpoint=True` (or "last") takes the last complete checkpoint of `output_dir`
        and says which incomplete ones it skipped; a named folder must be complete (see `checkpointing`).
        Ctrl-C saves a checkpoint after the current step and raises `TrainingInterrupted` (`interrupt`).

        An override, not a callback: the checkpoint must be chosen before the Trainer loads it (its own
        `get_last_checkpoint` takes incomplete folders), no callback event is told which checkpoint a
        resume loads (so none can restore the loss state with it), and the Ctrl-C handler must be
        installed around the whole run.
        """
        checkpoint = resolve_checkpoint(self.args.output_dir, resume_from_checkpoint)
        if checkpoint is not None and self.args.should_save:
            repair_best_checkpoint(checkpoint)  # written by an earlier version under the staging path
        self.accelerator.wait_for_everyone()
        if checkpoint is not None:
            sections = read_eval_sections(checkpoint)
            if sections is not None:  # absent in checkpoints written before eval sections were saved
                self.eval_sections = {k: v for k, v in sections.items() if k in self.eval_datasets}
            load_loss_state(checkpoint, self.objective, self.args.device)
        interrupt = InterruptCallback()
        self.add_callback(interrupt)
        try:
            with stop_on_interrupt(interrupt):
                result = super().train(
                    resume_from_checkpoint=checkpoint,
                    trial=trial,
                    ignore_keys_for_eval=ignore_keys_for_eval,
                    **kwargs,
                )
        finally:
            self.remove_callback(interrupt)
        if interrupt.stopped:
            saved = os.path.join(
                self._get_output_dir(trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            raise TrainingInterrupted(self.state.global_step, saved if os.path.isdir(saved) else None)
        if self.args.should_save:  # the run's card in output_dir, not only inside its checkpoints
            os.makedirs(self.args.output_dir, exist_ok=True)
            self.write_model_card(self.args.output_dir)
        return result

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """`save_pretrained` model (or adapter) + processor, then the model card of this run.

        An override of the one method every model save goes through (checkpoints, `save_model`): the
        card must be in a checkpoint before it is renamed, i.e. before `on_save`, and in a folder given
        to `save_model` before that method pushes it to the Hub.
        """
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
        dataset: str | list[str] | None = None,
        **ignored: Any,
    ) -> None:
        """The Trainer's hook (called by `push_to_hub`): our generated card, with the given overrides.

        The stock card's other fields (`tasks`, `dataset_tags`, `dataset_args`) have no place in this
        card: they are reported as ignored rather than dropped silently.
        """
        if not self.is_world_process_zero():
            return
        if ignored:
            logger.warning(
                "create_model_card: ignoring %s (not used by the hf_hardpos card)", sorted(ignored)
            )
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

    def save_merged(self, output_dir: str) -> str:
        """Save a plain `CLIPModel` + processor + card: LoRA adapters merged in (the trainer's model is untouched).

        Without LoRA this is the same as `save_model(output_dir)`.
        """
        if not is_peft_model(self.model):
            self.save_model(output_dir)
            return output_dir
        if self.args.should_save:
            merged = merge_lora(self.model)
            os.makedirs(output_dir, exist_ok=True)
            merged.save_pretrained(output_dir)
            self.processing_class.save_pretrained(output_dir)
            self.write_model_card(output_dir, is_adapter=False)
        self.accelerator.wait_for_everyone()
        return output_dir


def _mean_over_processes(values: dict[str, float], world_size: int) -> dict[str, float]:
    """Per-key mean over processes (keys may differ between processes; one collective either way)."""
    if world_size <= 1:
        return values
    from accelerate.utils import gather_object

    gathered = gather_object([values])
    keys = dict.fromkeys(k for d in gathered for k in d)
    return {k: sum(d[k] for d in gathered if k in d) / sum(1 for d in gathered if k in d) for k in keys}


def _warn_padded_rounds(rows: int, args: HardPosTrainingArguments) -> None:
    """Say so when the processes' batches do not divide the training rows (the card says it too)."""
    per_device, processes, _ = batch_layout(args)
    padded = padded_rows_per_epoch(rows, per_device, processes, args.dataloader_drop_last)
    if padded:
        logger.warning(
            "%d processes x %d rows per batch do not divide the %d training rows: each epoch completes its "
            "last round with %d rows from its start, trained twice (the card says so); pass "
            "--dataloader_drop_last to drop that round instead.",
            processes, per_device, rows, padded,
        )  # fmt: skip
