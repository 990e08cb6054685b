"""Conversion of open_clip / OpenAI / TSVLC-LoRA checkpoints into Hugging Face `CLIPModel` folders.

The compositionality baselines (NegCLIP, CREPE, SVLC, DAC, CE-CLIP) ship as open_clip checkpoints;
this package turns each into a Hub-ready folder the rest of `hf_hardpos` scores like any HF model,
refusing anything `CLIPModel` cannot express instead of producing a silently partial model.
"""

from .cache import converted_model_dir, resolve_model
from .converter import ConversionResult, convert_checkpoint

__all__ = ["ConversionResult", "convert_checkpoint", "converted_model_dir", "resolve_model"]
