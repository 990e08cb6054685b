"""`pil_clip_pixels.ClipPixels` against transformers' own `CLIPImageProcessorPil`, bit for bit, on images of
many sizes and aspect ratios and on the saved configurations CLIP checkpoints use; every other
configuration refused."""

import json

import numpy as np
import pytest
from PIL import Image
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

from hf_hardpos.image_opening import open_image
from hf_hardpos.pil_clip_pixels import ClipPixels

CONFIGS = [
    {},  # OpenAI's ViT-B/32: 224, bicubic, OpenAI mean and std
    {"size": {"shortest_edge": 32}, "crop_size": {"height": 32, "width": 32}},
    {"size": {"shortest_edge": 41}, "crop_size": {"height": 33, "width": 37}, "resample": 2},
    {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "rescale_factor": 0.004},
]


@pytest.mark.parametrize("settings", CONFIGS)
def test_pixels_equal_the_processors_bit_for_bit(tmp_path, settings):
    processor = CLIPImageProcessorPil(**settings)
    processor.save_pretrained(tmp_path)
    restated = ClipPixels.from_model_folder(tmp_path)
    assert restated is not None
    rng = np.random.default_rng(len(json.dumps(settings)))
    sizes = [(1, 1), (1, 500), (500, 1), (37, 41), (224, 224), (500, 375), (375, 500), (640, 427)]
    sizes += [(int(w), int(h)) for w, h in rng.integers(1, 700, (24, 2))]
    for width, height in sizes:
        image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        expected = processor(images=image, return_tensors="np")["pixel_values"][0]
        got = restated(image)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected), (width, height)


def test_images_opened_as_the_run_opens_them_are_taken(tmp_path):
    """Greyscale, palette, RGBA and 16-bit images reach the processor as `open_image` makes them (RGB);
    one with a transparency colour is left to the run (the processor composites it onto white)."""
    CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(
        tmp_path
    )
    restated = ClipPixels.from_model_folder(tmp_path)
    processor = CLIPImageProcessorPil.from_pretrained(tmp_path)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 256, (30, 45, 4), dtype=np.uint8)
    images = [
        Image.fromarray(values[..., 0]),  # greyscale
        Image.fromarray(values),  # RGBA
        Image.fromarray(values[..., :3]).convert("P"),
        Image.fromarray(values[..., 0].astype(np.uint16) * 257),  # 16-bit greyscale
    ]
    assert [image.mode for image in images] == ["L", "RGBA", "P", "I;16"]
    for image in images:
        opened = open_image(image)
        assert ClipPixels.takes(opened)
        expected = processor(images=opened, return_tensors="np")["pixel_values"][0]
        assert np.array_equal(restated(opened), expected)
    keyed = Image.fromarray(values[..., :3])
    keyed.info["transparency"] = (0, 0, 0)
    assert not ClipPixels.takes(keyed)


@pytest.mark.parametrize(
    "saved",
    [
        {"do_pad": True},
        {"size": {"shortest_edge": 32, "longest_edge": 64}},
        {"size": {"height": 32, "width": 32}},
        {"size": {"shortest_edge": 32}, "crop_size": {"height": 40, "width": 40}},  # the crop would pad
        {"do_center_crop": False},
        {"do_normalize": False},
        {"image_processor_type": "SiglipImageProcessor"},
        {"image_mean": [0.5]},
    ],
)
def test_other_configurations_are_refused(tmp_path, saved):
    config = {"image_processor_type": "CLIPImageProcessor", **saved}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    assert ClipPixels.from_model_folder(tmp_path) is None


def test_a_missing_or_damaged_config_is_refused(tmp_path):
    assert ClipPixels.from_model_folder(tmp_path) is None
    (tmp_path / "preprocessor_config.json").write_text("{not json")
    assert ClipPixels.from_model_folder(tmp_path) is None
