"""The model-backend table (`hf_hardpos.backends`): which family a model argument belongs to, and the
claim of docs/architecture.md ("Add a model family"): a family is its module and its line in the table.

A third family, defined here and registered in `BACKENDS` only, is resolved, identified, described
and scored through `ModelSource` / `ITMScorer` / `evaluate_model` with no other change anywhere.
"""

from __future__ import annotations

import hashlib
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hf_hardpos.backends import (
    BACKENDS,
    DEFAULT_BACKEND,
    ModelBackend,
    ModelOptions,
    backend_for,
)
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.model_source import ModelSource, check_model_options
from hf_hardpos.provenance import digest_of
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set, write_hub_folder

# -- the table --------------------------------------------------------------------------------------------


def test_every_backend_is_listed_under_its_name_and_answers_the_protocol():
    assert DEFAULT_BACKEND in BACKENDS and set(BACKENDS) == {"hf", "open_clip"}
    for name, backend in BACKENDS.items():
        assert isinstance(backend, ModelBackend) and backend.name == name and backend.summary


@pytest.mark.parametrize(
    ("argument", "family"),
    [
        ("openai/clip-vit-base-patch32", "hf"),
        ("./models/negclip.pt", "hf"),
        ("google/siglip-base-patch16-224", "hf"),
        ("open_clip:RN50x16/openai", "open_clip"),
        ("open_clip:hf-hub:laion/CLIP-ViT-B-32-roberta-base-laion2B-s12B-b32k", "open_clip"),
        ('open_clip:{"activation": null, "model": "RN101"}', "open_clip"),  # the resolved form
    ],
)
def test_an_argument_belongs_to_the_backend_that_recognises_it(argument, family):
    assert backend_for(argument).name == family


def test_options_are_checked_by_the_arguments_backend(tmp_path):
    with pytest.raises(UserInputError, match="not a checkpoint file"):  # hf: nothing to convert
        check_model_options("openai/clip-vit-base-patch32", ModelOptions(activation="gelu"))
    with pytest.raises(UserInputError, match="names its open_clip config"):
        check_model_options("open_clip:RN50x16/openai", ModelOptions(open_clip_config="RN50x16"))
    check_model_options(
        "open_clip:RN50x16/openai", ModelOptions(activation="gelu")
    )  # open_clip: a choice of the model


# -- a third family: 2 files' worth of code, registered in the table only ------------------------------------

PREFIX = "toy:"
CONTEXT = 6


class ToyDualEncoder(torch.nn.Module):
    """Image features: the mean colour; text features: the mean of learnt word vectors (seeded)."""

    def __init__(self, seed: int):
        super().__init__()
        self.words = torch.nn.Embedding(32, 3)
        torch.nn.init.normal_(self.words.weight, generator=torch.Generator().manual_seed(seed))
        self.config = SimpleNamespace(max_position_embeddings=CONTEXT, model_type="toy")

    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return pixel_values.mean(dim=(2, 3))

    def get_text_features(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        return (self.words(input_ids) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


def _word_id(word: str) -> int:
    return 2 + hashlib.sha256(word.encode()).digest()[0] % 30


class ToyTokenizer:
    model_input_names = ("input_ids", "attention_mask")
    pad_token_id = 0
    padding_side = "right"
    model_max_length = CONTEXT

    def __call__(self, texts, truncation=True, max_length=None, verbose=True, return_attention_mask=None):
        ids = [[1, *(_word_id(w) for w in text.split())] for text in texts]  # 1: a start token
        return {"input_ids": [i[: max_length or CONTEXT] if truncation else i for i in ids]}


class ToyImageProcessor:
    backend = "toy"  # recorded in metrics.json and in the pixel and embedding keys
    transform = "RGB, resize 4x4, / 255"

    def __call__(self, images, return_tensors="pt"):
        pixels = np.asarray(images.convert("RGB").resize((4, 4)), dtype=np.float32) / 255
        return {"pixel_values": torch.from_numpy(pixels.transpose(2, 0, 1)).unsqueeze(0)}


class ToyBackend(ModelBackend):
    name = "toy"
    prefix = PREFIX
    summary = "toy:SEED, a seeded dual encoder defined in tests/backends/test_table.py"

    def check_options(self, model_argument, options):
        if options.given():
            raise UserInputError(f"--model {model_argument}: a toy model takes no options")

    def resolve(self, model_argument, options, progress=True):
        self.check_options(model_argument, options)
        return model_argument

    def identity(self, resolved):
        return {"toy": {"seed": int(resolved[len(PREFIX) :])}, "sha256": digest_of(resolved)}

    def context_length(self, resolved):
        return CONTEXT

    def image_processor_settings(self, resolved, image_backend):
        return {"backend": "toy", "transform": ToyImageProcessor.transform}

    def load(self, resolved, image_backend):
        processor = SimpleNamespace(tokenizer=ToyTokenizer(), image_processor=ToyImageProcessor())
        return ToyDualEncoder(int(resolved[len(PREFIX) :])), processor


@pytest.fixture()
def toy(monkeypatch) -> ToyBackend:
    backend = ToyBackend()
    monkeypatch.setitem(BACKENDS, backend.name, backend)  # the family's one line in the table
    return backend


@torch.no_grad()
def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1))


