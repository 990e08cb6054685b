"""Scenes of the synthetic world: two coloured shapes in a spatial relation, rendered with PIL.

Why this shape of world: it is the smallest one in which the paper's two kinds of perturbation
exist. REPLACE edits one attribute or the relation; SWAP exchanges attributes between the two
objects, which only a model that binds attributes to objects can detect. The two objects always
differ in shape *and* colour, so every object is picked out uniquely by its description and an
attribute swap always contradicts the image.

Scenes are drawn at the model's input size (32x32 by default) so that generating thousands costs
milliseconds and no resizing blurs small shapes. All randomness comes from the `numpy.random.Generator`
passed in, so a seed fixes every pixel.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from hf_hardpos.synthetic.lexicon import COLOURS, RELATIONS, SHAPES, SIZES

# Reference RGB of each colour concept; rendered colours are jittered around these.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (205, 35, 35),
    "green": (35, 165, 50),
    "blue": (40, 70, 215),
    "yellow": (230, 205, 30),
    "purple": (140, 40, 170),
    "orange": (240, 130, 20),
    "cyan": (30, 200, 210),
    "pink": (240, 120, 180),
}
assert set(PALETTE) == set(COLOURS), "every colour concept needs a palette entry"

# Radii (pixels on a 32-pixel canvas, scaled with the canvas) of each size concept: disjoint ranges,
# so "small" and "large" are visibly different whatever the jitter.
RADIUS_RANGES: dict[str, tuple[int, int]] = {"small": (3, 4), "large": (6, 7)}
assert set(RADIUS_RANGES) == set(SIZES), "every size concept needs a radius range"

_COLOUR_JITTER = 20  # per channel; keeps the nearest palette entry the drawn colour (closest pair: 76 apart)
_GAP_RANGE = (1, 3)  # free pixels between the two shapes along the relation's axis
_MAX_CROSS_OFFSET = 2  # how far the objects may be misaligned across that axis
_BACKGROUND_RANGE = (110, 190)
_NOISE_STD = 6.0


@dataclass(frozen=True)
class SceneObject:
    """One rendered object: its concepts (shape, colour, size) and where/how it was drawn."""

    shape: str
    colour: str
    size: str
    centre_x: int
    centre_y: int
    radius: int
    rgb: tuple[int, int, int]


@dataclass(frozen=True)
class Scene:
    """Two objects and the relation of the first to the second ("the first is left of the second").

    `relation` is what the sampler intended; `relation_between` recomputes it from the drawn
    positions, which is what the caption checker trusts.
    """

    objects: tuple[SceneObject, SceneObject]
    relation: str
    image_size: int
    background: int
    noise_seed: int

    def relation_between(self, first: int, second: int) -> str | None:
        """The spatial relation of object `first` to object `second` as drawn, or None if unclear.

        "left" means clearly left: further apart horizontally than vertically. With the sampler's
        placement exactly one relation holds in each direction.
        """
        a, b = self.objects[first], self.objects[second]
        dx, dy = b.centre_x - a.centre_x, b.centre_y - a.centre_y  # image y grows downwards
        if abs(dx) > abs(dy):
            return "left" if dx > 0 else "right"
        if abs(dy) > abs(dx):
            return "above" if dy > 0 else "below"
        return None

    def render(self) -> Image.Image:
        """Draw the scene as an RGB PIL image (deterministic: noise comes from `noise_seed`)."""
        noise = np.random.default_rng(self.noise_seed).normal(
            0.0, _NOISE_STD, (self.image_size, self.image_size, 1)
        )
        pixels = np.clip(self.background + noise, 0, 255).astype(np.uint8).repeat(3, axis=2)
        image = Image.fromarray(pixels, mode="RGB")
        draw = ImageDraw.Draw(image)
        for obj in self.objects:
            _draw_shape(draw, obj)
        return image

    def to_png(self) -> bytes:
        """PNG bytes of `render()`, the form a `datasets.Image()` column stores."""
        buffer = io.BytesIO()
        self.render().save(buffer, format="PNG")
        return buffer.getvalue()


def _draw_shape(draw: ImageDraw.ImageDraw, obj: SceneObject) -> None:
    x, y, r = obj.centre_x, obj.centre_y, obj.radius
    box = (x - r, y - r, x + r, y + r)
    if obj.shape == "cube":
        draw.rectangle(box, fill=obj.rgb)
    elif obj.shape == "sphere":
        draw.ellipse(box, fill=obj.rgb)
    elif obj.shape == "cone":
        draw.polygon([(x, y - r), (x - r, y + r), (x + r, y + r)], fill=obj.rgb)
    elif obj.shape == "diamond":
        draw.polygon([(x, y - r), (x + r, y), (x, y + r), (x - r, y)], fill=obj.rgb)
    elif obj.shape == "cross":
        arm = max(1, r // 3)  # half-width of each bar
        draw.rectangle((x - r, y - arm, x + r, y + arm), fill=obj.rgb)
        draw.rectangle((x - arm, y - r, x + arm, y + r), fill=obj.rgb)
    else:
        raise ValueError(f"no renderer for shape {obj.shape!r}; known: {sorted(SHAPES)}")


def sample_scene(rng: np.random.Generator, image_size: int = 32) -> Scene:
    """Draw a random scene: distinct shapes, distinct colours, independent sizes, one relation."""
    if image_size < 32:
        raise ValueError(f"image_size must be at least 32 pixels to fit two shapes, got {image_size}")
    scale = image_size / 32
    shapes = rng.choice(sorted(SHAPES), size=2, replace=False)
    colours = rng.choice(sorted(COLOURS), size=2, replace=False)
    sizes = rng.choice(sorted(SIZES), size=2, replace=True)
    relation = str(rng.choice(sorted(RELATIONS)))
    radii = [int(round(scale * rng.integers(RADIUS_RANGES[s][0], RADIUS_RANGES[s][1] + 1))) for s in sizes]
    centres = _place(rng, relation, radii, image_size, scale)
    objects = tuple(
        SceneObject(
            shape=str(shapes[k]),
            colour=str(colours[k]),
            size=str(sizes[k]),
            centre_x=centres[k][0],
            centre_y=centres[k][1],
            radius=radii[k],
            rgb=_jitter_colour(rng, PALETTE[str(colours[k])]),
        )
        for k in range(2)
    )
    return Scene(
        objects=objects,  # type: ignore[arg-type]
        relation=relation,
        image_size=image_size,
        background=int(rng.integers(_BACKGROUND_RANGE[0], _BACKGROUND_RANGE[1] + 1)),
        noise_seed=int(rng.integers(0, 2**31 - 1)),
    )


def _place(
    rng: np.random.Generator, relation: str, radii: list[int], size: int, scale: float
) -> list[tuple[int, int]]:
    """Centres for the two objects so that `first <relation> second` holds and both fit the canvas."""
    r_a, r_b = radii
    gap = int(round(scale * rng.integers(_GAP_RANGE[0], _GAP_RANGE[1] + 1)))
    distance = r_a + r_b + gap
    # Along the relation's axis: the second object sits `distance` after (left/above) or before it.
    step = distance if relation in ("left", "above") else -distance
    low = min(-r_a, step - r_b)
    high = max(r_a, step + r_b)
    main_a = int(rng.integers(-low, size - high))  # every pixel of both shapes inside [0, size)
    main_b = main_a + step
    # Across the axis: nearly aligned, so no second relation holds.
    max_cross = int(round(scale * _MAX_CROSS_OFFSET))
    offset = int(rng.integers(-max_cross, max_cross + 1))
    cross_low = max(r_a, r_b - offset)
    cross_high = min(size - 1 - r_a, size - 1 - r_b - offset)
    cross_a = int(rng.integers(cross_low, cross_high + 1))
    cross_b = cross_a + offset
    if relation in ("left", "right"):
        return [(main_a, cross_a), (main_b, cross_b)]
    return [(cross_a, main_a), (cross_b, main_b)]


def _jitter_colour(rng: np.random.Generator, rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    jitter = rng.integers(-_COLOUR_JITTER, _COLOUR_JITTER + 1, size=3)
    return tuple(int(np.clip(c + j, 0, 255)) for c, j in zip(rgb, jitter))  # type: ignore[return-value]
