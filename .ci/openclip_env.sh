#!/usr/bin/env bash
# Runs the open_clip-marked tests (pytest -m open_clip) in a side venv with a real open_clip.
#
# Why a side venv: open_clip needs torchvision, and torchvision's wheel does not load beside the CPU torch
# the README installs in the main environment ("operator torchvision::nms does not exist"). So the pins in
# .ci/openclip-requirements.txt (torch, torchvision, open_clip_torch) get a venv of their own, cached under
# ${HARDPOS_OPENCLIP_VENVS:-~/.cache/hf_hardpos}/openclip-<hash>, keyed by those pins, the package's own
# requirements (pyproject.toml's dependencies and its openclip and test extras) and the Python version: the
# first build downloads several GB, a repeat with the same key reuses the venv and costs seconds.
# The checkout itself is put first on PYTHONPATH, so one cached venv serves any checkout.
# HF_HARDPOS_REQUIRE_OPEN_CLIP=1 turns the open_clip tests' skip into a failure: nothing is skipped here.
# Extra arguments go to pytest (e.g. `.ci/openclip_env.sh tests/backends/test_open_clip.py -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-python}
key=$("$python" - <<'PY'
import hashlib, sys
try:
    import tomllib
except ImportError:  # Python 3.10: the TOML reader pip vendors
    from pip._vendor import tomli as tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
parts = [open(".ci/openclip-requirements.txt").read(), repr(project["dependencies"]),
         repr(extras["openclip"]), repr(extras["test"]), sys.version.split()[0]]
print(hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16])
PY
)
cache=${HARDPOS_OPENCLIP_VENVS:-$HOME/.cache/hf_hardpos}
venv=$cache/openclip-$key
mkdir -p "$cache"
started=$(date +%s)
(
    # One build at a time per key; a concurrent run waits, then finds the venv ready.
    flock 9
    if [ ! -f "$venv/.complete" ]; then
        echo "openclip_env: building $venv" >&2
        rm -rf "$venv"  # an interrupted build: it never reached .complete
        "$python" -m venv "$venv"
        # The package's requirements from pyproject.toml, installed without the package itself (the
        # checkout is on PYTHONPATH at run time), so the venv does not point at the checkout that built it.
        "$venv/bin/python" - <<'PY' > "$venv/requirements-package.txt"
try:
    import tomllib
except ImportError:
    from pip._vendor import tomli as tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + extras["openclip"] + extras["test"]))
PY
        "$venv/bin/python" -m pip install -q -r .ci/openclip-requirements.txt -r "$venv/requirements-package.txt"
        touch "$venv/.complete"
    fi
) 9>"$cache/openclip-$key.lock"
echo "openclip_env: venv $venv ready in $(( $(date +%s) - started )) s" >&2
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" HF_HARDPOS_REQUIRE_OPEN_CLIP=1 \
    exec "$venv/bin/python" -m pytest -q -m open_clip "$@"
