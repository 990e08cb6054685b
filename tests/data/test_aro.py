"""ARO builder on ARO-shaped fixtures (ARO's own files are on Google Drive / BLIP's bucket, unreachable here):
VG crops as ARO makes them, order sets as caption + 4 seeded perturbations in ARO's order, the CLI."""

import json
from collections import Counter

import datasets
import pytest
from PIL import Image

from hf_hardpos.data.aro import (
    PERTURBATIONS,
    export_aro,
    pre_caption,
    shuffle_nouns_and_adjectives,
    shuffle_trigrams,
    shuffle_within_trigrams,
)
from tests.support.data_sources import (
    ARO_ATTRIBUTION_ROWS,
    ARO_RELATION_ROWS,
    KARPATHY_COCO,
    KARPATHY_FLICKR,
    column_sources,
    make_aro_sources,
    make_coco_placeholders,
    make_vg_images,
    toy_tagger,
)
from tests.support.paths import REPO


@pytest.fixture
def sources(tmp_path):
    make_aro_sources(tmp_path / "aro")
    vg = make_vg_images(tmp_path / "aro" / "images", {"2323": None, "4545": None})
    coco = make_coco_placeholders(tmp_path / "coco", [e["image"] for e in KARPATHY_COCO])
    flickr = make_coco_placeholders(tmp_path / "flickr", [e["image"] for e in KARPATHY_FLICKR])
    return tmp_path, vg, coco, flickr


def test_pre_caption_is_aros_normalisation():
    assert pre_caption("A man (with a hat).  On a road!") == "a man with a hat on a road"
    assert pre_caption(" ".join(["w"] * 40)) == " ".join(["w"] * 30)


def test_perturbations_move_only_what_they_should():
    import random

    tagged = toy_tagger(
        "a small red moped on a dirt road near a man with a helmet today"
    )  # 15 words: 5 trigrams
    words = [t for t, _ in tagged]
    nouns = shuffle_nouns_and_adjectives(tagged, random.Random(1)).split()
    assert Counter(nouns) == Counter(words)
    assert [w for w, (_, tag) in zip(nouns, tagged) if tag == "X"] == [w for w, tag in tagged if tag == "X"]
    within = shuffle_within_trigrams(tagged, random.Random(1)).split()
    assert all(Counter(within[i : i + 3]) == Counter(words[i : i + 3]) for i in range(0, len(words), 3))
    across = shuffle_trigrams(tagged, random.Random(1)).split()
    triples = sorted(tuple(across[i : i + 3]) for i in range(0, len(across), 3))
    assert triples == sorted(tuple(words[i : i + 3]) for i in range(0, len(words), 3))
    assert across != words


