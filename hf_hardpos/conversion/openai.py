"""OpenAI's released CLIP files: TorchScript archives with fp16 weights and three scalar entries.

Loaded with `torch.jit.load` (no `clip` package needed); only the state dict is kept. OpenAI's
archives hold no config, so the architecture comes from shapes with OpenAI's head width of 64
(`config_from_openai_state_dict`) unless `--config` says otherwise.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import UserInputError


def load_torchscript_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The archive's weights cast to float32, without `input_resolution`/`context_length`/`vocab_size`.

    The scalars are checked against the weights they describe before being dropped, so an archive
    whose metadata contradicts its tensors is refused rather than converted.
    """
    try:
        archive = torch.jit.load(str(path), map_location="cpu")
    except RuntimeError as err:
        raise UserInputError(f"checkpoint {path}: not a loadable TorchScript archive: {err}") from err
    state = dict(archive.state_dict())
    scalars = {k: int(state.pop(k)) for k in ("input_resolution", "context_length", "vocab_size") if k in state}
    state = {k: v for k, v in state.items() if k.split(".")[-1] != "attn_mask"}  # a buffer, not a weight
    checks = {
        "context_length": lambda: state["positional_embedding"].shape[0],
        "vocab_size": lambda: state["token_embedding.weight"].shape[0],
        "input_resolution": lambda: state["visual.conv1.weight"].shape[-1]
        * round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5),
    }
    for key, value in scalars.items():
        try:
            actual = int(checks[key]())
        except KeyError as err:
            raise UserInputError(f"checkpoint {path}: TorchScript archive lacks weight {err.args[0]!r}") from err
        if actual != value:
            raise UserInputError(f"checkpoint {path}: the archive's {key}={value} contradicts its weights ({actual})")
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
