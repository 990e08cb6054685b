"""The image processor a score was computed with: built explicitly, described, and part of every key.

Why: transformers ships two backends of `CLIPImageProcessor`. `AutoProcessor` picks the torchvision
one when torchvision is importable and the PIL one otherwise, and their pixels differ (by one
intensity level on a few pixels, measured with transformers 5.23 / torchvision 0.29: max 0.015 in
normalised units). So the same model would score differently depending on what else is installed,
and a result or embedding cache written under one backend could be reused under the other. Here the
backend is chosen explicitly (`pil` by default, available everywhere; `torchvision` on request), the
processor that `hardpos eval` scores with is built for it, and `describe_image_processor` records the
backend and every setting that changes pixels. `hardpos eval` puts that description in
`metrics.json` and in its resume and embedding-cache keys.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

from .errors import UserInputError

if TYPE_CHECKING:  # numpy and PIL load lazily: `hardpos eval --help` imports this module for its choices
    import numpy as np
    from PIL import Image

IMAGE_BACKENDS = ("pil", "torchvision", "paper")
DEFAULT_IMAGE_BACKEND = "pil"
# The processor settings that change pixel values (transformers' names).
PIXEL_SETTINGS = (
    "do_convert_rgb", "do_resize", "size", "resample", "do_center_crop", "crop_size", "crop_offset",
    "do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std",
)  # fmt: skip


def torchvision_importable() -> bool:
    """Whether transformers could build its torchvision backend here."""
    return importlib.util.find_spec("torchvision") is not None


def check_image_backend(backend: str) -> None:
    """Refuse an unknown backend, and torchvision where it cannot be imported (never a silent fallback)."""
    if backend not in IMAGE_BACKENDS:
        raise UserInputError(f"--image-backend must be one of {list(IMAGE_BACKENDS)}, got {backend!r}")
    if backend == "torchvision" and not torchvision_importable():
        raise UserInputError(
            "--image-backend torchvision: torchvision is not importable here (install the torchvision build "
            "that matches your torch, or use the default pil backend)"
        )


def backend_of(image_processor) -> str:
    """`pil` or `torchvision` for a transformers image processor (its `backend`), else its class name."""
    backend = getattr(image_processor, "backend", None)
    if isinstance(backend, str):
        return backend
    return (
        "torchvision" if type(image_processor).__name__.endswith("Fast") else type(image_processor).__name__
    )


def load_image_processor(model: str, backend: str = DEFAULT_IMAGE_BACKEND):
    """The model's image processor (its `preprocessor_config.json`) on `backend`, refusing any other.

    `paper` is `PaperImageProcessor` built from the model's own sizes, mean and std.
    """
    from transformers import AutoImageProcessor

    check_image_backend(backend)
    try:
        if backend == "paper":
            return PaperImageProcessor.from_image_processor(
                AutoImageProcessor.from_pretrained(model, backend="pil", trust_remote_code=False)
            )
        processor = AutoImageProcessor.from_pretrained(model, backend=backend, trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserInputError(
            f"cannot load the image processor of model {model!r} ({backend} backend): {first}"
        ) from err
    built = backend_of(processor)
    if built != backend:
        raise UserInputError(
            f"model {model!r}: asked for the {backend} image backend, transformers built {built}"
        )
    return processor


class PaperImageProcessor:
    """The eval transform of OpenAI's `clip.load` (and of the CLIP reimplementation the paper's other
    checkpoints were trained and scored with), which the paper's numbers were computed with.

    `Resize(size, BICUBIC)` of the short side (long side `int(size * long / short)`), `CenterCrop(size)`
    with torchvision's offsets `int(round((d - size) / 2))`, RGB, `/ 255`, then the checkpoint's mean
    and std (github.com/openai/CLIP `clip/clip.py` `_transform`; torchvision `center_crop`). transformers'
    `CLIPImageProcessor` crops at `(d - size) // 2` instead: one pixel apart whenever `d - size` is odd
    and `(d - size) / 2` rounds up (e.g. a 640x427 COCO image: width 335 after resizing, offset 56 here,
    55 there). PIL does the resizing in both, as torchvision does for PIL images.
    """

    backend = "paper"

    def __init__(self, size: int, image_mean: Sequence[float], image_std: Sequence[float]):
        self.size = int(size)
        self.image_mean = [float(v) for v in image_mean]
        self.image_std = [float(v) for v in image_std]

    @classmethod
    def from_image_processor(cls, processor) -> PaperImageProcessor:
        """The model's own crop size, mean and std (a square crop: every checkpoint the paper scored has one)."""
        crop = getattr(processor, "crop_size", None) or {}
        size = crop.get("height") or crop.get("shortest_edge") or processor.size["shortest_edge"]
        return cls(size, processor.image_mean, processor.image_std)

    def preprocess(self, image: Image.Image) -> np.ndarray:
        """One image as a (3, size, size) float32 array."""
        import numpy as np
        from PIL import Image

        image = image.convert("RGB")
        width, height = image.size
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(self.size * long / short)
        resized = (self.size, new_long) if width <= height else (new_long, self.size)
        image = image.resize(resized, Image.Resampling.BICUBIC)
        left = int(round((resized[0] - self.size) / 2.0))
        top = int(round((resized[1] - self.size) / 2.0))
        image = image.crop((left, top, left + self.size, top + self.size))
        pixels = np.asarray(image, dtype=np.float32) / 255.0
        pixels = (pixels - np.asarray(self.image_mean, dtype=np.float32)) / np.asarray(
            self.image_std, dtype=np.float32
        )
        return pixels.transpose(2, 0, 1)

    def __call__(self, images, return_tensors: str = "pt") -> dict[str, Any]:
        import numpy as np
        import torch
        from PIL import Image

        batch = [images] if isinstance(images, Image.Image) else list(images)
        return {"pixel_values": torch.from_numpy(np.stack([self.preprocess(image) for image in batch]))}

    def to_dict(self) -> dict[str, Any]:
        from PIL import Image

        return {
            "do_convert_rgb": True, "do_resize": True, "size": {"shortest_edge": self.size},
            "resample": int(Image.Resampling.BICUBIC), "do_center_crop": True,
            "crop_size": {"height": self.size, "width": self.size}, "crop_offset": "int(round((d - size) / 2))",
            "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
            "image_mean": self.image_mean, "image_std": self.image_std,
        }  # fmt: skip


def _json_safe(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value


def describe_image_processor(image_processor) -> dict[str, Any]:
    """Backend, class and pixel settings, JSON-safe: what `metrics.json` records and keys include.

    A processor without transformers' `to_dict` (a model backend's own transform: any object with a
    `backend` name and a `transform`, as `backends.ModelBackend.load` may return) is described by its
    transform's text, under the `backend` it names.
    """
    to_dict = getattr(image_processor, "to_dict", None)
    if to_dict is None:
        transform = getattr(image_processor, "transform", image_processor)
        return {
            "backend": backend_of(image_processor),
            "class": type(image_processor).__name__,
            "transform": repr(transform),
        }
    config = to_dict()
    settings = {name: _json_safe(config[name]) for name in PIXEL_SETTINGS if name in config}
    return {"backend": backend_of(image_processor), "class": type(image_processor).__name__, **settings}
