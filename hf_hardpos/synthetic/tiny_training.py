"""How the demo trains its tiny CLIP: the pretrained start model (built once, cached by its settings) and
one fine-tune per variant, with `HardPosTrainer` like any user's run.

Why a module of its own: `hardpos demo` (`demo`) and `hardpos train`'s no-argument fine-tune (`finetune`)
must train the same model the same way — the second reproduces the first's hp+hn run to the digit —
so both call these functions rather than each holding a copy.
"""

from __future__ import annotations

import json
import os
import platform
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from transformers import ProgressCallback

from hf_hardpos.synthetic import world
from hf_hardpos.synthetic.config import MODEL_FIELDS, DemoConfig, Variant
from hf_hardpos.synthetic.stage_log import StageLog, TrainingLines
from hf_hardpos.training.log_lines import LogLinesCallback

PRETRAINED = "pretrained"
PRETRAIN_KEY_FILE = "pretrain_key.json"
# The modules whose source decides what the pretrained model sees and is (`world_digest`).
_WORLD_MODULES = ("captions", "lexicon", "scene", "tiny_clip", "world")


def pretrained_model(
    models_dir: Path, config: DemoConfig, progress: bool, log: StageLog, second_half: Future | None = None
) -> tuple[Path, bool]:
    """The pretrained tiny CLIP: reused from `models_dir` when its key matches, else built and trained.

    `second_half`: the pretraining rows from `pretrain_examples // 2` on, being rendered elsewhere
    (`forked_runs.background`) while this process renders the first half.
    """
    from hf_hardpos.provenance import digest_of

    if (folder := cached_pretrained(models_dir, config)) is not None:
        return folder, True
    half = config.pretrain_examples // 2 if second_half is not None else config.pretrain_examples
    dataset = world.render_rows("pretrain", half, config.pretrain_seed, image_size=config.image_size)
    if second_half is not None:
        dataset = world.RenderedRows(dataset.column_names, dataset.rows + second_half.result().rows)
    log(
        f"[pretrain] {len(dataset)} image / alt-text pairs, {config.pretrain_epochs:g} epochs, batch {config.pretrain_batch_size}"
    )
    _pretrain(models_dir, dataset, config, progress, log)
    key = _pretrain_key(config)
    (models_dir / PRETRAINED / PRETRAIN_KEY_FILE).write_text(
        json.dumps({"digest": digest_of(key), **key}, indent=2) + "\n"
    )
    return models_dir / PRETRAINED, False


def _pretrain_key(config: DemoConfig) -> dict[str, Any]:
    """Every pretraining setting and the versions the weights depend on, so a cached model is never reused
    across settings that would have trained a different one."""
    return {"settings": config.pretrain_settings(), "world": world_digest(), "environment": environment()}


def cached_pretrained(models_dir: Path, config: DemoConfig) -> Path | None:
    """The pretrained model's folder under `models_dir` when its key matches `config`'s, else None."""
    from hf_hardpos.provenance import digest_of

    folder = models_dir / PRETRAINED
    key_file = folder / PRETRAIN_KEY_FILE
    if key_file.is_file() and (folder / "model.safetensors").is_file():
        try:
            if json.loads(key_file.read_text())["digest"] == digest_of(_pretrain_key(config)):
                return folder
        except (ValueError, KeyError):
            pass  # an unreadable key file: train again and overwrite it
    return None


def world_digest() -> str:
    """sha256 over the source of the synthetic world and the tiny CLIP: a cached pretrained model is reused
    only while the scenes, captions and architecture that trained it are unchanged."""
    from hf_hardpos.provenance import sha256_files

    folder = Path(__file__).parent
    return sha256_files(sorted(folder / f"{name}.py" for name in _WORLD_MODULES), root=folder)


def _pretrain(models_dir: Path, dataset, config: DemoConfig, progress: bool, log: StageLog) -> None:
    """Build the tiny CLIP and train it with the CLIP loss only; save it as a Hub-style folder."""
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
    from hf_hardpos.synthetic.world import tokenizer_corpus

    architecture = {name: getattr(config, name) for name in MODEL_FIELDS}
    init_dir = build_tiny_clip(
        models_dir / "init", tokenizer_corpus(), seed=config.pretrain_seed, **architecture
    )
    variant = Variant(PRETRAINED, 0.0, 0.0)
    train_variant(
        *load_model(init_dir),
        dataset,
        variant,
        config.pretrain_seed,
        models_dir / PRETRAINED,
        config,
        progress,
        log,
    )


