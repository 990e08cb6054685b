"""Every Python and shell block of README.md and docs/*.md runs as written, offline, on a fresh copy of the
repository after the README's main command.

Why: a documented call that does not run is the first thing a new user meets. The blocks are found by
parsing the pages (```python, ```bash, ```sh, ```shell, ```console, indented under a list item or not), so
a block added to any page is run without touching this file. They run in document order (README first,
then the pages by name) in one workspace: a copy of the repository (what a fresh clone holds) in which
`hardpos demo --output-dir runs/demo`, the README's main command, has run, so a block may read what it
wrote (`runs/demo/eval_data/replace`, `runs/demo/models/pretrained`, `runs/demo/eval/hp+hn`, ...).

What stands in for what a test cannot do, on PATH before the real commands:
- `hardpos` is `python -m hf_hardpos` of the copy; `hardpos demo --output-dir D` (the full demo, two
  minutes) copies the one `hardpos demo --quick` this session ran into D (the full demo's numbers are
  tests/synthetic/test_demo.py's and benchmarks/demo_time.py's);
- `pip install` checks that what it names is installed here in a version it accepts (extras of `.`
  against pyproject.toml), and installs nothing.

A block is not run only when one of its lines says why, in a comment:
- `# needs the Hub`, `# needs a GPU`, `# needs the network` (a download from elsewhere): skipped, reason shown;
- `# .ci/run runs these lines verbatim`: checked equal to the last lines of `.ci/run` (it runs the suite);
- a Python block whose first line is `# hf_hardpos/<path>.py` is an excerpt of that file (how to add code):
  it must parse.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
                   re.M | re.S)  # fmt: skip
LANGUAGES = {
    "python": "python",
    "py": "python",
    "bash": "shell",
    "sh": "shell",
    "shell": "shell",
    "console": "shell",
}
NEEDS = re.compile(r"#\s*needs (the Hub|a GPU|the network)\b")
CI_RUNS = "# .ci/run runs these lines verbatim"
EXCERPT = re.compile(r"\A# (hf_hardpos/[\w/]+\.py)\b")
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    kind: str  # "python" or "shell"
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def needs(self) -> str | None:
        found = NEEDS.search(self.code)
        return found[1] if found else None


def blocks_of(text: str, page: str) -> list[Block]:
    """The runnable fenced blocks of one Markdown page, dedented, in order."""
    found = []
    for match in FENCE.finditer(text):
        kind = LANGUAGES.get(match["lang"].lower())
        if kind:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(page, line, kind, textwrap.dedent(match["body"])))
    return found


def pages(root: Path = REPO) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


ALL_BLOCKS = [
    block
    for page in pages()
    for block in blocks_of(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))
]

HARDPOS_SHIM = """
import os, shutil, sys
argv = sys.argv[1:]
if argv[:1] == ["demo"] and "--quick" not in argv and "--output-dir" in argv:
    target = argv[argv.index("--output-dir") + 1]
    shutil.copytree(os.environ["DOC_BLOCKS_DEMO"], target, dirs_exist_ok=True)
    print(f"[doc blocks] {target}: a copy of this session's `hardpos demo --quick`")
    sys.exit(0)
os.execv(sys.executable, [sys.executable, "-m", "hf_hardpos", *argv])
"""

PIP_SHIM = """
import sys, tomllib
from importlib.metadata import PackageNotFoundError, version
from packaging.requirements import Requirement
args, wanted = sys.argv[1:], []
if args[:1] != ["install"]:
    sys.exit(f"pip (doc blocks): only `pip install` is documented, got {args}")
skip_next = False
for arg in args[1:]:
    if skip_next:
        skip_next = False
    elif arg in ("--extra-index-url", "--index-url", "-i"):
        skip_next = True
    elif arg.startswith("-"):
        continue
    elif arg.startswith((".", "/")):
        path, _, extras = arg.partition("[")
        project = tomllib.load(open(path.rstrip("/") + "/pyproject.toml", "rb"))["project"]
        optional = project.get("optional-dependencies", {})
        for extra in filter(None, extras.rstrip("]").split(",")):
            if extra not in optional:
                sys.exit(f"pip (doc blocks): {arg}: pyproject.toml has no extra {extra!r}")
            wanted += optional[extra]
        wanted += project["dependencies"]
    else:
        wanted.append(arg)
