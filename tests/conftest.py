"""Shared test fixtures. Every test runs offline: nothing may reach the Hub."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.support.devices import HAS_CUDA  # noqa: E402
from tests.support.paths import OPEN_CLIP_FIXTURES, SHARED_DATA  # noqa: E402


@pytest.fixture(autouse=True)
def _private_datasets_cache(tmp_path, monkeypatch):
    """Each test gets its own `datasets` cache.

    `datasets` keys a local folder's cache on the folder's name and card, not on its files, so a
    builder test reading back its `tmp_path/"out"` could be served another test's rows and pass on
    stale data. (The package itself reads local folders by content: `evaluation.eval_data.load_local_split`.)
    """
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets_cache")


@pytest.fixture(autouse=True)
def _cpu_unless_marked_gpu(request, monkeypatch):
    """Tests without the `gpu` marker run on the CPU even where CUDA is visible.

    Why: those tests compare against references computed on the CPU in the same process (float64
    restatements, bit-identical resumes, golden CLI tables), and the package picks CUDA by default
    wherever it exists, as a user wants. Each CUDA path (AMP training, `--dtype`, `--allow-tf32`,
    `--protocol paper`, several models, torchrun with NCCL) is exercised by the tests marked `gpu`
    (tests/integration/test_gpu.py), which see the device. Subprocesses inherit `CUDA_VISIBLE_DEVICES=""`.
    """
    if request.node.get_closest_marker("gpu") or not HAS_CUDA:
        return
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory) -> Path:
    """A tiny random CLIP saved like a Hub repo (model + processor), built once per session."""
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture(scope="module")
def model_and_processor(tiny_clip_dir):
    """The tiny CLIP and its processor loaded as a user would, fresh for each test module (a module may
    change the model's weights without touching another's)."""
    from transformers import AutoModel, AutoProcessor

    return AutoModel.from_pretrained(tiny_clip_dir).eval(), AutoProcessor.from_pretrained(tiny_clip_dir)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout.

    Locally a test that needs it skips when it is absent; in CI (`CI=true`) that is a failure, so
    the tests on the real upstream files can never be skipped silently there.
    """
    if not SHARED_DATA.is_dir():
        message = f"../shared/data is not present (looked in {SHARED_DATA})"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + "; CI must run with ../shared beside the checkout")
        pytest.skip(message)
    return SHARED_DATA


@pytest.fixture(scope="session")
def pos_nlp():
    """A spaCy pipeline that tags the masked-LM fixtures' words (tests/support/mlm.py), built in code.

    spaCy is in the `test` extra, so in CI (`CI=true`) its absence fails instead of skipping the
    tagger tests; locally they skip with the install command.
    """
    try:
        import spacy  # noqa: F401
    except ImportError:
        message = "spaCy is not installed: pip install -e '.[test]' (or the [mlm] extra)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + "; CI installs the test extra, which includes spaCy")
        pytest.skip(message)
    from tests.support.mlm import make_pos_pipeline

    return make_pos_pipeline()


@pytest.fixture(scope="session")
def tiny_mlm_dir(tmp_path_factory) -> Path:
    """A tiny random masked LM (BERT, word-level tokenizer) saved like a Hub repo, built once per session."""
    from tests.support.mlm import build_tiny_mlm

    return build_tiny_mlm(tmp_path_factory.mktemp("tiny_mlm"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory) -> Path:
    """The tiny open_clip fixtures' 528-token BPE (tests/fixtures/open_clip): the first 14 merges of
    CLIP's, in open_clip's file format."""
    from hf_hardpos.conversion.tokenizer import (
        clip_tokenizer_from_merges,
        read_bpe_merges,
    )

    folder = tmp_path_factory.mktemp("tiny_tokenizer")
    merges = read_bpe_merges(OPEN_CLIP_FIXTURES / "tiny_bpe_merges.txt")
    clip_tokenizer_from_merges(merges, context_length=16).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def suite_folders(tmp_path_factory) -> dict[str, Path]:
    """One tiny folder per task the suite recognises (tests/support/suite.py), by name."""
    from tests.support.suite import write_suite_folders

    return write_suite_folders(tmp_path_factory.mktemp("suite_data"))
