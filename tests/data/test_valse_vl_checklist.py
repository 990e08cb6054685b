"""VALSE and VL-CheckList: builders on files in the upstream formats, and the seeds' aggregations
recomputed independently from scores of a plain per-row loop.

Upstream formats quoted from the repositories:
- VALSE (github.com/Heidelberg-NLP/VALSE @2152d90, README "Example instance"): ``data/<piece>.json``
  is ``{id: {"dataset", "original_split", "dataset_idx", "linguistic_phenomena", "image_file",
  "caption", "classes", "classes_foil", "mturk": {"foil", "caption", "other"}, "foil"}}``; valid rows
  have ``mturk["caption"] >= 2``.
- VL-CheckList (github.com/om-ai-lab/VL-CheckList @6f8d6a3): ``corpus/v1/Object/Location/center/vg_obj.yaml``
  is ``ANNO_PATH: "data/Object/Location/vg_location/vg_obj_center.json"``, ``IMG_ROOT: "vg/"``,
  ``TYPE: "TUPLE_JSON"``; an annotation file is a list of ``[image_path, {"POS": [...], "NEG": [...]}]``.
CE-CLIP (Zhang et al., CVPR 2024) Table 1 (VALSE: nine columns, counting = mean of its 3 pieces, the
others single pieces; Avg = mean of 11 pieces) and Table 2 (VL-CheckList: Attribute = mean of 5,
Object = mean(Location, Size), Relation = mean(Action, Spatial), overall = mean of 9 leaves).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import load_dataset
from PIL import Image as PILImage

from hf_hardpos.benchmarks.valse.builder import PIECES, export_valse
from hf_hardpos.benchmarks.vl_checklist.builder import export_vl_checklist
from hf_hardpos.benchmarks.vl_checklist.task import vl_checklist_section
from hf_hardpos.data.checks import MissingImageError
from hf_hardpos.evaluation.tasks import CAPTION_SELECTION, TaskData, run_task
from hf_hardpos.scoring import ITMScorer
from tests.support.data_sources import jpeg_bytes

WORDS = ["red", "blue", "cube", "sphere", "dog", "cat", "on", "two", "three", "holding", "small"]
COLORS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200), (120, 60, 200)]


def _sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(2, 5))))


def make_valse(root: Path, images: Path, rows_per_piece: int = 4, seed: int = 0) -> dict[str, list[dict]]:
    """Every piece, upstream layout; row 1 of each piece is unvalidated (1 vote), row 2 of `existence`
    has caption == foil with 1 vote (VALSE's defect), `classes` varies in type as upstream."""
    rng = np.random.default_rng(seed)
    (root / "data").mkdir(parents=True)
    images.mkdir(parents=True)
    for i, color in enumerate(COLORS):
        (images / f"v7w_{i}.jpg").write_bytes(jpeg_bytes(color))
    written = {}
    for piece in PIECES:
        rows = {}
        for r in range(rows_per_piece):
            caption = _sentence(rng)
            foil = caption if (piece == "existence" and r == 2) else _sentence(rng)
            rows[f"{piece}_{r}"] = {
                "dataset": "visual7w",
                "original_split": "test",
                "dataset_idx": r,
                "linguistic_phenomena": piece,
                "image_file": f"v7w_{int(rng.integers(len(COLORS)))}.jpg",
                "caption": caption,
                "foil": foil,
                "classes": [1, "x", True][r % 3],
                "classes_foil": None,
                "mturk": {"foil": 0, "caption": 1 if r in (1, 2) else 3, "other": 0},
            }
        (root / "data" / f"{piece}.json").write_text(json.dumps(rows))
        written[piece] = list(rows.values())
    return written


def naive_scores(model, processor, image_path: Path, texts: list[str]) -> list[float]:
    """Cosine of L2-normalised embeddings, one image and one text at a time (no batching, no caches)."""
    with torch.no_grad():
        pixels = processor(images=PILImage.open(image_path).convert("RGB"), return_tensors="pt")[
            "pixel_values"
        ]
        image = model.get_image_features(pixel_values=pixels)
        image = getattr(image, "pooler_output", image)
        image = image / image.norm(dim=-1, keepdim=True)
        out = []
        for text in texts:
            ids = processor(text=[text], return_tensors="pt", padding=True)
            feature = model.get_text_features(
                input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]
            )
            feature = getattr(feature, "pooler_output", feature)
            out.append(float((image @ (feature / feature.norm(dim=-1, keepdim=True)).T).item()))
    return out


