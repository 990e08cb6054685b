"""One results file for every benchmark, and the figures of the README and the docs pages rendered from it.

Why: a figure typed into a page drifts as soon as the code or the machine changes. Every script
in `benchmarks/` ends with `record(...)`, which stores its figures in `benchmarks/results.json` with
the command that produced them, the date and the machine (CPU model, cores, torch and package
versions). The README and the docs pages (`docs/*.md`) quote a figure only between markers

    <!--fig:eval_throughput.speedup_vs_reference-->7.21<!--/fig-->

and `python benchmarks/results.py --render` rewrites every marked figure from the results file;
`--check` (also run by the tests) fails when a quoted figure and the results file disagree.

Each benchmark's entry also records `code_digest`: the sha256 of the package source as a whole (every
file under `hf_hardpos/`, by path and content; `code_digest()`), not of the files the benchmark imports,
because most benchmarks run `hardpos` in a subprocess that imports lazily, and a figure can depend on
code the benchmark never names. When the package changes, its figures are not rewritten: the docs site
marks each one measured on other code as stale (docs/hooks.py, `site_text`), and `--stale` lists the
benchmarks to re-run, with their commands.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import html
import json
import os
import platform
import re
import sys
from pathlib import Path

RESULTS_FILE = Path(__file__).with_name("results.json")
ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--fig:(?P<key>[\w.@-]+)-->(?P<text>.*?)<!--/fig-->", re.S)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str:
    """The CUDA device's name, or "none": a GPU timing is meaningless without it."""
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "none"


def on_device(benchmark: str, device_type: str) -> str:
    """The results key of a run on `device_type`: the CPU run keeps the plain name, a GPU run gets a suffix,
    so a GPU machine's figures never replace the CPU figures the docs quote (and the reverse)."""
    return benchmark if device_type == "cpu" else f"{benchmark}_{device_type}"


def machine() -> dict[str, str]:
    """The facts that make an absolute timing meaningful."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"

    return {
        "gpu": gpu_model(),
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "torch": installed("torch"),
        "transformers": installed("transformers"),
        "hf_hardpos": installed("hf_hardpos"),
    }


def code_digest(root: Path = ROOT) -> str:
    """sha256 over every file of the package source (`hf_hardpos/`, caches left out), by relative path and content."""
    digest = hashlib.sha256()
    package = root / "hf_hardpos"
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def stale(results: dict, benchmark: str, digest: str) -> bool:
    """Whether `benchmark`'s figures were measured on other package code than `digest` (or on unknown code)."""
    return results.get(benchmark, {}).get("code_digest") != digest


def documents(root: Path = ROOT) -> list[Path]:
    """Where figures are quoted: the README and every page of the docs site."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def load(path: Path = RESULTS_FILE) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def record(benchmark: str, figures: dict[str, str], path: Path = RESULTS_FILE) -> None:
    """Store `figures` (name -> the text the README shows) of `benchmark`, with command, date and machine."""
    results = load(path)
    results[benchmark] = {
        "figures": {name: str(text) for name, text in figures.items()},
        # From the repository root, wherever it was run from: the command a reader runs to measure it again.
        "command": "python "
        + " ".join(
            [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT) if sys.argv[0] else benchmark, *sys.argv[1:]]
        ),
        "date": _dt.date.today().isoformat(),
        "machine": machine(),
        "code_digest": code_digest(),
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    print(f"recorded {len(figures)} figure(s) of {benchmark} in {path}")


def figure_text(results: dict, key: str) -> str:
    """`benchmark.figure` -> its text; `benchmark.@machine`, `.@date`, `.@command` name the run itself."""
    benchmark, _, name = key.partition(".")
    if benchmark not in results:
        raise KeyError(f"{key}: no results for benchmark {benchmark!r} in {RESULTS_FILE.name}")
    entry = results[benchmark]
    if name == "@machine":
        m = entry["machine"]
        gpu = f"{m['gpu']}, " if m.get("gpu", "none") != "none" else ""
        return f"{gpu}{m['cpu']}, {m['cores']} cores, torch {m['torch']}, hf_hardpos {m['hf_hardpos']}"
    if name in ("@date", "@command"):
        return entry[name[1:]]
    if name not in entry["figures"]:
        raise KeyError(f"{key}: {benchmark} recorded no figure {name!r}")
    return entry["figures"][name]


def mismatches(text: str, results: dict) -> list[str]:
    """Every marked figure of a page that the results file does not hold with the same text."""
    problems = []
    for match in MARKER.finditer(text):
        try:
            expected = figure_text(results, match["key"])
        except KeyError as error:
            problems.append(str(error))
            continue
        if match["text"] != expected:
            problems.append(
                f"{match['key']}: the page says {match['text']!r}, {RESULTS_FILE.name} says {expected!r}"
            )
    return problems


def render(text: str, results: dict) -> str:
    return MARKER.sub(lambda m: f"<!--fig:{m['key']}-->{figure_text(results, m['key'])}<!--/fig-->", text)


def site_text(text: str, results: dict, digest: str) -> str:
    """A page as the docs site shows it: each marker replaced by its figure alone, so that no HTML comment
    starts a line inside a paragraph (Markdown would end the paragraph there), and a figure measured on
    other package code than `digest` followed by a stale mark naming its entry and the command that re-measures
    it (a GPU machine's entry and the CPU's share a command: `on_device`)."""

    def figure(match: re.Match) -> str:
        key = match["key"]
        text = figure_text(results, key)
        benchmark = key.partition(".")[0]
        if not stale(results, benchmark, digest):
            return text
        note = f"measured on older code than this page's ({benchmark}): {results[benchmark]['command']} re-measures it"
        if "\n" in text:  # a table: the note as a paragraph of its own below it
            return f'{text}\n<p class="stale-figure">Stale: {note}.</p>\n'
        return f'{text}<sup class="stale-figure" title="{html.escape(note)}">stale</sup>'

    return MARKER.sub(figure, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--render", action="store_true", help="rewrite the pages' figures from the results file"
    )
    action.add_argument("--check", action="store_true", help="exit 1 when a quoted figure disagrees")
    action.add_argument(
        "--stale",
        action="store_true",
        help="list the benchmarks measured on other package code, each with its command",
    )
    args = parser.parse_args()
    if args.stale:
        results, digest = load(), code_digest()
        for name in sorted(name for name in results if stale(results, name, digest)):
            print(f"{name}: {results[name]['command']}")
        return 0
    results, problems = load(), []
    for page in documents():
        text = page.read_text()
        if args.render:
            page.write_text(render(text, results))
        else:
            problems += [f"{page.relative_to(ROOT)}: {problem}" for problem in mismatches(text, results)]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
