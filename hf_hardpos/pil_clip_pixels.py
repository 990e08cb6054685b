"""CLIP's image preprocessing as transformers' PIL backend computes it, with PIL and numpy alone.

Why: `evaluation.decode_ahead` decodes images while `hardpos eval` is still importing torch and
transformers (seconds), so it cannot use transformers' processor, which imports torch. This restates the
steps of `CLIPImageProcessorPil` (huggingface/transformers v5.24.0: `src/transformers/
image_processing_backends.py`, `PilBackend._preprocess`, with `image_transforms.py`'s `convert_to_rgb`,
`get_resize_output_image_size`, `resize`, `center_crop`, `rescale` and `normalize`) for the one
configuration CLIP checkpoints use: resize of the short side, centre crop no larger than it, rescale,
normalise. Every other configuration is refused (`from_model_folder` returns None) and decoded as usual.

The run never trusts it blindly: before using pixels made here it compares some with its own
processor's, bit for bit, and decodes everything itself on any difference (`pixel_store.PrefilledPixels`);
`tests/test_pil_clip_pixels.py` compares the two on images of many sizes and modes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

# transformers' `CLIPImageProcessorPil` class defaults (a saved config may leave any of them out).
_DEFAULTS = {
    "do_convert_rgb": True,
    "do_resize": True,
    "size": {"shortest_edge": 224},
    "resample": 3,  # PIL bicubic
    "do_center_crop": True,
    "crop_size": {"height": 224, "width": 224},
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}
_CLIP_TYPES = ("CLIPImageProcessor", "CLIPImageProcessorPil")
# Saved keys that do not change pixels; any other key not in `_DEFAULTS` means a configuration we refuse.
_INERT = {"image_processor_type", "processor_class", "feature_extractor_type", "default_to_square", "backend"}


@dataclass(frozen=True)
class ClipPixels:
    """The settings of the one pipeline restated here; call it on an RGB image."""

    shortest_edge: int
    resample: int
    crop: tuple[int, int]
    rescale_factor: float
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    @classmethod
    def from_model_folder(cls, folder: str | Path) -> ClipPixels | None:
        """The settings of the folder's saved CLIP image processor, or None for anything else."""
        folder = Path(folder)
        try:
            if (folder / "preprocessor_config.json").is_file():
                saved = json.loads((folder / "preprocessor_config.json").read_text())
            else:
                saved = json.loads((folder / "processor_config.json").read_text()).get("image_processor")
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(saved, dict) or saved.get("image_processor_type") not in _CLIP_TYPES:
            return None
        if set(saved) - set(_DEFAULTS) - _INERT:
            return None
        settings = {**_DEFAULTS, **saved}
        size, crop = settings["size"], settings["crop_size"]
        if isinstance(size, int):
            size = {"shortest_edge": size}
        if isinstance(crop, int):
            crop = {"height": crop, "width": crop}
        flags = ("do_convert_rgb", "do_resize", "do_center_crop", "do_rescale", "do_normalize")
        if (
            not all(settings[flag] is True for flag in flags)
            or not isinstance(size, dict)
            or set(size) != {"shortest_edge"}
            or not isinstance(crop, dict)
            or set(crop) != {"height", "width"}
            or max(crop["height"], crop["width"]) > size["shortest_edge"]  # else the crop pads: not restated
            or len(settings["image_mean"]) != 3
            or len(settings["image_std"]) != 3
        ):
            return None
        return cls(
            int(size["shortest_edge"]),
            int(settings["resample"]),
            (int(crop["height"]), int(crop["width"])),
            float(settings["rescale_factor"]),
            tuple(float(m) for m in settings["image_mean"]),
            tuple(float(s) for s in settings["image_std"]),
        )

    @staticmethod
    def takes(image: Image.Image) -> bool:
        """Whether `__call__` restates the processor for `image`: an RGB image without a transparency
        colour (which the processor composites onto white first, a step not restated)."""
        return image.mode == "RGB" and image.info.get("transparency") is None

    def __call__(self, image: Image.Image) -> np.ndarray:
        """float32 pixels, channels first, of an image `takes` accepts (`image_opening.open_image` gives RGB)."""
        width, height = image.size
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.shortest_edge, int(self.shortest_edge * long / short)
        new_height, new_width = (new_long, new_short) if width <= height else (new_short, new_long)
        resized = np.array(image.resize((new_width, new_height), resample=self.resample, reducing_gap=None))
        crop_height, crop_width = self.crop
        top, left = (new_height - crop_height) // 2, (new_width - crop_width) // 2
        cropped = np.moveaxis(resized, -1, 0)[:, top : top + crop_height, left : left + crop_width]
        rescaled = (cropped.astype(np.float64) * self.rescale_factor).astype(np.float32)
        mean, std = np.array(self.mean, dtype=np.float32), np.array(self.std, dtype=np.float32)
        return ((rescaled.T - mean) / std).T