def test_valse_build_flags_and_aggregations_equal_an_independent_computation(
    tmp_path, tiny_clip_dir, model_and_processor
):
    upstream, images = tmp_path / "VALSE", tmp_path / "images"
    written = make_valse(upstream, images)
    export_valse(tmp_path / "out", upstream_dir=upstream, images_dir=images, progress=False)

    existence = load_dataset(str(tmp_path / "out"), "existence", split="test")
    assert len(existence) == 4
    assert list(existence["valid"]) == [True, False, False, True]
    assert list(existence["caption_equals_foil"]) == [False, False, True, False]
    assert list(existence["mturk_caption"]) == [3, 1, 1, 3]

    section = run_task(
        CAPTION_SELECTION,
        ITMScorer(*model_and_processor, batch_size=3, progress=False),
        TaskData(str(tmp_path / "out")),
    )
    model, processor = model_and_processor
    expected = {}
    for piece, rows in written.items():
        outcomes = []
        for row in rows:
            if row["mturk"]["caption"] < 2:
                continue
            s_caption, s_foil = naive_scores(
                model, processor, images / row["image_file"], [row["caption"], row["foil"]]
            )
            outcomes.append(s_caption > s_foil)
        expected[piece] = float(np.mean(outcomes))
        assert section.results[piece]["accuracy"] == pytest.approx(expected[piece], abs=1e-12)
        assert section.results[piece]["num_examples"] == len(outcomes)
    aggregates = section.aggregates
    assert aggregates["avg"]["accuracy"] == pytest.approx(sum(expected.values()) / 11)
    assert aggregates["counting"]["accuracy"] == pytest.approx(
        (expected["counting-hard"] + expected["counting-small-quant"] + expected["counting-adversarial"]) / 3
    )
    # CE-CLIP Table 1 prints action replacement, actant swap, coreference standard and clean as four
    # columns: they stay pieces, never averaged in pairs; counting is the only multi-piece column.
    assert set(aggregates) == {"counting", "avg"} and aggregates["avg"]["num_pieces"] == 11
    assert aggregates["counting"]["num_examples"] == sum(
        section.results[p]["num_examples"]
        for p in ("counting-hard", "counting-small-quant", "counting-adversarial")
    )


def test_valse_missing_image_is_refused_with_its_name(tmp_path):
    upstream, images = tmp_path / "VALSE", tmp_path / "images"
    used = make_valse(upstream, images)["relations"][0]["image_file"]
    (images / used).unlink()
    with pytest.raises(MissingImageError, match=used.replace(".", r"\.")):
        export_valse(tmp_path / "out", upstream_dir=upstream, images_dir=images, progress=False)
    assert not (tmp_path / "out" / "README.md").exists()


VLC_FILES = {  # corpus yaml (under corpus/v1) -> (annotation path, IMG_ROOT)
    "Attribute/action/vaw.yaml": ("data/Attribute/vaw/action.json", "vg/"),
    "Attribute/color/vg.yaml": ("data/Attribute/vg/color.json", "vg/"),
    "Attribute/color/vaw.yaml": ("data/Attribute/vaw/color.json", "vg/"),
    "Attribute/material/vg.yaml": ("data/Attribute/vg/material.json", "vg/"),
    "Attribute/size/vg.yaml": ("data/Attribute/vg/size.json", "vg/"),
    "Attribute/state/vg.yaml": ("data/Attribute/vg/state.json", "vg/"),
    "Object/Location/center/vg_obj.yaml": ("data/Object/Location/vg_location/vg_obj_center.json", "vg/"),
    "Object/Location/margin/hake.yaml": ("data/Object/Location/hake_location/hake_margin.json", "hake/"),
    "Object/Size/large/vg_obj.yaml": ("data/Object/Size/vg_size/vg_obj_large.json", "vg/"),
    "Relation/action/swig.yaml": ("data/Relation/swig_action.json", "swig/"),
    "Relation/spatial/vg.yaml": ("data/Relation/vg/spatial.json", "vg/"),
}


def make_vl_checklist(root: Path, images: Path, rows: int = 3, seed: int = 1) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    for folder in ("vg/VG_100K", "hake/hico", "swig"):
        (images / folder).mkdir(parents=True)
    for i, color in enumerate(COLORS):
        for folder in ("vg/VG_100K", "hake/hico", "swig"):
            (images / folder / f"{i}.jpg").write_bytes(jpeg_bytes(color))
    written = {}
    for corpus_file, (annotation, image_root) in VLC_FILES.items():
        yaml_path = root / "corpus" / "v1" / corpus_file
        yaml_path.parent.mkdir(parents=True, exist_ok=True)
        yaml_path.write_text(f'ANNO_PATH: "{annotation}"\nIMG_ROOT: "{image_root}"\nTYPE: "TUPLE_JSON"')
        sub = {"vg/": "VG_100K", "hake/": "hico", "swig/": ""}[image_root]
        items = [
            [
                f"{sub}/{int(rng.integers(len(COLORS)))}.jpg".lstrip("/"),
                {"POS": [_sentence(rng)], "NEG": [_sentence(rng)]},
            ]
            for _ in range(rows)
        ]
        if corpus_file == "Attribute/color/vg.yaml":
            items.append(list(items[0]))  # an exact duplicate row
            items.append([items[1][0], {"POS": ["red cube"], "NEG": ["red cube"]}])  # POS[0] == NEG[0]
            items.append(
                [items[2][0], {"POS": ["dog on sofa", "a dog"], "NEG": [" frying pan", "a cat"]}]
            )  # broken
        path = root / annotation
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items))
        written[corpus_file] = (items, image_root)
    return written


