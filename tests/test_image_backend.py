"""The image processor's backend is pinned, recorded, and part of every resume and embedding-cache key.

torchvision is not importable on the machines these tests run on, so the second backend is a fake
built for the purpose: a PIL processor that calls itself `torchvision` and resizes with another
filter (so its pixels, like the real torchvision backend's, differ from the PIL backend's).
"""

import json

import pytest
import transformers
from PIL import Image
from transformers.models.clip import CLIPImageProcessorPil

from hf_hardpos import image_processing
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.model_source import ModelSource
from tests.support.eval_data import make_eval_set


class FakeTorchvisionProcessor(CLIPImageProcessorPil):
    backend = "torchvision"


@pytest.fixture
def fake_torchvision(monkeypatch):
    original = transformers.AutoImageProcessor.from_pretrained

    def from_pretrained(path, *args, backend=None, **kwargs):
        if backend != "torchvision":
            return original(path, *args, backend=backend, **kwargs)
        pil = original(path, *args, backend="pil", **kwargs)
        settings = {k: v for k, v in pil.to_dict().items() if k in image_processing.PIXEL_SETTINGS}
        return FakeTorchvisionProcessor(**{**settings, "resample": Image.Resampling.NEAREST})

    monkeypatch.setattr(image_processing, "torchvision_importable", lambda: True)
    monkeypatch.setattr(transformers.AutoImageProcessor, "from_pretrained", from_pretrained)


@pytest.fixture
def replace_folder(tmp_path):
    root = tmp_path / "replace"
    for seed, config in enumerate(("attributes", "relations")):
        make_eval_set(num_images=3, rows_per_image=2, seed=seed).to_parquet(
            str(root / "data" / config / "test-00000-of-00001.parquet")
        )
    (root / "README.md").write_text("---\nconfigs:\n" + "".join(
        f"- config_name: {c}\n  data_files:\n  - split: test\n    path: data/{c}/test-*.parquet\n"
        for c in ("attributes", "relations")) + "---\n")  # fmt: skip
    return root


def test_unavailable_torchvision_is_refused_not_replaced():
    if image_processing.torchvision_importable():
        pytest.skip("torchvision is importable here")
    with pytest.raises(UserInputError, match="torchvision is not importable"):
        image_processing.check_image_backend("torchvision")
    with pytest.raises(UserInputError, match="must be one of"):
        image_processing.check_image_backend("fast")


def test_loaded_processor_is_the_requested_backend(tiny_clip_dir, fake_torchvision):
    _, processor = ModelSource.resolve(str(tiny_clip_dir)).load()
    assert image_processing.backend_of(processor.image_processor) == "pil"
    _, processor = ModelSource.resolve(str(tiny_clip_dir)).load("torchvision")
    assert type(processor.image_processor) is FakeTorchvisionProcessor


def test_changing_backend_invalidates_resume_and_embedding_cache(tiny_clip_dir, replace_folder, tmp_path,
                                                                 fake_torchvision):  # fmt: skip
    out, cache = tmp_path / "eval", tmp_path / "cache"
    logs: list[str] = []
    pil = evaluate_model(str(tiny_clip_dir), str(replace_folder), output_dir=out, cache_dir=cache,
                         progress=False, log=logs.append)  # fmt: skip
    saved = json.loads((out / "metrics.json").read_text())
    recorded = saved["run"]["settings"]["image_processor"]
    assert recorded["backend"] == "pil" and recorded["resample"] == int(Image.Resampling.BICUBIC)
    assert recorded["crop_size"] and recorded["image_mean"]
    namespaces = {p.name for p in cache.iterdir()}
    assert len(namespaces) == 1

    again = evaluate_model(str(tiny_clip_dir), str(replace_folder), output_dir=out, cache_dir=cache,
                           progress=False, log=logs.append)  # fmt: skip
    assert again.saved_configs == {"attributes", "relations"} and not any("recomputing" in m for m in logs)

    other = evaluate_model(str(tiny_clip_dir), str(replace_folder), output_dir=out, cache_dir=cache,
                           image_backend="torchvision", progress=False, log=logs.append)  # fmt: skip
    assert sum("recomputing" in m for m in logs) == 2  # both saved configs came from the other backend
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["run"]["settings"]["image_processor"]["backend"] == "torchvision"
    assert {p.name for p in cache.iterdir()} > namespaces  # a second namespace, the first untouched
    for config in ("attributes", "relations"):
        assert saved["provenance"][config]["key"] != pil.provenance[config]["key"]
        # The fake backend's pixels differ, so sharing a cache or a result would have been wrong.
        assert other.results[config]["mean_original_score"] != pil.results[config]["mean_original_score"]
