"""One EXIF policy (the reference code's: orientation ignored) for scoring and the training collator, recorded."""

import io
import json

import numpy as np
from PIL import Image

from hf_hardpos.image_opening import open_image
from hf_hardpos.scoring import EXIF_ORIENTATION


def _rotated_png() -> bytes:
    """A non-square PNG whose EXIF says "rotate 90°" (orientation 6)."""
    pixels = np.zeros((8, 16, 3), dtype=np.uint8)
    pixels[:, :4] = 255
    exif = Image.Exif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", exif=exif)
    return buffer.getvalue()


def test_scorer_and_collator_open_images_as_stored():
    from hf_hardpos.training.data_collator import HardPosDataCollator

    data = _rotated_png()
    assert Image.open(io.BytesIO(data)).getexif().get(0x0112) == 6
    opened = open_image({"bytes": data, "path": None})
    assert opened.size == (16, 8)  # width x height as stored, not transposed
    from datasets import Image as ImageFeature

    assert ImageFeature().decode_example({"bytes": data, "path": None}).size == (
        8,
        16,
    )  # datasets would rotate
    collator = HardPosDataCollator.__new__(HardPosDataCollator)
    collator.image_column = "image"
    from_collator = collator._image({"image": {"bytes": data, "path": None}}, 0)
    assert np.array_equal(np.asarray(from_collator), np.asarray(opened))


def test_policy_is_recorded_with_the_results(tiny_clip_dir, tmp_path):
    from hf_hardpos.evaluation.run import evaluate_model
    from tests.support.eval_data import make_eval_set

    out = tmp_path / "out"
    evaluate_model(
        str(tiny_clip_dir), make_eval_set(2, 2), output_dir=out, progress=False, log=lambda m: None
    )
    assert (
        json.loads((out / "metrics.json").read_text())["run"]["settings"]["exif_orientation"]
        == EXIF_ORIENTATION
    )
