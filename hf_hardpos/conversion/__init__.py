"""Conversion of open_clip / OpenAI / TSVLC-LoRA checkpoints into Hugging Face `CLIPModel` folders.

The compositionality baselines (NegCLIP, CREPE, SVLC, DAC, CE-CLIP) ship as open_clip checkpoints;
this package turns each into a Hub-ready folder the rest of `hf_hardpos` scores like any HF model,
refusing anything `CLIPModel` cannot express instead of producing a silently partial model.
"""

from importlib import import_module
from typing import Any

# Loaded on first use: `hardpos eval --help` reads `open_clip_config.ACTIVATIONS` without importing torch.
_LAZY = {
    "converted_model_dir": ".cache",
    "resolve_model": ".cache",
    "ConversionResult": ".converter",
    "convert_checkpoint": ".converter",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConversionResult", "convert_checkpoint", "converted_model_dir", "resolve_model"]