for spec in wanted:
    requirement = Requirement(spec)
    try:
        have = version(requirement.name)
    except PackageNotFoundError:
        sys.exit(f"pip (doc blocks): {spec} is not installed here")
    if not requirement.specifier.contains(have, prereleases=True):
        sys.exit(f"pip (doc blocks): {spec} is not what is installed here ({requirement.name} {have})")
print(f"pip (doc blocks): {len(wanted)} requirement(s) already satisfied")
"""


def _script(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(body)
    launcher = folder / name
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{folder / name}.py" "$@"\n')
    launcher.chmod(0o755)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the repository in which the README's main command has run, and the environment blocks get."""
    root = tmp_path_factory.mktemp("doc_blocks")
    clone = root / "clone"
    shutil.copytree(
        REPO,
        clone,
        ignore=shutil.ignore_patterns(".git", "runs", "site", "build", "*.egg-info", "__pycache__"),
    )
    bin_dir = root / "bin"
    bin_dir.mkdir()
    _script(bin_dir, "hardpos", HARDPOS_SHIM)
    _script(bin_dir, "pip", PIP_SHIM)
    (bin_dir / "python").symlink_to(sys.executable)
    demo = root / "demo"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(clone),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(root / "datasets_cache"),
        "DOC_BLOCKS_DEMO": str(demo),
        "PYTHONWARNINGS": "ignore",
    }
    done = subprocess.run([sys.executable, "-m", "hf_hardpos", "demo", "--quick", "--output-dir", str(demo), "--no-progress"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return clone, env


def test_blocks_are_found_with_their_kind_markers_and_indentation():
    text = (
        "Intro\n\n```bash\nhardpos eval --model M   # needs the Hub\n```\n\n"
        "- a list item:\n\n  ```python\n  print(1)\n  ```\n\n"
        "```yaml\nkey: 1\n```\n\n```text\nnot code\n```\n"
    )
    found = blocks_of(text, "page.md")
    assert [(b.line, b.kind, b.code, b.needs()) for b in found] == [
        (3, "shell", "hardpos eval --model M   # needs the Hub\n", "the Hub"),
        (9, "python", "print(1)\n", None),
    ]
    assert {b.page for b in ALL_BLOCKS} >= {"README.md", "docs/index.md", "docs/evaluation.md"}


def test_the_readme_quick_start_runs_offline():
    """The README's first Python block is not allowed a marker: it is what a new user runs right after the demo."""
    first = next(b for b in ALL_BLOCKS if b.page == "README.md" and b.kind == "python")
    assert first.needs() is None and CI_RUNS not in first.code
    for call in ("load_dataset(", "metric_path(", "ITMScorer(", "HardPosTrainer(", ".train()"):
        assert call in first.code, call


def _ci_lines() -> list[str]:
    return [
        line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.id for b in ALL_BLOCKS])
def test_block_runs_as_written(block, workspace, request):
    if needs := block.needs():
        pytest.skip(f"needs {needs}")
    if CI_RUNS in block.code:
        joined = re.sub(
            r"[ \t]*\\\n[ \t]*", " ", block.code
        )  # a command broken over lines with `\`, as one line
        lines = [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]
        assert _ci_lines()[-len(lines) :] == lines
        return
    if block.kind == "python" and (excerpt := EXCERPT.match(block.code)):
        ast.parse(block.code, filename=excerpt[1])
        return
    clone, env = workspace
    name = f".doc_block_{block.page.replace('/', '_')}_{block.line}"
    script = clone / (name + (".py" if block.kind == "python" else ".sh"))
    script.write_text(block.code)
    command = (
        [sys.executable, str(script)]
        if block.kind == "python"
        else ["bash", "-e", "-o", "pipefail", str(script)]
    )
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (
        f"{block.id} failed:\n{block.code}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
