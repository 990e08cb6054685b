"""Conversion of open_clip / OpenAI / TSVLC-LoRA checkpoints into Hugging Face `CLIPModel` folders.

The compositionality baselines (NegCLIP, CREPE, SVLC, DAC, CE-CLIP) ship as open_clip checkpoints;
this package turns each into a Hub-ready folder the rest of `hf_hardpos` scores like any HF model,
refusing anything `CLIPModel` cannot express instead of producing a silently partial model.
"""

from typing import TYPE_CHECKING

from hf_hardpos.lazy import lazy_exports

# Loaded on first use: `hardpos eval --help` reads `open_clip_config.ACTIVATIONS` without importing torch.
# What type checkers and IDEs resolve (`X as X`: an explicit re-export); at run time the names load lazily.
if TYPE_CHECKING:
    from .cache import resolve_model as resolve_model
    from .converter import ConversionResult as ConversionResult
    from .converter import convert_checkpoint as convert_checkpoint

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "resolve_model": ".cache",
        "ConversionResult": ".converter",
        "convert_checkpoint": ".converter",
    },
)