def train_variant(
    model,
    processor,
    dataset,
    variant: Variant,
    seed: int,
    output_dir: Path,
    config: DemoConfig,
    progress: bool,
    log: StageLog,
):
    """Train `model` with `variant`'s loss weights (the pretraining is the variant named `PRETRAINED`),
    save it to `output_dir` and return it."""
    trainer = variant_trainer(
        model, processor, dataset, variant, seed, output_dir, config, progress=progress, log=log
    )
    trainer.train()
    trainer.save_model(str(output_dir))
    return trainer.model


def variant_trainer(
    model,
    processor,
    dataset,
    variant: Variant,
    seed: int,
    output_dir: Path,
    config: DemoConfig,
    *,
    progress: bool,
    log: StageLog,
    card_data: Any = None,
    **overrides: Any,
):
    """The `HardPosTrainer` of one demo run: `variant`'s loss weights and `config`'s schedule, only the caption
    columns the variant's loss reads batched. Off a terminal, `log` gets the step and loss every few seconds
    (`TrainingLines`). `overrides`: Trainer options that do not change what is trained (saving checkpoints)."""
    from hf_hardpos import columns
    from hf_hardpos.training import HardPosTrainer, HardPosTrainingArguments

    epochs, learning_rate, batch_size = config.schedule(variant.name == PRETRAINED)
    uses_negatives = variant.hard_negative_weight > 0
    uses_positives = variant.hard_positive_weight > 0
    settings: dict[str, Any] = dict(
        output_dir=str(output_dir),
        hard_negative_weight=variant.hard_negative_weight,
        hard_positive_weight=variant.hard_positive_weight,
        positive_columns=list(columns.FINETUNE_POSITIVE_COLUMNS) if uses_positives else [],
        negative_columns=list(columns.FINETUNE_NEGATIVE_COLUMNS) if uses_negatives else [],
        per_device_train_batch_size=batch_size,
        num_train_epochs=epochs,
        learning_rate=learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_ratio,
        lr_scheduler_type="cosine",
        seed=seed,
        save_strategy="no",
        report_to="none",
        logging_steps=0.25,
        disable_tqdm=not progress,
        dataloader_num_workers=config.dataloader_workers,
        dataloader_persistent_workers=config.dataloader_workers > 0,
    )
    args = HardPosTrainingArguments(**{**settings, **overrides})
    trainer = HardPosTrainer(model=model, args=args, train_dataset=dataset, processor=processor,
                             model_card_data=card_data)  # fmt: skip
    # The demo prints one line per run and its own step lines (`TrainingLines`, on the stage log's clock); the
    # trainer's log lines would print every step and log entry a second time.
    trainer.remove_callback(LogLinesCallback)
    label = "pretrain" if variant.name == PRETRAINED else f"fine-tune seed {seed} {variant.name}"
    trainer.add_callback(TrainingLines(log, label))
    if progress:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(_BarOnlyProgressCallback())
    return trainer


class _BarOnlyProgressCallback(ProgressCallback):
    """The Trainer's progress bar without its printed log dicts (the loss terms stay in `log_history`)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


def load_model(folder: Path):
    from transformers import CLIPModel, CLIPProcessor

    return (
        CLIPModel.from_pretrained(folder, trust_remote_code=False),
        CLIPProcessor.from_pretrained(folder, trust_remote_code=False),
    )


def environment() -> dict[str, Any]:
    """Versions and thread settings the numbers depend on (recorded in run_info.json and the cache key)."""
    import torch

    from hf_hardpos import provenance

    return {
        **provenance.environment("numpy", "pillow", "tokenizers", "accelerate"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }


__all__ = [
    "PRETRAINED", "PRETRAIN_KEY_FILE", "cached_pretrained", "environment", "load_model", "pretrained_model",
    "train_variant", "variant_trainer", "world_digest",
]  # fmt: skip