def test_build_all_four_configs(sources):
    tmp_path, vg, coco, flickr = sources
    out = tmp_path / "out"
    report = export_aro(
        out,
        aro_dir=tmp_path / "aro",
        images_dir=tmp_path / "aro" / "images",
        coco_images_dir=tmp_path / "coco",
        flickr_images_dir=tmp_path / "flickr",
        tagger=toy_tagger,
        progress=False,
    )
    assert report.counts == {"vg_relation": 2, "vg_attribution": 1, "coco_order": 3, "flickr30k_order": 1}
    assert report.expected_counts == {"vg_relation": 23_937, "vg_attribution": 28_748}
    assert datasets.get_dataset_config_names(str(out)) == [
        "vg_relation",
        "vg_attribution",
        "coco_order",
        "flickr30k_order",
    ]

    relation = datasets.load_dataset(str(out), "vg_relation", split="test")
    for row, (image_id, (x, y, w, h), c, c_n, name) in zip(relation, ARO_RELATION_ROWS):
        assert (row["image_id"], row["caption"], row["hard_negative"], row["relation_name"]) == (
            image_id,
            c,
            c_n,
            name,
        )
        with Image.open(vg[image_id]) as source:
            expected = source.convert("RGB").crop((x, y, x + w, y + h))
        assert row["image"].convert("RGB").tobytes() == expected.tobytes()  # ARO's crop, lossless
    attribution = datasets.load_dataset(str(out), "vg_attribution", split="test")
    assert attribution[0]["attributes"] == ARO_ATTRIBUTION_ROWS[0][-1]

    order = datasets.load_dataset(str(out), "coco_order", split="test").cast_column(
        "image", datasets.Image(decode=False)
    )
    captions = [(e["image"], k, c) for e in KARPATHY_COCO for k, c in enumerate(e["caption"])]
    assert [(r["image_id"], r["caption_index"], r["original_caption"]) for r in order] == captions
    for row in order:
        words = Counter(pre_caption(" ".join(t for t, _ in toy_tagger(row["original_caption"]))).split())
        assert row["caption"] == pre_caption(row["original_caption"])
        assert len(row["hard_negatives"]) == len(PERTURBATIONS) == 4
        for negative in row["hard_negatives"]:  # a reordering of the caption's words, normalised the same way
            assert Counter(pre_caption(negative).split()) == words
        assert row["unchanged_negatives"] == sum(n == row["caption"] for n in row["hard_negatives"])
        assert row["image"]["bytes"] == coco[row["image_id"]]
    flickr_rows = datasets.load_dataset(str(out), "flickr30k_order", split="test")
    assert flickr_rows[0]["image_id"] == KARPATHY_FLICKR[0]["image"]

    # Seeded per caption: a rebuild gives the same negatives; another seed gives others.
    again = export_aro(
        tmp_path / "again",
        aro_dir=tmp_path / "aro",
        configs=["coco_order"],
        tagger=toy_tagger,
        embed_images=False,
        progress=False,
    )
    other = export_aro(
        tmp_path / "other",
        aro_dir=tmp_path / "aro",
        configs=["coco_order"],
        tagger=toy_tagger,
        embed_images=False,
        seed=1,
        progress=False,
    )
    assert again.counts == other.counts == {"coco_order": 3}
    negatives = {
        name: datasets.load_dataset(str(tmp_path / name), "coco_order", split="test")["hard_negatives"]
        for name in ("again", "other")
    }
    assert negatives["again"] == order["hard_negatives"] and negatives["other"] != order["hard_negatives"]
    readme = (out / "README.md").read_text()
    assert all(f"`{name}`" in column_sources(readme)["hard_negatives"] for name, _ in PERTURBATIONS)
    assert "(seed 0)" in readme.split("\n## ", 1)[0]  # the summary names the seed of the perturbations


def test_cli_vg_configs_and_clear_errors(sources, capsys):
    import runpy

    from hf_hardpos.cli import main as hardpos

    tmp_path, *_ = sources
    common = ["build", "aro", "--aro-dir", str(tmp_path / "aro"), "--no-progress"]
    argv = [*common, "--images-dir", str(tmp_path / "aro" / "images"), "--output-dir", str(tmp_path / "out")]
    script = runpy.run_path(str(REPO / "dataset_scripts" / "aro.py"))["main"]
    assert script([*argv[2:], "--configs", "vg_relation", "vg_attribution"]) == 0
    saved = json.loads((tmp_path / "out" / "build_report.json").read_text())
    assert saved["counts"]["vg_relation"] == 2 and saved["expected_counts"]["vg_relation"] == 23_937
    assert (
        hardpos([*argv, "--configs", "flickr30k_order"]) == 2
    )  # no Flickr30k folder, and it cannot be downloaded
    assert "--flickr-images-dir" in capsys.readouterr().err
    assert hardpos([*argv, "--configs", "vg_order"]) == 2
    assert "vg_order" in capsys.readouterr().err
    try:
        import spacy  # noqa: F401
    except ImportError:  # without spaCy, the order sets say what to install
        assert hardpos([*argv, "--configs", "coco_order", "--no-images"]) == 2
        assert "pip install spacy" in capsys.readouterr().err


def test_hardpos_eval_reads_the_built_folder(sources, tiny_clip_dir, capsys):
    """The schema is what `hardpos eval` expects: caption + hard_negative (VG) or the hard_negatives list
    (order, 5 candidates per row)."""
    import json

    from hf_hardpos.cli import main as hardpos

    tmp_path, *_ = sources
    export_aro(
        tmp_path / "out",
        aro_dir=tmp_path / "aro",
        images_dir=tmp_path / "aro" / "images",
        coco_images_dir=tmp_path / "coco",
        flickr_images_dir=tmp_path / "flickr",
        tagger=toy_tagger,
        progress=False,
    )
    argv = ["eval", "--model", str(tiny_clip_dir), "--dataset", str(tmp_path / "out"), "--no-progress"]
    assert hardpos([*argv, "--output", str(tmp_path / "eval")]) == 0
    table = capsys.readouterr().out
    assert "caption_selection" in table and "coco_order" in table
    metrics = json.dumps(json.loads((tmp_path / "eval" / "metrics.json").read_text()))
    assert all(name in metrics for name in ("vg_relation", "vg_attribution", "coco_order", "flickr30k_order"))
