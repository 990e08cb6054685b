"""Every extra installs under the spelling the docs give, on any pip.

pip normalises extra names in the metadata it builds (PEP 685: `open_clip` is written `open-clip`), and pip
23.2 (a fresh Python 3.11 venv's) then answers `pip install ".[open_clip]"` with "does not provide the extra
'open_clip'" and installs nothing extra. So each extra is named in its normalised form, and each spelling the
repository documents (`.[name]` and `[name] extra`) must be a `Provides-Extra` of the built metadata verbatim.
"""

import re
import subprocess
import sys
from email.parser import Parser

from tests.support.paths import REPO as ROOT

DOCUMENTED = re.compile(r"""\.\[([A-Za-z0-9_,.-]+)\]|\[([A-Za-z0-9_.-]+)\] extra""")


def _built_extras(tmp_path) -> set[str]:
    """`Provides-Extra` of the wheel metadata setuptools builds from this checkout's pyproject.toml."""
    code = "import setuptools.build_meta as b, sys; print(b.prepare_metadata_for_build_wheel(sys.argv[1]))"
    out = (
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, check=True, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    metadata = Parser().parsestr((tmp_path / out / "METADATA").read_text(encoding="utf-8"))
    return set(metadata.get_all("Provides-Extra") or [])


def _documented() -> set[str]:
    found = set()
    files = [
        ROOT / "README.md",
        ROOT / "pyproject.toml",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "hf_hardpos").rglob("*.py"),
    ]
    for path in files:
        for dotted, named in DOCUMENTED.findall(path.read_text(encoding="utf-8")):
            found.update(name for name in (dotted or named).split(",") if name)
    return found


def test_documented_extras_are_provided_as_spelled(tmp_path):
    provided = _built_extras(tmp_path)
    assert {"test", "mlm", "openclip"} <= provided
    documented = _documented()
    assert "openclip" in documented
    assert documented <= provided, (
        f"documented extras missing from the metadata: {sorted(documented - provided)}"
    )
    for name in provided:
        assert name == re.sub(r"[-_.]+", "-", name).lower(), f"extra {name!r} is rewritten by normalisation"
