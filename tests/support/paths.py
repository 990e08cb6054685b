"""Where the tests find the repository's files, wherever a test file sits under tests/."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
# Checkpoints, configs and features written by open_clip itself (tests/fixtures/open_clip/make_goldens.py).
OPEN_CLIP_FIXTURES = FIXTURES / "open_clip"
QUICKGELU_JSON = OPEN_CLIP_FIXTURES / "tiny-quickgelu.json"
# Real upstream benchmark files, packed (tests/fixtures/upstream).
UPSTREAM_FIXTURES = FIXTURES / "upstream"
RECIPES = REPO / "examples" / "recipes"
# `../shared/data` beside the checkout (the `shared_data` fixture in tests/conftest.py).
SHARED_DATA = REPO.parent / "shared" / "data"