def test_a_registered_family_is_resolved_identified_and_scored_through_model_source(toy):
    source = ModelSource.resolve("toy:7")
    assert source.backend is toy and source.path == "toy:7"
    assert source.identity == {"toy": {"seed": 7}, "sha256": digest_of("toy:7")} and source.known
    assert source.describe() == f"toy:7 (sha256 {digest_of('toy:7')[:12]})"
    assert source.context_length() == CONTEXT
    assert source.image_processor_settings()["backend"] == "toy"
    with pytest.raises(UserInputError, match="no options"):
        ModelSource.resolve("toy:7", ModelOptions(activation="gelu"))

    dataset = make_eval_set(num_images=3, rows_per_image=2, seed=4)
    scorer = ITMScorer(*source.load(), batch_size=2, progress=False)
    scores = scorer.score(dataset)
    assert scorer.settings()["image_processor"] == {
        "backend": "toy",
        "class": "ToyImageProcessor",
        "transform": repr(ToyImageProcessor.transform),
    }
    model, processor = toy.load("toy:7", "pil")
    for row in range(len(dataset)):  # each score is the cosine of the family's own features
        image = model.get_image_features(processor.image_processor(dataset[row]["image"])["pixel_values"])
        for column in ("caption", "hard_negative", "hard_positive"):
            ids = torch.tensor(processor.tokenizer([dataset[row][column]])["input_ids"])
            expected = _cosine(image, model.get_text_features(ids))
            assert math.isclose(scores[column][row], expected, abs_tol=1e-6), (row, column)


def test_a_registered_family_runs_hardpos_evaluation_end_to_end(toy, tmp_path):
    folder = write_hub_folder(
        tmp_path / "data", {"default": make_eval_set(num_images=3, rows_per_image=2, seed=5)}
    )
    out = tmp_path / "out"
    report = evaluate_model("toy:3", str(folder), output_dir=out, progress=False, log=lambda message: None)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["run"]["model_identity"] == {"toy": {"seed": 3}, "sha256": digest_of("toy:3")}
    assert saved["results"]["default"]["num_examples"] == 6 == report.results["default"]["num_examples"]
    other = evaluate_model(
        "toy:4", str(folder), output_dir=tmp_path / "other", progress=False, log=lambda m: None
    )
    assert other.run["key"] != report.run["key"]  # another identity: another resume key


def test_model_options_records_only_what_was_given():
    assert ModelOptions().given() == {}
    assert ModelOptions(activation="gelu", tokenizer="clip").given() == {
        "activation": "gelu",
        "tokenizer": "clip",
    }
