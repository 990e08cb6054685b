"""`--protocol paper`: the checkpoint's own eval transform, pixel-exact, and the precision clip.load uses."""

import json

import numpy as np
import pytest
from PIL import Image
from transformers.models.clip import CLIPImageProcessorPil

from hf_hardpos.backends import BACKENDS, ModelOptions, ResolvedModel, backend_for
from hf_hardpos.backends.hf import HFBackend
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.image_processing import PaperImageProcessor
from hf_hardpos.protocol import resolve_protocol
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set

MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


def reference_transform(image: Image.Image, size: int) -> np.ndarray:
    """OpenAI CLIP's eval transform, restated from openai/CLIP @3bee281 `clip/clip.py` `_transform`:
    Resize(size, BICUBIC) -> CenterCrop(size) -> RGB -> ToTensor -> Normalize(mean, std), with
    torchvision's semantics for PIL input: the long side becomes int(size * long / short), resized by
    PIL; the crop starts at int(round((d - size) / 2.0)) (torchvision `functional.center_crop`)."""
    w, h = image.size
    if w <= h:
        new_w, new_h = size, int(size * h / w)
    else:
        new_w, new_h = int(size * w / h), size
    resized = image.resize((new_w, new_h), resample=Image.BICUBIC)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    crop = np.asarray(resized.convert("RGB"), dtype=np.float32)[top : top + size, left : left + size] / 255.0
    return ((crop - np.float32(MEAN)) / np.float32(STD)).transpose(2, 0, 1)


@pytest.mark.parametrize(
    "width,height", [(640, 427), (427, 640), (500, 375), (333, 500), (225, 224), (224, 224)]
)
def test_paper_transform_is_pixel_exact(width, height):
    rng = np.random.default_rng(width * height)
    image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    ours = PaperImageProcessor(224, MEAN, STD)(images=image)["pixel_values"][0].numpy()
    assert ours.dtype == np.float32 and np.array_equal(ours, reference_transform(image, 224))


def test_transformers_crop_is_one_pixel_off_on_640x427():
    """Why the paper protocol has its own transform: transformers crops at (d - size) // 2."""
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (427, 640, 3), dtype=np.uint8))
    hf = CLIPImageProcessorPil(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224},
                               image_mean=MEAN, image_std=STD)  # fmt: skip
    theirs = hf(images=image, return_tensors="np")["pixel_values"][0]
    ours = PaperImageProcessor.from_image_processor(hf)(images=image)["pixel_values"][0].numpy()
    assert not np.allclose(theirs, ours, atol=1e-3)
    assert np.allclose(theirs[:, :, 1:], ours[:, :, :-1], atol=1e-5)  # the same pixels, one column apart
    square = Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8))
    assert np.allclose(hf(images=square, return_tensors="np")["pixel_values"][0],
                       PaperImageProcessor.from_image_processor(hf)(images=square)["pixel_values"][0].numpy(),
                       atol=1e-5)  # fmt: skip


def _model(name: str, identity: dict | None = None, backend: str | None = None) -> ResolvedModel:
    """A resolved model as its backend would return it, without resolving anything."""
    family = backend or backend_for(name).name
    return ResolvedModel(name, name, identity or {}, ModelOptions(), family)


