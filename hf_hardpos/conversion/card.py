"""The model card of a converted model: the facts of the conversion, not boilerplate.

Rendered from `converted_model_card.md` (beside this module) with the `ConversionResult`: source file and
SHA-256, the architecture, the activation used and why, the LoRA merge, the tokenizer, and the
numerical check against open_clip (or why it was not run).
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from .. import citations
from ..backends.open_clip import OpenClipBackend

TEMPLATE = Path(__file__).resolve().parent / "converted_model_card.md"


def converted_model_card(result, repo_id: str | None = None) -> ModelCard:
    """A `ModelCard` for `result` (a `ConversionResult`); `repo_id` is where it will be pushed."""
    from .presets import get_preset

    preset = get_preset(result.preset) if result.preset else None
    keys = [OpenClipBackend.citation, citations.CLIP, citations.HARD_POSITIVES]
    if preset is not None and preset.citation not in keys:
        keys.insert(0, preset.citation)
    name = repo_id.split("/")[-1] if repo_id else (preset.row if preset else Path(result.checkpoint).stem)
    data = ModelCardData(
        model_name=name,
        library_name="transformers",
        pipeline_tag="zero-shot-image-classification",
        tags=["clip", "open_clip", "converted", "hf_hardpos"] + (["lora-merged"] if result.lora else []),
    )
    # The template reads every field of the result by its name; `preset` is the preset itself, not its name.
    fields = {**vars(result), "preset": preset}
    return ModelCard.from_template(
        data,
        template_path=str(TEMPLATE),
        model_name=name,
        repo_id=repo_id or "<this folder>",
        citation=citations.cite(*keys),
        **fields,
    )
