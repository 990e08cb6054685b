"""The lazily exported names are also imported under `if TYPE_CHECKING:`, so pyright and IDEs resolve
`from hf_hardpos.training import HardPosTrainer`: the block names exactly what `lazy_exports` maps, from
the same modules (read from the source, since the block never runs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hf_hardpos"
LAZY = sorted(p for p in PACKAGE.rglob("__init__.py") if "lazy_exports(" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", LAZY, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_type_checking_block_matches_lazy_exports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy = next(
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "lazy_exports"
    )
    exported = {(k.value, v.value) for k, v in zip(lazy.args[1].keys, lazy.args[1].values)}
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
    )
    imported = {(alias.name, "." * node.level + node.module) for node in block.body for alias in node.names}
    assert imported == exported