def test_precision_follows_the_papers_loader():
    openai = resolve_protocol("paper", _model("openai/clip-vit-base-patch32"), "cuda", "fp32", "pil")
    assert (openai.precision, openai.image_backend) == ("fp16-weights", "paper")
    assert (
        resolve_protocol("paper", _model("openai/clip-vit-base-patch32"), "cpu", "fp32", "pil").precision
        == "fp32"
    )
    assert (
        resolve_protocol("paper", _model("open_clip:RN50x16/openai"), "cuda", "fp32", "pil").precision
        == "fp16-weights"
    )
    converted = _model("/x", {"converted_from": {"checkpoint_kind": "OpenAI TorchScript archive"}})
    assert resolve_protocol("paper", converted, "cuda", "fp32", "pil").precision == "fp16-weights"
    negclip = resolve_protocol(
        "paper",
        _model("/x", {"converted_from": {"checkpoint_kind": "plain state dict"}}),
        "cuda",
        "fp32",
        "pil",
    )
    assert negclip.precision == "fp32"  # every other checkpoint ran in float32
    assert resolve_protocol("paper", _model("/x"), "cuda", "fp32", "pil", preset="clip").precision == (
        "fp16-weights"
    )  # the `clip` preset is OpenAI's archive
    assert resolve_protocol("default", _model("/x"), "cuda", "bf16", "pil").precision == "bf16"
    with pytest.raises(UserInputError, match="drop --dtype"):
        resolve_protocol("paper", _model("/x"), "cpu", "fp16", "pil")


def test_a_family_states_its_own_paper_precision(monkeypatch):
    """Protocol facts come from the backend: a family registered in the table alone gets its own rule
    (here: its models were scored in bfloat16 everywhere, with its own note) with no edit elsewhere."""

    class BfloatBackend(HFBackend):
        name, prefix = "bfloat", "bfloat:"

        def holds_openai_release(self, model_argument, identity):
            return False

        def paper_precision(self, openai_release, device_type):
            return "bf16", f"bfloat16 on {device_type}: how this family's paper scored it"

    monkeypatch.setitem(BACKENDS, "bfloat", BfloatBackend())
    chosen = resolve_protocol("paper", _model("bfloat:m"), "cpu", "fp32", "pil")
    assert (chosen.precision, chosen.notes[-1]) == (
        "bf16",
        "bfloat16 on cpu: how this family's paper scored it",
    )
    assert _model("bfloat:m").backend is BACKENDS["bfloat"]
    default = resolve_protocol("paper", _model("org/m", backend="hf"), "cuda", "fp32", "pil")
    assert default.precision == "fp32"  # the default rule for every other family is unchanged


def test_fp16_weights_scorer_runs_in_half(tiny_clip_dir):
    from transformers import CLIPModel, CLIPProcessor

    model, processor = CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)
    rows = make_eval_set(num_images=3, rows_per_image=2)
    half = ITMScorer(model, processor, precision="fp16-weights", progress=False)
    assert next(half.model.parameters()).dtype.itemsize == 2
    scores = half.score(rows, "image", ("caption", "hard_negative"))
    full = ITMScorer(CLIPModel.from_pretrained(tiny_clip_dir), processor, progress=False)
    reference = full.score(rows, "image", ("caption", "hard_negative"))
    assert np.all(np.isfinite(scores["caption"]))
    assert np.allclose(scores["caption"], reference["caption"], atol=5e-3)
    assert not np.array_equal(scores["caption"], reference["caption"])


def test_paper_protocol_is_recorded_and_keyed(tiny_clip_dir, tmp_path):
    folder = tmp_path / "replace"
    make_eval_set(num_images=3, rows_per_image=2).to_parquet(
        str(folder / "data" / "relations" / "test.parquet")
    )
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: relations\n  data_files:\n  - split: test\n"
                                      "    path: data/relations/test.parquet\n---\n")  # fmt: skip
    out = tmp_path / "eval"
    default = evaluate_model(str(tiny_clip_dir), str(folder), output_dir=out, progress=False)
    logs: list[str] = []
    paper = evaluate_model(str(tiny_clip_dir), str(folder), output_dir=out, protocol="paper", progress=False,
                           log=logs.append)  # fmt: skip
    assert any("recomputing" in m for m in logs)
    settings = json.loads((out / "metrics.json").read_text())["run"]["settings"]
    assert settings["protocol"]["name"] == "paper" and settings["precision"] == "fp32"  # CPU: as clip.load
    assert settings["image_processor"]["backend"] == "paper"
    assert settings["image_processor"]["crop_offset"] == "int(round((d - size) / 2))"
    assert paper.provenance["relations"]["key"] != default.provenance["relations"]["key"]
    assert "protocol paper" in paper.table()
