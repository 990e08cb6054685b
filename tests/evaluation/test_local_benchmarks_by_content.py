"""Local Winoground and clip_benchmark folders are read by content: a rebuilt copy with the old
modification times never returns the old rows."""

import os

import numpy as np
import pytest
from transformers import CLIPModel, CLIPProcessor

from hf_hardpos.evaluation.tasks.winoground import evaluate_winoground
from hf_hardpos.evaluation.tasks.zeroshot_classification import (
    evaluate_zeroshot_classification,
)
from hf_hardpos.scoring import ITMScorer
from tests.support.caption_selection import make_winoground
from tests.support.eval_data import write_hub_folder
from tests.support.webdataset import (
    CLASSNAMES,
    TEMPLATES,
    image_bytes,
    write_webdataset,
)


@pytest.fixture(scope="module")
def scorer(tiny_clip_dir):
    model, processor = CLIPModel.from_pretrained(tiny_clip_dir), CLIPProcessor.from_pretrained(tiny_clip_dir)
    return ITMScorer(model, processor, batch_size=4, progress=False)


def _same_times(folder, times):
    """Give every file of `folder` the times recorded in `times` (what `cp -p` / `rsync -a` keep)."""
    for path, (atime, mtime) in times.items():
        os.utime(folder / path, ns=(atime, mtime))


def _times(folder):
    return {
        p.relative_to(folder): (p.stat().st_atime_ns, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def _classification_samples(seed):
    rng = np.random.default_rng(seed)
    return [{"png": image_bytes(rng, "PNG"), "cls": str(i % len(CLASSNAMES)).encode()} for i in range(8)]


def test_rebuilt_webdataset_with_old_times_is_read_anew(scorer, tmp_path):
    root_files = dict(
        classnames="\n".join(CLASSNAMES), zeroshot_classification_templates="\n".join(TEMPLATES)
    )
    folder = write_webdataset(tmp_path / "wds", _classification_samples(0), nshards=1, **root_files)
    times = _times(folder)
    evaluate_zeroshot_classification(scorer, str(folder))
    rebuilt = _classification_samples(1)[::-1]
    write_webdataset(folder, rebuilt, nshards=1, **root_files)
    _same_times(folder, times)
    fresh = write_webdataset(tmp_path / "fresh", rebuilt, nshards=1, **root_files)
    again = evaluate_zeroshot_classification(scorer, str(folder))
    expected = evaluate_zeroshot_classification(scorer, str(fresh))
    assert {k: again[k] for k in ("acc1", "acc5")} == {k: expected[k] for k in ("acc1", "acc5")}
    assert again["num_examples"] == expected["num_examples"]


def test_rebuilt_winoground_folder_with_old_times_is_read_anew(scorer, tmp_path):
    folder = write_hub_folder(tmp_path / "wino", {"default": make_winoground(4, seed=1)})
    times = _times(folder)
    evaluate_winoground(scorer, str(folder))  # fills the datasets cache with the first build's rows
    rebuilt = make_winoground(4, seed=2)
    write_hub_folder(folder, {"default": rebuilt})
    _same_times(folder, times)
    fresh = write_hub_folder(tmp_path / "fresh", {"default": rebuilt})
    again, expected = evaluate_winoground(scorer, str(folder)), evaluate_winoground(scorer, str(fresh))
    assert again["text_score"] == expected["text_score"] and again["image_score"] == expected["image_score"]