def test_vl_checklist_build_flags_and_table2_columns(tmp_path, tiny_clip_dir, model_and_processor):
    upstream, images = tmp_path / "VL-CheckList", tmp_path / "images"
    written = make_vl_checklist(upstream, images)
    export_vl_checklist(tmp_path / "out", upstream_dir=upstream, images_dir=images, progress=False)

    color = load_dataset(str(tmp_path / "out"), "attribute_color_vg", split="test")
    assert len(color) == 6
    assert list(color["duplicate"]) == [False] * 3 + [True, False, False]
    assert list(color["positive_equals_negative"]) == [False] * 4 + [True, False]
    assert list(color["negative_broken"]) == [False] * 5 + [True]
    assert color[5]["hard_negative"] == " frying pan" and color[5]["negatives"] == [" frying pan", "a cat"]

    section = run_task(
        CAPTION_SELECTION,
        ITMScorer(*model_and_processor, batch_size=4, progress=False),
        TaskData(str(tmp_path / "out")),
    )
    model, processor = model_and_processor
    per_file = {}
    for corpus_file, (items, image_root) in written.items():
        name = corpus_file.removesuffix(".yaml").replace("/", "_").lower()
        outcomes = []
        for image, texts in items:
            s_pos, s_neg = naive_scores(
                model, processor, images / image_root / image, [texts["POS"][0], texts["NEG"][0]]
            )
            outcomes.append(s_pos > s_neg)
        per_file[name] = float(np.mean(outcomes))
        assert section.results[name]["accuracy"] == pytest.approx(per_file[name], abs=1e-12)
    leaf = {
        "attribute_action": per_file["attribute_action_vaw"],
        "attribute_color": (per_file["attribute_color_vg"] + per_file["attribute_color_vaw"]) / 2,
        "attribute_material": per_file["attribute_material_vg"],
        "attribute_size": per_file["attribute_size_vg"],
        "attribute_state": per_file["attribute_state_vg"],
        "object_location": (
            per_file["object_location_center_vg_obj"] + per_file["object_location_margin_hake"]
        )
        / 2,
        "object_size": per_file["object_size_large_vg_obj"],
        "relation_action": per_file["relation_action_swig"],
        "relation_spatial": per_file["relation_spatial_vg"],
    }
    aggregates = section.aggregates
    for name, value in leaf.items():
        assert aggregates[f"official/{name}"]["accuracy"] == pytest.approx(value)
    assert aggregates["official/attribute"]["accuracy"] == pytest.approx(
        sum(v for k, v in leaf.items() if k.startswith("attribute")) / 5
    )
    assert aggregates["official/object"]["accuracy"] == pytest.approx(
        (leaf["object_location"] + leaf["object_size"]) / 2
    )
    assert aggregates["official/relation"]["accuracy"] == pytest.approx(
        (leaf["relation_action"] + leaf["relation_spatial"]) / 2
    )
    assert aggregates["official/overall"]["accuracy"] == pytest.approx(sum(leaf.values()) / 9)


def test_vl_checklist_official_protocol_reads_the_first_thousand_rows():
    outcome = np.zeros(1500, dtype=bool)
    outcome[:1000:2] = True  # 500 of the first 1,000 right
    outcome[1000:] = True  # every later row right: counted only by the full protocol
    section = vl_checklist_section(
        {"relation_spatial_vg": outcome, "relation_action_vg": np.array([True, False, False, False])}
    )
    spatial = section["results"]["relation_spatial_vg"]
    assert (spatial["accuracy"], spatial["num_examples"]) == (0.5, 1000)
    assert (spatial["accuracy_full"], spatial["num_examples_full"]) == (1000 / 1500, 1500)
    assert section["aggregates"]["official/relation"]["accuracy"] == pytest.approx((0.5 + 0.25) / 2)
    assert section["aggregates"]["full/relation"]["accuracy"] == pytest.approx((1000 / 1500 + 0.25) / 2)
    assert "official/overall" not in section["aggregates"]  # not every leaf present: no overall mean


def test_vl_checklist_missing_image_is_refused_with_its_path(tmp_path):
    upstream, images = tmp_path / "VL-CheckList", tmp_path / "images"
    items, image_root = make_vl_checklist(upstream, images)["Relation/action/swig.yaml"]
    (images / image_root / items[0][0]).unlink()
    with pytest.raises(MissingImageError, match=f"{image_root}{items[0][0]}".replace(".", r"\.")):
        export_vl_checklist(tmp_path / "out", upstream_dir=upstream, images_dir=images, progress=False)
