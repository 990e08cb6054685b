"""The start model of the no-argument fine-tune: the demo's tiny CLIP, pretrained on the synthetic world.

Why the demo's: a fine-tune from random weights ends below chance and shows nothing; the demo's pretrained
model (contrastive pretraining on alt-text-like captions, `hf_hardpos.synthetic.demo`) is weak on
compositional distinctions the way public CLIP checkpoints are, which is what hard positives and hard
negatives are meant to fix. The demo's own pretraining step builds it (same data, settings and cache key),
once per setting, into `HF_HOME/hardpos/synthetic-pretrained/<settings digest>/`: never into the run's
output folder, which holds only what the run produced.

It is trained in a child process (`python -m hf_hardpos.training.start_model`) without the launcher's
distributed and accelerate variables: under `torchrun` / `accelerate launch` a Trainer started inside a
rank would join that rank's process group and wait for the others, and mixed-precision or device settings
meant for the fine-tune would change the cached model. The main process trains it while the others wait;
a file lock keeps two runs from building it at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

from ..errors import UserInputError

logger = logging.getLogger(__name__)

__all__ = ["cache_dir", "demo_config", "start_model"]

CACHE = ("hardpos", "synthetic-pretrained")  # under HF_HOME
# What a launcher sets for the processes it starts; a child process that trains alone must not see it.
_LAUNCHER_VARIABLES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                       "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"}  # fmt: skip
_LAUNCHER_PREFIXES = ("TORCHELASTIC_", "ACCELERATE_")


def demo_config(examples: int | None = None, epochs: float | None = None):
    """The demo's `DemoConfig`, with a smaller pretraining budget where one is given (tests, smoke runs)."""
    from ..synthetic.demo import DemoConfig

    budget = {"pretrain_examples": examples, "pretrain_epochs": epochs}
    return dataclasses.replace(DemoConfig(), **{k: v for k, v in budget.items() if v is not None})


def cache_dir(config) -> Path:
    """Where the pretrained model of `config` is cached: one folder per pretraining setting, so a quick
    test model never replaces the demo's."""
    from huggingface_hub import constants

    from ..provenance import digest_of

    return Path(constants.HF_HOME).joinpath(*CACHE, digest_of(config.pretrain_settings()))


def start_model(training_args, examples: int | None = None, epochs: float | None = None) -> str:
    """The folder of the demo's pretrained tiny CLIP, trained first (in a child process) when not cached."""
    from filelock import FileLock

    from ..synthetic.demo import PRETRAINED

    config = demo_config(examples, epochs)
    models_dir = cache_dir(config)
    models_dir.mkdir(parents=True, exist_ok=True)
    logger.info("start model: the demo's pretrained tiny CLIP (%d pairs, %g epochs), from the cache %s or trained "
                "into it first", config.pretrain_examples, config.pretrain_epochs, models_dir)  # fmt: skip
    with training_args.main_process_first(desc="pretraining the tiny CLIP"), FileLock(str(models_dir) + ".lock"):
        command = [sys.executable, "-m", __name__, str(models_dir), "--examples", str(config.pretrain_examples),
                   "--epochs", str(config.pretrain_epochs)] + (["--no-progress"] if training_args.disable_tqdm else [])  # fmt: skip
        environment = {name: value for name, value in os.environ.items()
                       if name not in _LAUNCHER_VARIABLES and not name.startswith(_LAUNCHER_PREFIXES)}  # fmt: skip
        if subprocess.run(command, env=environment).returncode != 0:
            raise UserInputError(f"pretraining the start model into {models_dir} failed (see above); "
                                 "or give --model_name_or_path")  # fmt: skip
    return str(models_dir / PRETRAINED)


def _pretrain(models_dir: Path, examples: int, epochs: float, bars: bool) -> None:
    """Reuse or train the demo's pretrained model in `models_dir`, as `run_demo` runs its pretraining step."""
    from .. import progress
    from ..synthetic import demo

    config = demo_config(examples, epochs)
    with progress.configure(enabled=bars), demo._torch_threads(config.torch_threads), demo._quiet_libraries():
        folder, reused = demo._pretrained_model(models_dir, config, bars, logger.info)
    logger.info("start model: %s %s", "reused" if reused else "trained and cached", folder)


if __name__ == "__main__":
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description="Train (or reuse) the demo's pretrained tiny CLIP in a folder.")
    parser.add_argument("models_dir", type=Path)
    parser.add_argument("--examples", type=int, required=True)
    parser.add_argument("--epochs", type=float, required=True)
    parser.add_argument("--no-progress", dest="bars", action="store_false")
    options = parser.parse_args()
    _pretrain(options.models_dir, options.examples, options.epochs, options.bars)
