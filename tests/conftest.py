"""Shared test fixtures. Every test runs offline: nothing may reach the Hub."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory) -> Path:
    """A tiny random CLIP saved like a Hub repo (model + processor), built once per session."""
    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


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
