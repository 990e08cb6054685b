"""How every image is opened: RGB, EXIF orientation ignored (as the papers' loaders do), 16-bit and float
greyscale scaled rather than clipped.

Why its own module: the scorer's decoding workers (`image_decoding`), the training collator and
`evaluation.decode_ahead` (which runs before torch is imported) must open an image the same way, and
this needs only PIL.
"""

from __future__ import annotations

import io

from PIL import Image

# Full scale of PIL's high-bit-depth greyscale modes: 16-bit integers (a 16-bit PNG opens as I;16 or I) and floats.
_FULL_SCALE = {"I;16": 65535.0, "I;16L": 65535.0, "I;16B": 65535.0, "I;16N": 65535.0, "I": 65535.0, "F": 1.0}


def as_rgb(image: Image.Image) -> Image.Image:
    """`image` as 8-bit RGB, a 16-bit or float greyscale image scaled by its mode's value range.

    Why: `.convert("RGB")` clips a 16-bit greyscale image's values to 0..255 instead of scaling them, so
    all but the darkest pixels become white (the 8-bit version of a gradient 0, 6, 13, ... comes out
    0, 255, 255, ...). Values 0..65535 (integer modes) or 0..1 (`F`) map to 0..255, rounded.
    """
    if image.mode not in _FULL_SCALE:
        return image if image.mode == "RGB" else image.convert("RGB")
    import numpy as np

    values = np.asarray(image, dtype=np.float64) * (255.0 / _FULL_SCALE[image.mode])
    grey = np.clip(np.rint(np.nan_to_num(values)), 0, 255).astype(np.uint8)
    return Image.fromarray(grey, mode="L").convert("RGB")


def open_image(value) -> Image.Image:
    """An image cell (PIL image, `{"bytes", "path"}` dict, or path) as RGB, EXIF orientation ignored (`as_rgb`)."""
    if isinstance(value, Image.Image):
        return as_rgb(value)
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return as_rgb(Image.open(io.BytesIO(value["bytes"])))
        return as_rgb(Image.open(value["path"]))
    return as_rgb(Image.open(value))
