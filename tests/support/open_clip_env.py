"""Whether real open_clip runs here, and the mark of every test that needs it (`pytest -m open_clip`).

open_clip needs torchvision, whose wheel does not load beside the CPU torch the README installs, so these
tests run in a side venv (`.ci/openclip_env.sh`, which `.ci/run` calls) and are deselected from the main
run (`-m "not open_clip"`). Elsewhere they skip; where `HF_HARDPOS_REQUIRE_OPEN_CLIP=1` (set by that
script) they run regardless, so an open_clip that does not import fails them instead of skipping them.
"""

from __future__ import annotations

import os

import pytest


def open_clip_imports() -> bool:
    """Whether `import open_clip` works (installed is not enough: torchvision may fail to load)."""
    try:
        import open_clip  # noqa: F401
    except Exception:  # ImportError, or torchvision's RuntimeError beside a mismatched torch
        return False
    return True


REQUIRED = os.environ.get("HF_HARDPOS_REQUIRE_OPEN_CLIP", "") == "1"
HAS_OPEN_CLIP = REQUIRED or open_clip_imports()


def needs_open_clip(test):
    """Marks `test` `open_clip`, and skips it where open_clip does not import unless it is required here."""
    skip = pytest.mark.skipif(
        not HAS_OPEN_CLIP, reason="open_clip does not import here: .ci/openclip_env.sh runs it"
    )
    return pytest.mark.open_clip(skip(test))
