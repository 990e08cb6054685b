"""`hardpos build own` cards fit to push: named after the dataset, usage loading that dataset, no empty section,
no local path; card text filled by Jinja (no str.format)."""

import json
import re

import numpy as np
import pytest
from huggingface_hub import DatasetCard
from PIL import Image

from hf_hardpos.data.dataset_card import card_facts
from hf_hardpos.data.own import export_own


def _table(tmp_path):
    (tmp_path / "img").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / "img" / "0.png")
    table = tmp_path / "my_rows.jsonl"
    rows = [
        {
            "image": "img/0.png",
            "caption": "a red cube",
            "hard_negative": "a blue cube",
            "hard_positive": "a cube that is red",
            "config": c,
        }
        for c in ("attributes", "relations")
    ]
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return table


def _sections(text: str) -> dict[str, str]:
    body = text.split("---", 2)[2]
    parts = re.split(r"^## (.+)$", body, flags=re.M)
    return {title: content.strip() for title, content in zip(parts[1::2], parts[2::2])}


@pytest.mark.parametrize("repo", [None, "someone/compositional-probe"])
def test_own_card_is_fit_to_push(tmp_path, repo):
    table = _table(tmp_path)
    out = tmp_path / "probe-set"
    export_own(table, out, repo_id_for_card=repo, progress=False)
    text = (out / "README.md").read_text()
    card = DatasetCard.load(out / "README.md")
    where = repo or "./probe-set"
    assert card.data.pretty_name == (repo or "probe-set").rsplit("/", 1)[-1]
    assert (
        text.splitlines()[text.splitlines().index("---", 1) + 2]
        == f"# {repo or 'probe-set'}: a hard-positive evaluation set"
    )
    assert f'load_dataset("{where}", "attributes", split="test")' in text
    assert f"--dataset {where}" in text and "my_rows" not in text.split("## Usage")[1].split("##")[0]
    assert str(tmp_path) not in text  # no local path, absolute or otherwise
    sections = _sections(text)
    assert "Known defects of the upstream data" not in sections and "Citation" not in sections
    assert all(sections.values())  # no empty section
    header = next(line for line in text.splitlines() if line.startswith("| config"))
    assert "paper" not in header  # no column of dashes for a set no paper counted


def test_card_facts_are_filled_by_jinja():
    facts = card_facts("swap", repo="someone/swap-copy")
    assert 'load_dataset("someone/swap-copy"' in facts.usage and "{{" not in facts.usage + facts.summary
