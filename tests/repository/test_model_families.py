"""Nothing outside `hf_hardpos/backends/` (and conversion, the commands and the published figures, whose
subject they are) names a model family: every other module asks the resolved model (`backends.ResolvedModel`)
and its backend. The scan is the one of issue 50, every file type included:

    grep -rliE "open.?clip" hf_hardpos | grep -v __pycache__ \
      | grep -vE "^hf_hardpos/(backends|conversion|commands|published)/"
"""

import re

from tests.support.paths import REPO

FAMILY = re.compile(rb"open.?clip", re.IGNORECASE)
ALLOWED = ("backends", "conversion", "commands", "published")


def _naming() -> list[str]:
    package = REPO / "hf_hardpos"
    return sorted(
        str(path.relative_to(REPO))
        for path in package.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.relative_to(package).parts[0] not in ALLOWED
        and FAMILY.search(path.read_bytes())
    )


def test_no_module_outside_the_backends_names_a_model_family():
    assert _naming() == []


def test_the_scan_sees_the_family_where_it_belongs():
    """Not vacuous: the same pattern finds the family's own module."""
    assert FAMILY.search((REPO / "hf_hardpos/backends/open_clip.py").read_bytes())
    assert (
        FAMILY.search(b"the Open-CLIP route")
        and FAMILY.search(b"OPENCLIP")
        and not FAMILY.search(b"openai/clip")
    )
