"""TF32 settings are touched only on CUDA, through torch's current API, and restored."""

import numpy as np
import pytest
import torch
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.compute import cuda_tf32
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set


@pytest.fixture()
def new_api_in_use():
    """A process that set TF32 through `fp32_precision` (reading the legacy flags then raises)."""
    matmul = torch.backends.cuda.matmul
    if not hasattr(matmul, "fp32_precision"):
        pytest.skip("this torch has no fp32_precision API")
    saved = matmul.fp32_precision
    matmul.fp32_precision = "tf32"
    yield
    matmul.fp32_precision = saved


def test_cpu_scoring_leaves_tf32_settings_alone(tiny_clip_dir, new_api_in_use):
    model, processor = CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)
    scores = ITMScorer(model, processor, batch_size=3, device="cpu", progress=False).score(
        make_eval_set(2, 2)
    )
    assert np.isfinite(scores["caption"]).all()
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"  # untouched


@pytest.mark.parametrize("allow, inside", [(False, "ieee"), (True, "tf32")])
def test_cuda_tf32_sets_and_restores_the_current_api(allow, inside, new_api_in_use):
    with cuda_tf32(allow):
        assert torch.backends.cuda.matmul.fp32_precision == inside
        assert torch.backends.cudnn.conv.fp32_precision == inside
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
