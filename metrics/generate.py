"""Write every `evaluate` module folder (`<name>.py`, `README.md`, `app.py`, `requirements.txt`) from
the templates in `metrics/_template/` and the specs in `metrics/specs.py` into
`hf_hardpos/evaluate_modules/<name>/`.

Why generated: the modules share their input checks, bootstrap and `evaluate` plumbing, yet each must
stay one self-contained file, because a Hub Space installs neither `hf_hardpos` nor a sibling module.
The output is committed (a Space is a folder of files) inside the package, so that `pip install` ships it
and `evaluate.load(hf_hardpos.metric_path(name))` works outside a checkout; this folder keeps only what
it is generated from (one copy of each file to edit). `tests/repository/test_metric_modules.py` regenerates
it into a temporary folder and fails when a committed file differs.

    python metrics/generate.py            # rewrite hf_hardpos/evaluate_modules/<name>/
    python metrics/generate.py --out DIR  # write them under DIR instead
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Iterable
from pathlib import Path

import jinja2
from specs import SPECS, Spec  # metrics/specs.py: the script's folder is on sys.path

from hf_hardpos.citations import BIBTEX

HERE = Path(__file__).resolve().parent
MODULES = HERE.parent / "hf_hardpos" / "evaluate_modules"
TEMPLATES = {"{name}.py": "metric.py.jinja", "README.md": "README.md.jinja", "app.py": "app.py.jinja"}
TEMPLATES["requirements.txt"] = "requirements.txt.jinja"


def wrap(text: str, width: int = 100, indent: str = "") -> str:
    """Each blank-line separated paragraph of `text` refilled to `width` columns."""
    paragraphs = (" ".join(p.split()) for p in text.strip().split("\n\n"))
    return "\n\n".join(
        textwrap.fill(
            p,
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        for p in paragraphs
    )


def tuple_literal(values: Iterable[str]) -> str:
    """A Python tuple of double-quoted strings, as the project's formatter writes it."""
    items = [json.dumps(v) for v in values]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "_template"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters.update(wrap=wrap, tuple_literal=tuple_literal, code=lambda name: f"`{name}`")
    return environment


def render(spec: Spec) -> dict[str, str]:
    """The files of one module folder: relative path -> text."""
    environment = _environment()
    return {
        path.format(name=spec.name): environment.get_template(template).render(
            spec=spec, citation=BIBTEX[spec.citation]
        )
        for path, template in TEMPLATES.items()
    }


def write(out: Path) -> list[Path]:
    """Write every module folder under `out`; returns the files written."""
    written = []
    for spec in SPECS:
        for relative, text in render(spec).items():
            path = out / spec.name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=MODULES, help="folder to write the module folders into")
    for path in write(parser.parse_args(argv).out):
        print(path)


if __name__ == "__main__":
    main()
