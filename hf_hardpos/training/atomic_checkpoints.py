"""Checkpoints written atomically, with the run's extras inside: the `transformers.Trainer` overrides
that stage a checkpoint, add the loss state and eval sections (`checkpointing.save_extras`), rename it
once complete and only then push it.

Why a mixin of its own: these three overrides share one piece of state, the staging folder of the
checkpoint being written, and nothing else of `HardPosTrainer`'s beyond the two extras it saves
(``objective``, ``eval_sections``), which the trainer using it sets.
"""

from __future__ import annotations

import os
import shutil

from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from .checkpointing import (
    final_checkpoint_path,
    publish_staged,
    save_extras,
    staging_folder,
)
from .model_card import MODEL_CARD_NAME


class AtomicCheckpoints:
    """Mixed into a `transformers.Trainer` subclass (before `Trainer`) that has ``objective`` and ``eval_sections``."""

    _staging_dir: str | None = None  # set while a checkpoint is being written
    _pending_push: str | None = None  # a push that waits for the checkpoint's final name

    def _save_checkpoint(self, model, trial) -> None:
        """Write `checkpoint-N` atomically, with the loss state and the eval sections beside the Trainer's files.

        The Trainer writes into `_incomplete-checkpoint-N/` (`_get_output_dir` points there meanwhile),
        which is renamed once every part is there: a kill during the save leaves only the `_incomplete-`
        folder, which neither a resume nor `get_last_checkpoint` picks. Every process writes its RNG
        state before the rename.

        An override, not an `on_save` callback: `on_save` runs after the Trainer has written the folder
        under its final name, and the staging must begin before its first file.
        """
        run_dir = self._get_output_dir(trial=trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging = staging_folder(run_dir, name)
        if self.args.should_save and os.path.isdir(staging):
            shutil.rmtree(staging)  # left by an earlier interrupted save of this step
        self.accelerator.wait_for_everyone()
        self._staging_dir = staging
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging_dir = None
        self.accelerator.wait_for_everyone()
        final = os.path.join(run_dir, name)
        # The Trainer recorded this checkpoint as the best one under its staging path, in memory and in
        # the staged trainer_state.json: both must name the final folder, or a resume drops the best
        # checkpoint (it does not exist) and rotation deletes it.
        staged_best = self.state.best_model_checkpoint
        self.state.best_model_checkpoint = final_checkpoint_path(staged_best)
        if self.args.should_save:
            staged = os.path.join(staging, name)
            save_extras(
                staged, self.objective, self.eval_sections, training_state=not self.args.save_only_model
            )
            if staged_best != self.state.best_model_checkpoint:
                self.state.save_to_json(os.path.join(staged, TRAINER_STATE_NAME))
            publish_staged(run_dir, name)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )
        self.accelerator.wait_for_everyone()
        if self._pending_push is not None:
            self._pending_push = None
            self._push_from_checkpoint(final)

    def _get_output_dir(self, trial) -> str:
        """While a checkpoint is being written, the Trainer's run folder is the staging folder.

        An override: the Trainer's `_save_checkpoint` takes the checkpoint's parent folder from here,
        not from an argument.
        """
        return self._staging_dir if self._staging_dir is not None else super()._get_output_dir(trial)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Mid-training pushes upload `output_dir`; give it the checkpoint's card (the Trainer copies weights only).

        During an atomic save the push waits until the checkpoint has its final name. An override: the
        Trainer pushes from inside its `_save_checkpoint`, i.e. from the staging folder, which is renamed
        while the upload (run in the background) still reads it; no callback event precedes that push.
        """
        if self._staging_dir is not None:
            self._pending_push = checkpoint_folder
            return
        card = os.path.join(checkpoint_folder, MODEL_CARD_NAME)
        if self.is_world_process_zero() and os.path.isfile(card):
            shutil.copy(card, os.path.join(self.args.output_dir, MODEL_CARD_NAME))
        super()._push_from_checkpoint(checkpoint_folder)
