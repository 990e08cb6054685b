"""A cache of converted models, so `hardpos eval --model PATH.pt` converts a checkpoint once.

Keyed by the checkpoint's SHA-256 (content, not path: a file replaced in place is a different
model) and every option that changes the converted weights or config (the resolved architecture,
activation, LoRA rank/alpha, tokenizer). A folder counts as complete only once its
`conversion.json` exists; conversions write to a temporary sibling and rename it into place.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..provenance import digest_of, sha256_file
from .converter import convert_checkpoint
from .lora import TSVLC_ALPHA, TSVLC_RANK
from .open_clip_config import (
    OpenClipConfig,
    config_from_openai_state_dict,
    load_open_clip_config,
)
from .record import MARKER

# File names that are surely checkpoints: a missing one is reported as a missing file, not as a Hub id.
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".safetensors")


def default_cache_dir() -> Path:
    """`$HARDPOS_CONVERTED_CACHE`, else `<HF_HOME>/hf_hardpos/converted`."""
    if os.environ.get("HARDPOS_CONVERTED_CACHE"):
        return Path(os.environ["HARDPOS_CONVERTED_CACHE"])
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "hf_hardpos" / "converted"


def _require_config_unless_openai(checkpoint: Path) -> None:
    """Only OpenAI archives carry enough to infer the config; refuse any other file without one.

    Decided from the zip's listing: no need to load the weights to refuse.
    """
    from .state_dict import is_torchscript

    if not is_torchscript(checkpoint):
        from ..errors import UserInputError

        raise UserInputError(
            f"checkpoint {checkpoint}: an open_clip config is required (attention heads and the activation cannot "
            "be read from the weights): open_clip_config= / --open-clip-config NAME_OR_JSON, e.g. ViT-B-32"
        )


def _resolve_config(checkpoint: Path, open_clip_config) -> OpenClipConfig:
    if open_clip_config is None:
        from .state_dict import load_state_dict

        _require_config_unless_openai(checkpoint)
        state, _ = load_state_dict(checkpoint)
        return config_from_openai_state_dict(state)
    if isinstance(open_clip_config, OpenClipConfig):
        return open_clip_config
    return load_open_clip_config(open_clip_config)


def resolve_model(
    model: str | Path,
    open_clip_config: str | Path | dict | None = None,
    activation: str | None = None,
    tokenizer: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> str:
    """What `from_pretrained` should load for `--model`: a checkpoint *file* is converted (cached), else unchanged.

    The transformers backend's `resolve` (`hf_hardpos.backends.hf`). For `hardpos eval --model X
    [--open-clip-config C] [--activation A] [--tokenizer T]` and
    `evaluate_model(..., open_clip_config=, activation=, tokenizer=)`: a Hugging Face folder or Hub
    id passes through (then the conversion options must not be given: they would be silently
    ignored); a file is an open_clip / OpenAI / TSVLC checkpoint, converted once. Call it once per
    activation for `--activation both`. The returned folder's `conversion.json` names the
    checkpoint's SHA-256 and the activation, which the hf backend's identity records with every score
    (`record.converted_from`); pass it wherever a Hugging Face model folder is accepted.

    A checkpoint is converted as `convert_checkpoint` does, with TSVLC's LoRA settings and without
    the numerical check against open_clip (the evaluation path seldom has open_clip; `hardpos
    convert` runs it). Converted folders live under `cache_dir` (default `default_cache_dir()`),
    named `<sha256[:16]>-<options digest[:12]>`; delete one to force a fresh conversion.
    """
    if not check_model_options(model, open_clip_config, activation, tokenizer):
        return str(model)
    checkpoint = Path(model).expanduser()
    config = _resolve_config(checkpoint, open_clip_config)
    digest = sha256_file(checkpoint, progress)
    options = {
        "config": {k: v for k, v in config.to_dict().items() if k != "source"},
        "activation": activation or config.activation,
        "lora": [TSVLC_RANK, TSVLC_ALPHA],
        "tokenizer": str(tokenizer) if tokenizer is not None else None,
    }
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / f"{digest[:16]}-{digest_of(options)[:12]}"
    if not (target / MARKER).is_file():
        partial = root / f".{target.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        try:
            convert_checkpoint(
                # The user's `activation` (None: the config's), so conversion.json and the card say where it came from.
                checkpoint,
                partial,
                open_clip_config=config,
                activation=activation,
                tokenizer=tokenizer,
                verify=False,
                sha256=digest,
                progress=progress,
            )
            shutil.rmtree(target, ignore_errors=True)  # an incomplete folder left by a crash
            try:
                os.replace(partial, target)
            except OSError:
                if not (target / MARKER).is_file():  # another process finished first: use its folder
                    raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return str(target)


def check_model_options(
    model: str | Path,
    open_clip_config: str | Path | dict | None,
    activation: str | None,
    tokenizer: str | Path | None,
) -> bool:
    """Whether `model` is a checkpoint file to convert; refuses options that cannot apply, without converting.

    Cheap (no weights are read), so `hardpos eval` runs it before loading any data: a missing
    checkpoint, conversion options given for a Hugging Face model, or an open_clip file without a
    config fail in seconds, not after the dataset was prepared.
    """
    from ..errors import UserInputError

    path = Path(model).expanduser()
    if path.is_file():
        if open_clip_config is None:
            _require_config_unless_openai(path)
        return True
    given = [
        name
        for name, value in (
            ("--open-clip-config", open_clip_config),
            ("--activation", activation),
            ("--tokenizer", tokenizer),
        )
        if value is not None
    ]
    if not path.exists() and path.suffix in CHECKPOINT_SUFFIXES:  # else it would be looked up as a Hub id
        raise UserInputError(f"checkpoint {model}: no such file")
    if given:
        verb = "apply" if len(given) > 1 else "applies"
        raise UserInputError(
            f"--model {model} is not a checkpoint file: {', '.join(given)} {verb} only to open_clip / OpenAI "
            "checkpoints (a Hugging Face model's activation is in its config.json, its tokenizer in its folder)"
        )
    return False
