"""`TrainingArguments` plus what hard-positive fine-tuning adds: loss weights, column names, LoRA.

Why a subclass rather than a second dataclass: one object then carries the whole recipe, so it is
saved into every checkpoint (`training_args.bin`), diffed against the defaults for the model card,
and parsed from the CLI or one JSON/YAML file by `HfArgumentParser` like any other Trainer option.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from transformers import TrainingArguments

from .. import columns
from ..errors import UserInputError
from .data_collator import SAMPLING_MODES
from .losses import registry
from .losses.registry import LossArguments
from .options import describe_choices, one_of

DEFAULT_LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "out_proj")
# `--dataloader_num_workers` value meaning "as many as this machine gives this process" (the recipes' choice).
AUTO_WORKERS = -1


def _choice(default: str, choices: dict[str, str], what: str):
    """A string option whose `--help` says what each choice does and whose command-line parsing knows
    them (HfArgumentParser reads `choices` from the field's metadata)."""
    return field(
        default=default, metadata={"help": describe_choices(what, choices), "choices": list(choices)}
    )


def _accelerator_present() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


# Every loss term's weight and options (`--hard_negative_weight`, `--imc_form`, ...), as fields the terms
# declare (`losses.registry.LossArguments`). A base listed before TrainingArguments: its fields come after
# the Trainer's in `--help`, as the fields below do.
@dataclass
class HardPosTrainingArguments(LossArguments, TrainingArguments):
    """Trainer options for `HardPosTrainer`; every field below, and every loss term's weight and options
    (`LossArguments`), can be given as `--<name>` on the CLI."""

    _argument_group_name = "training (transformers.TrainingArguments)"  # HfArgumentParser's --help group

    # No option takes a Hub token: on a command line it is readable by every user of the machine
    # (/proc/<pid>/cmdline). huggingface_hub resolves it from HF_TOKEN or the stored login instead;
    # init=False keeps `--hub_token` out of HfArgumentParser and out of the saved arguments.
    hub_token: str | None = field(default=None, init=False, repr=False)

    # The Trainer's option, with one more value: a recipe cannot know the machine it runs on, and a loader
    # short of workers starves the GPU (decode + crop + normalise cost ~10 ms of CPU per COCO image:
    # benchmarks/train_loader.py measures the loader against the step).
    dataloader_num_workers: int = field(
        default=0,
        metadata={
            "help": f"DataLoader worker processes; {AUTO_WORKERS}: the CPU cores this process may use, "
            "shared among the processes launched on this machine (LOCAL_WORLD_SIZE), at most 16"
        },
    )

    # The Trainer's option, defaulting to where it helps: torch warns when memory is pinned on a machine without
    # an accelerator (every CPU-only run, the Python API's included), and pinning for use_cpu only costs time.
    dataloader_pin_memory: bool | None = field(
        default=None,
        metadata={
            "help": "Pin the batches' memory for the copy to the accelerator. Default: when an accelerator "
            "is present and use_cpu is off."
        },
    )

    # --- loss: L = L_clip + the registered terms' weights (`LossArguments`, docs/reference.md, Losses) ---
    hard_example_sampling: str = _choice(
        "all", SAMPLING_MODES, "Which of a row's hard positives and hard negatives enter the batch"
    )
    contrastive_hard_negatives: bool | None = field(
        default=None,
        metadata={
            "help": "Add the hard negatives as extra image->text columns of the contrastive (CLIP) term. "
            "Default: on exactly when another term reads hard negatives, so an HN-weight-0 run sees none. "
            "NegCLIP and CE-CLIP train with it on."
        },
    )
    gather_across_processes: bool = field(
        default=True,
        metadata={
            "help": "Under data parallelism, gather features from every process (with gradient) so the "
            "contrastive negatives are the global batch rather than the local shard."
        },
    )

    # --- columns (defaults: the fine-tuning schema of hf_hardpos.columns) ---
    image_column: str = field(default=columns.IMAGE, metadata={"help": "Column holding the image."})
    caption_column: str = field(
        default=columns.CAPTION, metadata={"help": "Column holding the true caption c."}
    )
    positive_columns: list[str] = field(
        default_factory=lambda: list(columns.FINETUNE_POSITIVE_COLUMNS),
        metadata={
            "help": "Hard-positive columns (nullable: a null is masked out of the hard-positive terms)."
        },
    )
    negative_columns: list[str] = field(
        default_factory=lambda: list(columns.FINETUNE_NEGATIVE_COLUMNS),
        metadata={
            "help": "Hard-negative columns (nullable). Each column is one hard-negative type with its own "
            "CMR threshold."
        },
    )

    # --- training-image augmentation ---
    train_crop_scale: list[float] | None = field(
        default=None,
        metadata={
            "help": "RandomResizedCrop of training images (bicubic, aspect ratio 3/4..4/3) with this area "
            "range, e.g. 0.9 1.0 as SVLC/NegCLIP/CE-CLIP. Default: none (the processor's resize and centre crop)."
        },
    )

    # --- LoRA (peft) on both towers ---
    use_lora: bool = field(
        default=False,
        metadata={
            "help": "Train LoRA adapters instead of all weights; checkpoints then hold the adapter only."
        },
    )
    lora_r: int = field(
        default=16, metadata={"help": "LoRA rank.", "aliases": ["--lora-rank"]}
    )  # as `hardpos convert`
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (the update is scaled by alpha / r)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA branch."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: list(DEFAULT_LORA_TARGET_MODULES),
        metadata={
            "help": "Module names LoRA wraps; the default hits the attention projections of both the "
            "vision and the text tower. Each entry is a module name (matched at the end of the full name), "
            "also when only one is given."
        },
    )

    model_card_template: str | None = field(
        default=None,
        metadata={"help": "A Jinja model-card template to use instead of the packaged one."},
    )

    def __post_init__(self):
        # The collator needs the image and every caption column; the Trainer would otherwise drop
        # them because CLIPModel.forward does not name them (docs/reference.md, Installation notes).
        self.remove_unused_columns = False
        if self.dataloader_pin_memory is None:
            self.dataloader_pin_memory = not self.use_cpu and _accelerator_present()
        if self.dataloader_num_workers == AUTO_WORKERS:
            from ..compute import default_num_workers

            self.dataloader_num_workers = default_num_workers()
        elif self.dataloader_num_workers < 0:
            raise UserInputError(
                f"dataloader_num_workers must be >= 0 or {AUTO_WORKERS} (auto), got "
                f"{self.dataloader_num_workers}"
            )
        super().__post_init__()
        # HfArgumentParser checks the choices on the command line; this checks them from Python too.
        one_of("hard_example_sampling", self.hard_example_sampling, SAMPLING_MODES, UserInputError)
        settings = registry.settings_of(self)
        registry.check_settings(settings, UserInputError)
        reads = registry.inputs_read(settings)
        if self.hard_example_sampling == "one_per_row" and registry.TYPED_NEGATIVES in reads:
            raise UserInputError(
                "hard_example_sampling='one_per_row' leaves one untyped hard negative per row, but the term of "
                f"{', '.join(registry.weights_reading(settings, registry.TYPED_NEGATIVES))} > 0 keeps a statistic "
                "per negative column (CMR's thresholds): use hard_example_sampling='all' with it"
            )
        contrastive_negatives = registry.contrastive_reads_negatives(
            settings, self.contrastive_hard_negatives
        )
        if not self.negative_columns and (registry.HARD_NEGATIVES in reads or contrastive_negatives):
            raise UserInputError("negative_columns is empty, but a hard-negative loss has a non-zero weight")
        if not self.positive_columns and registry.HARD_POSITIVES in reads:
            weights = ", ".join(registry.weights_reading(settings, registry.HARD_POSITIVES))
            raise UserInputError(f"positive_columns is empty, but {weights} is non-zero")
        if self.lora_r < 1:
            raise UserInputError(f"lora_r must be >= 1, got {self.lora_r}")
        if self.train_crop_scale is not None and len(self.train_crop_scale) != 2:
            raise UserInputError(
                f"train_crop_scale takes two numbers (low high), got {self.train_crop_scale}"
            )

    def inert_options(self) -> dict[str, str]:
        """Options set away from their default that have no effect with the other options chosen:
        `{option name: "<option>=<value> has no effect ..."}`, the message saying why.

        Why: `--save_steps 500` under `save_strategy=epoch` (or `--lora_r` without `--use_lora`) is
        silently ignored by the Trainer; a run should say so rather than let the user believe it.
        """
        defaults = {
            f.name: f.default for f in dataclasses.fields(self) if f.default is not dataclasses.MISSING
        }

        def changed(name: str) -> bool:
            return getattr(self, name) != defaults[name]

        found: dict[str, str] = {}
        for kind in ("save", "eval", "logging"):
            strategy = getattr(self, f"{kind}_strategy")
            strategy = getattr(strategy, "value", strategy)
            steps = f"{kind}_steps"
            value = getattr(self, steps)
            if value is not None and changed(steps) and strategy != "steps":
                found[steps] = f"{steps}={value:g} has no effect under {kind}_strategy={strategy!r}"
        if self.max_steps > 0 and changed("num_train_epochs"):
            found["num_train_epochs"] = (
                f"num_train_epochs={self.num_train_epochs:g} has no effect: max_steps={self.max_steps} sets the length"
            )
        if not self.use_lora:
            found.update(
                (name, f"{name}={getattr(self, name)} has no effect without use_lora")
                for name in ("lora_r", "lora_alpha", "lora_dropout")
                if changed(name)
            )
        found.update(registry.inert_options(registry.settings_of(self)))
        return found
