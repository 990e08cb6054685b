"""`hardpos zoo`: the systems of the paper's Table 1 (plus CE-CLIP and CLIP-COCO) and how to convert each.

Facts from docs/checkpoints.md (read from each project's public code; the files themselves were not
inspected). The column that matters most is the activation: the open_clip baselines were trained
with QuickGELU, but the paper loaded them with open_clip's plain `ViT-B-32` config, i.e. GELU, so
its numbers for those rows are those of the GELU model. A preset converts with the paper's
activation (to reproduce Table 1); `--activation quick_gelu` gives the model as trained.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import citations
from ..errors import UserInputError
from .lora import TSVLC_ALPHA, TSVLC_RANK

NO_PUBLIC_RELEASE = "no public release"


@dataclass(frozen=True)
class Preset:
    name: str
    row: str  # the system as the paper's Table 1 names it
    weights: str  # where the weights are published, or NO_PUBLIC_RELEASE
    file_format: str
    open_clip_config: str
    trained_activation: str  # "quick_gelu", "gelu" or "unknown"
    paper_activation: str  # what the paper's evaluation code built (docs/checkpoints.md)
    lora: tuple[int, float] | None  # (rank, alpha) of unmerged LoRA, TSVLC's layout
    citation: str  # a key of hf_hardpos.citations.BIBTEX
    license: str
    note: str = ""


_OPENAI_TRAINED = "quick_gelu"
_UNLICENSED = "no license file in the code repository; ask the authors"
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "clip", "CLIP ViT-B/32",
            "Hub openai/clip-vit-base-patch32 (already HF format; OpenAI's ViT-B-32.pt converts too)",
            "HF", "ViT-B-32-quickgelu", _OPENAI_TRAINED, "quick_gelu", None, citations.CLIP, "MIT (OpenAI CLIP)",
            "use the Hub id directly; no conversion needed",
        ),
        Preset(
            "negclip", "NegCLIP", "Google Drive id 1ooVVPxB-tvptgmHlIMMFGV3Cg-IrhbRZ (negclip.pth)",
            "open_clip training checkpoint", "ViT-B-32", _OPENAI_TRAINED, "gelu", None, citations.ARO,
            "MIT (ARO code repository)", "fine-tuned from OpenAI ViT-B/32",
        ),
        Preset(
            "crepe-swap", "CREPE-Swap", "probably SugarCrepe's Drive folder 1n2ZNldxBteltuqx__id43sQCyzq0of09 "
            "(ft5-swap; mapping unverified)", "open_clip state dict", "ViT-B-32", _OPENAI_TRAINED, "gelu", None,
            citations.CREPE, "MIT (SugarCrepe code repository)",
        ),
        Preset(
            "crepe-replace", "CREPE-Replace", "probably SugarCrepe's Drive folder 1n2ZNldxBteltuqx__id43sQCyzq0of09 "
            "(ft5-replace; mapping unverified)", "open_clip state dict", "ViT-B-32", _OPENAI_TRAINED, "gelu", None,
            citations.CREPE, "MIT (SugarCrepe code repository)",
        ),
        Preset(
            "svlc", "SVLC", "TSVLC README (one SVLC model)", "TSVLC checkpoint, unmerged LoRA", "ViT-B-32",
            _OPENAI_TRAINED, "gelu", (TSVLC_RANK, TSVLC_ALPHA), citations.SVLC, _UNLICENSED,
        ),
        Preset(
            "svlc-pos", "SVLC+Pos", NO_PUBLIC_RELEASE, "TSVLC checkpoint, unmerged LoRA", "ViT-B-32", _OPENAI_TRAINED,
            "gelu", (TSVLC_RANK, TSVLC_ALPHA), citations.SVLC, _UNLICENSED,
        ),
        Preset(
            "dac-llm", "DAC-LLM", "DAC README (DAC_LLM)", "TSVLC checkpoint, unmerged LoRA", "ViT-B-32",
            _OPENAI_TRAINED, "gelu", (TSVLC_RANK, TSVLC_ALPHA), citations.DAC, _UNLICENSED,
        ),
        Preset(
            "dac-sam", "DAC-SAM", "DAC README (DAC_SAM)", "TSVLC checkpoint, unmerged LoRA", "ViT-B-32",
            _OPENAI_TRAINED, "gelu", (TSVLC_RANK, TSVLC_ALPHA), citations.DAC, _UNLICENSED,
        ),
        Preset(
            "hn", "HN (the paper's)", NO_PUBLIC_RELEASE, "open_clip state dict", "ViT-B-32", "unknown", "gelu", None,
            citations.HARD_POSITIVES, "not released",
        ),
        Preset(
            "hp-hn", "HP+HN (the paper's; also the ratio models)", NO_PUBLIC_RELEASE, "open_clip state dict",
            "ViT-B-32", "unknown", "gelu", None, citations.HARD_POSITIVES, "not released",
        ),
        Preset(
            "clip-coco", "CLIP-COCO (CLIP fine-tuned on COCO)", NO_PUBLIC_RELEASE + " found (the paper loads a local "
            "replace/models/<name>.pt)", "open_clip state dict", "ViT-B-32", "unknown", "gelu", None,
            citations.HARD_POSITIVES, "not released",
        ),
        Preset(
            "ce-clip", "CE-CLIP (not a Table 1 row)", "Hub le723z/CE_CLIP (CE_CLIP.pt, unverified) or Google Drive id "
            "1DWPw3CtGh5cHz9bW_-iXRSG7BBUVl13K", "open_clip training checkpoint (DDP, module. prefix)", "ViT-B-32",
            _OPENAI_TRAINED, "gelu", None, citations.CE_CLIP, _UNLICENSED, "its README loads ViT-B-32 + path (GELU)",
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UserInputError(f"unknown --preset {name!r}; `hardpos zoo` lists: {', '.join(PRESETS)}") from None


ZOO_HEADER = (
    "preset", "Table 1 row", "weights", "format", "config", "trained act.", "paper evaluated", "LoRA", "cite", "license"
)


def zoo_rows() -> list[list[str]]:
    return [
        [
            p.name, p.row, p.weights, p.file_format, p.open_clip_config, p.trained_activation, p.paper_activation,
            f"r={p.lora[0]}, alpha={p.lora[1]:g}" if p.lora else "none", p.citation, p.license,
        ]
        for p in PRESETS.values()
    ]
