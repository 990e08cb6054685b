"""The evaluation during training of `HardPosTrainer`: every eval set's benchmark, and the best checkpoint's.

`evaluate()` runs each eval set's benchmark: hard-positive sets through the package's evaluator
(augmented accuracy, brittleness, ...), and any other benchmark `hardpos eval` knows (caption
selection, Winoground, zero-shot classification and retrieval: `evaluation.training_sets.BenchmarkEvalSet`)
through the same code as the CLI. The latest section of each set is kept in ``eval_sections`` (saved
into every checkpoint, read by the model card); loading the best checkpoint at the end loads its
sections with it.

Why a mixin of its own: these overrides share only ``eval_datasets`` and ``eval_sections`` with the rest
of `HardPosTrainer`, which sets them.
"""

from __future__ import annotations

import functools
import logging
import os
import time

from ..evaluation.training_sets import BenchmarkEvalSet, as_benchmark_eval_set
from ..progress import configure as progress_lines
from ..scoring import ITMScorer
from .checkpointing import read_eval_sections
from .logit_scale import unwrap_model

logger = logging.getLogger(__name__)


class TrainerEvaluation:
    """Mixed into a `transformers.Trainer` subclass (before `Trainer`) that has ``eval_datasets`` and
    ``eval_sections``."""

    def evaluate(
        self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        """Every eval set's metrics for the current model, logged as `<prefix>_<set>[_<row>]_<metric>`.

        `eval_dataset` may be a name from `eval_datasets`, a Dataset or `BenchmarkEvalSet`, or a
        `{name: ...}` dict; by default all `eval_datasets` are evaluated. Every process scores the
        full sets, so every process holds the same metrics (`metric_for_best_model` works under DDP).
        One `ITMScorer` serves the non-hard-positive sets of this call and is dropped after it: its
        embedding cache belongs to this state of the model.
        """
        sets = self._resolve_eval_sets(eval_dataset)
        model = unwrap_model(self.model)
        was_training = model.training
        start = time.time()
        progress = not self.args.disable_tqdm and self.is_local_process_zero()
        device = str(self.args.device)
        # Built on first use, shared by this call's sets only.
        fresh_scorer = functools.cache(
            lambda: ITMScorer(model, self.processing_class, self.args.per_device_eval_batch_size,
                              device=device, progress=progress)
        )  # fmt: skip

        metrics: dict[str, float] = {}
        try:
            with progress_lines(enabled=progress):  # scoring bars: a line per update in a file
                for name, eval_set in sets.items():
                    section = eval_set.evaluate(name, fresh_scorer)
                    flat = section.flat_metrics(name, metric_key_prefix)
                    clash = sorted(set(flat) & set(metrics))
                    if clash:
                        raise ValueError(
                            f"eval set {name!r} would overwrite the logged metrics {clash} of another set"
                        )
                    metrics.update(flat)
                    if self.eval_datasets.get(name) is eval_set:
                        # Kept in the JSON form: saved in every checkpoint, read back by the model card.
                        self.eval_sections[name] = {**section.to_dict(), "step": self.state.global_step}
        finally:
            model.train(was_training)
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _resolve_eval_sets(self, eval_dataset) -> dict[str, BenchmarkEvalSet]:
        if eval_dataset is None:
            if not self.eval_datasets:
                raise ValueError("no eval sets: pass eval_datasets={name: Dataset} to HardPosTrainer")
            return self.eval_datasets
        if isinstance(eval_dataset, str):
            if eval_dataset not in self.eval_datasets:
                raise KeyError(f"unknown eval set {eval_dataset!r}; known: {sorted(self.eval_datasets)}")
            return {eval_dataset: self.eval_datasets[eval_dataset]}
        if not isinstance(eval_dataset, dict):
            eval_dataset = {"eval": eval_dataset}
        return {
            name: value if self.eval_datasets.get(name) is value else as_benchmark_eval_set(name, value)
            for name, value in eval_dataset.items()
        }

    def _load_best_model(self) -> None:
        """Load the best checkpoint, and with it that checkpoint's evaluation, which the card then reports.

        Why: the stock Trainer swaps in the best weights but the latest evaluation would stay in
        `eval_sections`, so the card would describe the last step's model, not the one saved. When the
        best checkpoint holds no eval sections for every set (written by an older version), the loaded
        model is evaluated again, so the card's numbers are always the loaded weights'.

        An override, not an `on_train_end` callback: it runs right after the Trainer loads the best
        weights and before `on_train_end` (where reporting callbacks close), since the evaluation it may
        run is logged; no callback event sits between the two.
        """
        super()._load_best_model()
        checkpoint = self.state.best_model_checkpoint
        step = self.state.best_global_step
        saved = read_eval_sections(checkpoint) or {}
        sections = {k: v for k, v in saved.items() if k in self.eval_datasets and v.get("step") == step}
        self.best_model_loaded = {
            "checkpoint": os.path.basename(os.path.normpath(checkpoint)),
            "step": step,
            "metric": self.args.metric_for_best_model,
            "value": self.state.best_metric,
            "last_step": self.state.global_step,
        }
        if set(sections) == set(self.eval_datasets):
            self.eval_sections = sections
        else:
            logger.warning("%s holds no evaluation of every eval set at step %s: evaluating the loaded model again.",
                           checkpoint, step)  # fmt: skip
            self.eval_sections = {}
            self.evaluate()
            for section in self.eval_sections.values():
                section["step"] = step  # the weights are step `step`'s, evaluated after training
        logger.info("Loaded the best checkpoint %s (step %s, %s = %s); the card reports its evaluation.",
                    checkpoint, step, self.args.metric_for_best_model, self.state.best_metric)  # fmt: skip
