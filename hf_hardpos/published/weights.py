"""Which published system a run's weights are: by Hub id or by `hardpos zoo` preset, never by a folder's name.

Values are the `model` keys of the figures in ``figures.yaml`` (`hf_hardpos.published.systems()`).
"""

from __future__ import annotations

from .ce_clip import CE_CLIP, NEGCLIP
from .hard_positive import CLIP_B16, CLIP_B32, CLIP_COCO, CLIP_L14, HN, HP_HN

# Hub ids whose weights are a row's: the papers loaded OpenAI's originals (Kamath et al. with
# `clip.load`, CE-CLIP starting from open_clip's `ViT-B-32/openai`), of which these Hub repositories
# are OpenAI's own HF-format copies.
HUB_ROWS = {
    "openai/clip-vit-base-patch32": CLIP_B32,
    "openai/clip-vit-base-patch16": CLIP_B16,
    "openai/clip-vit-large-patch14": CLIP_L14,
}

# `hardpos zoo` presets (hf_hardpos.conversion.presets) whose checkpoint is a system with printed rows.
PRESET_ROWS = {
    "clip": CLIP_B32,
    "negclip": NEGCLIP,
    "crepe-swap": "CREPE-Swap",
    "crepe-replace": "CREPE-Replace",
    "svlc": "SVLC",
    "svlc-pos": "SVLC+Pos",
    "dac-llm": "DAC-LLM",
    "dac-sam": "DAC-SAM",
    "hn": HN,
    "hp-hn": HP_HN,
    "clip-coco": CLIP_COCO,
    "ce-clip": CE_CLIP,
}
