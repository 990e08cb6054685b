"""The demo's knobs: the fine-tuning variants (paper Tables 1 and 3 in miniature) and `DemoConfig`.

Why a module of its own: the experiment (`demo`), the tiny CLIP's training runs (`tiny_training`) and
`hardpos train`'s no-argument fine-tune (`finetune`) all read the same settings, and none of them
should have to import another to get them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Variant:
    """A fine-tuning recipe: the weights of the hard-negative and hard-positive loss terms."""

    name: str
    hard_negative_weight: float
    hard_positive_weight: float


MAIN_VARIANTS = (
    Variant("contrastive", 0.0, 0.0),
    Variant("hn", 1.0, 0.0),
    Variant("hp+hn", 1.0, 1.0),
)
SWEEP_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # paper Table 3: HN weight swept, HP weight fixed at 1


def sweep_variant(weight: float) -> Variant:
    return Variant(f"hn_weight={weight:g}", weight, 1.0)


# The tiny CLIP's architecture (keyword arguments of `build_tiny_clip`).
MODEL_FIELDS = ("image_size", "patch_size", "hidden_size", "projection_dim", "num_layers")
# Settings the pretrained model depends on; a cached one is reused only when all of them match.
_PRETRAIN_FIELDS = (
    "pretrain_seed",
    "pretrain_examples",
    "pretrain_epochs",
    "pretrain_learning_rate",
    "pretrain_batch_size",
    "weight_decay",
    "warmup_ratio",
    *MODEL_FIELDS,
    "torch_threads",
)


@dataclass
class DemoConfig:
    """Every knob of the demo. The defaults are `hardpos demo`: under two minutes on 2 CPU cores.

    The budgets were set by runtime, then checked against the finding on several seed pairs at once
    (`benchmarks/demo_budgets.py`); no seed was tuned for. The pretraining *distribution* is fixed in
    `captions.AltTextStyle`, never by a fine-tuning result.
    """

    seeds: tuple[int, ...] = (0, 1)
    sweep: bool = False
    bootstrap_samples: int = 0  # > 0: bootstrap intervals over images (see `report.add_intervals`)
    pretrain_seed: int = 0
    pretrain_examples: int = 8_000
    pretrain_epochs: float = 5.0
    pretrain_learning_rate: float = 2e-3
    pretrain_batch_size: int = 128
    finetune_examples: int = 2_048
    finetune_epochs: float = 5.0  # the paper's fine-tuning recipe: 5 epochs
    finetune_learning_rate: float = 2e-3
    eval_examples: int = 300  # per eval set: REPLACE attributes, REPLACE relations, SWAP
    batch_size: int = 128
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    image_size: int = 32
    patch_size: int = 8
    hidden_size: int = 64
    projection_dim: int = 32
    num_layers: int = 2
    # Tiny matrices: one thread is as fast as two on 2 cores and leaves the other core to the data
    # pipeline; fixed so that reruns sum in the same order (determinism).
    torch_threads: int = 1
    # Batches (PNG decoding, image processing, tokenising) are built in this many worker processes,
    # in parallel with the training step on the other core; 0 = in the training process.
    dataloader_workers: int = 1
    # Fine-tunes run at a time, each in a forked process with one torch thread (`forked_runs`): None = one per
    # usable core; 1 = one after another in this process (the only choice with an accelerator). Same numbers.
    processes: int | None = None

    @classmethod
    def full(cls, seeds: tuple[int, ...] = (0, 1, 2, 3, 4)) -> DemoConfig:
        """`hardpos demo --full`: 5 seeds, the HN-weight sweep, larger eval sets, bootstrap intervals."""
        return cls(seeds=seeds, sweep=True, eval_examples=1_000, bootstrap_samples=1_000)

    @classmethod
    def quick(cls, seeds: tuple[int, ...] = (0,)) -> DemoConfig:
        """A smoke-test configuration (seconds): the same pipeline with tiny budgets, for tests."""
        return cls(
            seeds=seeds,
            pretrain_examples=256,
            pretrain_epochs=1.0,
            pretrain_batch_size=64,
            finetune_examples=64,
            finetune_epochs=1.0,
            eval_examples=48,
            batch_size=32,
            dataloader_workers=0,  # a worker process costs more than it saves on 2-step runs
        )

    def variants(self) -> list[Variant]:
        """Distinct fine-tuning runs per seed (a sweep entry equal to a main variant is not run twice)."""
        runs = list(MAIN_VARIANTS)
        if self.sweep:
            main = {(v.hard_negative_weight, v.hard_positive_weight) for v in MAIN_VARIANTS}
            runs += [sweep_variant(w) for w in SWEEP_WEIGHTS if (w, 1.0) not in main]
        return runs

    def aliases(self) -> dict[str, str]:
        """Sweep entries that are the same configuration as a main variant (name -> run name)."""
        if not self.sweep:
            return {}
        by_weights = {(v.hard_negative_weight, v.hard_positive_weight): v.name for v in MAIN_VARIANTS}
        return {sweep_variant(w).name: by_weights[(w, 1.0)] for w in SWEEP_WEIGHTS if (w, 1.0) in by_weights}

    def pretrain_settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _PRETRAIN_FIELDS}

    def schedule(self, pretraining: bool) -> tuple[float, float, int]:
        """(epochs, learning rate, batch size) of the pretraining run, or of each fine-tuning run."""
        if pretraining:
            return self.pretrain_epochs, self.pretrain_learning_rate, self.pretrain_batch_size
        return self.finetune_epochs, self.finetune_learning_rate, self.batch_size


__all__ = ["MAIN_VARIANTS", "MODEL_FIELDS", "SWEEP_WEIGHTS", "DemoConfig", "Variant", "sweep_variant"]
