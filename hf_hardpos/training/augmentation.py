"""The training-image augmentation the fine-tuning recipes use: RandomResizedCrop, bicubic, on PIL images.

Why here and not torchvision: on these machines the torchvision wheels are CUDA builds that break the
CPU torch (docs/reference.md, Installation notes), and the recipes (docs/reference.md, Recipes) need only this one transform.
The sampling follows torchvision's `RandomResizedCrop.get_params` (area fraction uniform in `scale`,
log-aspect-ratio uniform in `ratio`, 10 attempts, then a centre crop clamped to `ratio`), so a run with
`scale=(0.9, 1.0)` matches the training transform of SVLC / NegCLIP / CE-CLIP (mlfoundations' CLIP
training code, which all three fine-tune with).

Random numbers: in training each crop draws from its own generator, seeded by (seed, epoch, row index)
(`sample_generator`), never from torch's global generator. Why: the Trainer restores the global RNG
only after the first batch of a resumed epoch has been drawn, and dataloader workers reseed it, so
global-RNG crops made a resumed run (or another worker count) train on other crops than an
uninterrupted one. Called without a generator, the crop falls back to the global generator.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from PIL import Image

from ..errors import UserInputError

__all__ = ["CROP_STREAM", "RandomResizedCrop", "sample_generator"]

# Stream id of the crop in `sample_generator`'s key (the collator's hard-example draws use 0 and 1).
CROP_STREAM = 2


def sample_generator(seed: int, epoch: int, row: int, stream: int = CROP_STREAM) -> torch.Generator:
    """A torch generator that depends on (seed, epoch, row, stream) only, mixed by numpy's SeedSequence
    (so nearby keys give unrelated streams, unlike seeding with seed + row)."""
    state = np.random.SeedSequence([seed, epoch, row, stream]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


class RandomResizedCrop:
    """Crop a random region of `scale` times the image area and aspect ratio in `ratio`, resize to `size`.

    Args:
        size: (height, width) of the output, the model's input size (e.g. 224 x 224).
        scale: bounds of the cropped area as a fraction of the image area; the recipes use (0.9, 1.0).
        ratio: bounds of the crop's width / height.
    """

    attempts = 10

    def __init__(
        self,
        size: tuple[int, int],
        scale: tuple[float, float] = (0.9, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
    ) -> None:
        scale, ratio = tuple(float(s) for s in scale), tuple(float(r) for r in ratio)
        if len(scale) != 2 or not 0 < scale[0] <= scale[1] <= 1:
            raise UserInputError(
                f"train_crop_scale must be two numbers 0 < low <= high <= 1; got {list(scale)}"
            )
        if len(ratio) != 2 or not 0 < ratio[0] <= ratio[1]:
            raise UserInputError(f"crop aspect ratio must be two numbers 0 < low <= high; got {list(ratio)}")
        self.size = (int(size[0]), int(size[1]))
        self.scale = scale
        self.ratio = ratio

    def crop_box(
        self, width: int, height: int, generator: torch.Generator | None = None
    ) -> tuple[int, int, int, int]:
        """(left, top, right, bottom) of the region to crop, drawn from `generator` (default: torch's global one)."""
        area = width * height
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(self.attempts):
            target_area = area * torch.empty(1).uniform_(*self.scale, generator=generator).item()
            aspect = math.exp(torch.empty(1).uniform_(*log_ratio, generator=generator).item())
            w = round(math.sqrt(target_area * aspect))
            h = round(math.sqrt(target_area / aspect))
            if 0 < w <= width and 0 < h <= height:
                top = int(torch.randint(0, height - h + 1, size=(1,), generator=generator).item())
                left = int(torch.randint(0, width - w + 1, size=(1,), generator=generator).item())
                return left, top, left + w, top + h
        # Fallback: the largest centre crop whose aspect ratio lies within `ratio`.
        in_ratio = width / height
        if in_ratio < self.ratio[0]:
            w, h = width, round(width / self.ratio[0])
        elif in_ratio > self.ratio[1]:
            w, h = round(height * self.ratio[1]), height
        else:
            w, h = width, height
        top, left = (height - h) // 2, (width - w) // 2
        return left, top, left + w, top + h

    def __call__(self, image: Image.Image, generator: torch.Generator | None = None) -> Image.Image:
        box = self.crop_box(*image.size, generator=generator)
        height, width = self.size
        # crop, then resize, as torchvision's resized_crop does on PIL images
        return image.crop(box).resize((width, height), resample=Image.Resampling.BICUBIC)

    def __repr__(self) -> str:
        return f"RandomResizedCrop(size={self.size}, scale={self.scale}, ratio={self.ratio}, interpolation=bicubic)"
