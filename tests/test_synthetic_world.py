"""The synthetic world: determinism, labels correct by construction, schema, tokenizer coverage."""

import numpy as np
import pytest
from datasets import Image

from hf_hardpos import columns
from hf_hardpos.synthetic import captions as cap
from hf_hardpos.synthetic.lexicon import vocabulary
from hf_hardpos.synthetic.scene import PALETTE, RADIUS_RANGES, Scene, SceneObject, rearrange_scene, sample_scene
from hf_hardpos.synthetic.world import (
    make_finetune_dataset,
    make_pretrain_dataset,
    make_replace_dataset,
    make_swap_dataset,
    sample_examples,
    sample_pretrain_groups,
    tokenizer_corpus,
)

KINDS = ("replace-attributes", "replace-relations", "swap", "finetune", "pretrain")


def _raw(dataset):
    """Rows with the image as its stored PNG bytes (no decoding)."""
    return dataset.cast_column(columns.IMAGE, Image(decode=False)).to_list()


def _hand_scene() -> Scene:
    red_cube = SceneObject("cube", "red", "small", 8, 16, 3, PALETTE["red"])
    blue_sphere = SceneObject("sphere", "blue", "large", 22, 17, 7, PALETTE["blue"])
    return Scene((red_cube, blue_sphere), "left", 32, 150, 0)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a small red cube to the left of a large blue sphere", True),
        ("a little crimson block left of a big azure ball", True),
        ("a large blue sphere to the right of a small red cube", True),
        ("a large blue sphere and a small red cube", True),
        ("a small red cube to the right of a large blue sphere", False),
        ("a small red cube above a large blue sphere", False),
        ("a small blue cube and a large red sphere", False),  # colours swapped
        ("a large red cube and a large blue sphere", False),  # wrong size
        ("a small red cone and a large blue sphere", False),  # wrong shape
        ("a large blue sphere to the left of a small red cube", False),  # objects swapped
    ],
)
def test_checker_on_a_hand_made_scene(text, expected):
    assert cap.caption_matches(_hand_scene(), text) is expected


def test_checker_rejects_text_outside_the_world():
    with pytest.raises(ValueError, match="purple"):
        cap.parse_caption("a small purple cube and a large blue sphere")
    with pytest.raises(ValueError, match="not a synthetic-world caption"):
        cap.parse_caption("two dogs on a couch")


@pytest.mark.parametrize("kind", KINDS)
def test_hard_positives_match_and_hard_negatives_contradict_the_scene(kind):
    positives = {"caption", "hard_positive", *columns.FINETUNE_POSITIVE_COLUMNS}
    negatives = {"hard_negative", *columns.FINETUNE_NEGATIVE_COLUMNS}
    for scene, row in sample_examples(kind, 400, seed=3):
        for name, text in row.items():
            if name == columns.IMAGE_ID or text is None:
                continue
            if name in positives:
                assert cap.caption_matches(scene, text), (kind, row[columns.IMAGE_ID], name, text)
            else:
                assert name in negatives, name
                assert not cap.caption_matches(scene, text), (kind, row[columns.IMAGE_ID], name, text)
            if name != columns.CAPTION:
                assert text != row[columns.CAPTION], (name, text)


def _changed_slots(a: cap.Caption, b: cap.Caption) -> list[cap.Slot]:
    return [s for s in cap.editable_slots(a) if cap.slot_value(a, s) != cap.slot_value(b, s)]


def test_replace_edits_one_slot_and_positive_and_negative_edit_the_same_word():
    for kind in ("replace-attributes", "replace-relations"):
        for _, row in sample_examples(kind, 200, seed=1):
            original = cap.parse_caption(row["caption"])
            negative = cap.parse_caption(row["hard_negative"])
            positive = cap.parse_caption(row["hard_positive"])
            for edited in (negative, positive):
                changed = _changed_slots(original, edited)
                assert len(changed) == 1, (row, edited)
            assert _changed_slots(negative, positive) == changed
            if kind == "replace-relations":
                assert changed == [cap.Slot(cap.RELATION_SLOT)]


def test_swap_positive_reorders_and_swap_negative_exchanges_one_attribute():
    for _, row in sample_examples("swap", 200, seed=2):
        first, second = row["caption"].split(" and ")
        assert row["hard_positive"] == f"{second} and {first}"
        original, negative = cap.parse_caption(row["caption"]), cap.parse_caption(row["hard_negative"])
        exchanged = [
            s for s in ("size", "colour", "shape")
            if getattr(negative.first, s) == getattr(original.second, s) != getattr(original.first, s)
        ]
        assert len(exchanged) == 1 and exchanged[0] in cap.SWAPPABLE_SLOTS, row


def test_rendered_pixels_agree_with_scene_labels():
    for index in range(300):
        scene = sample_scene(np.random.default_rng([7, index]))
        pixels = np.asarray(scene.render(), dtype=int)
        assert pixels.shape == (32, 32, 3)
        assert scene.relation_between(0, 1) == scene.relation
        for obj in scene.objects:
            low, high = RADIUS_RANGES[obj.size]
            assert low <= obj.radius <= high
            assert obj.radius <= obj.centre_x < 32 - obj.radius and obj.radius <= obj.centre_y < 32 - obj.radius
            centre = pixels[obj.centre_y, obj.centre_x]
            nearest = min(PALETTE, key=lambda c: np.sum((np.array(PALETTE[c]) - centre) ** 2))
            assert nearest == obj.colour, (index, obj, centre)
        assert scene.objects[0].shape != scene.objects[1].shape
        assert scene.objects[0].colour != scene.objects[1].colour


def test_rearranged_scene_keeps_the_objects_and_draws_the_asked_relation():
    for index in range(100):
        rng = np.random.default_rng([8, index])
        scene = sample_scene(rng)
        for relation in ("left", "right", "above", "below"):
            moved = rearrange_scene(scene, rng, relation)
            assert moved.relation_between(0, 1) == relation == moved.relation
            for before, after in zip(scene.objects, moved.objects):
                assert (before.shape, before.colour, before.size, before.radius, before.rgb) == (
                    after.shape, after.colour, after.size, after.radius, after.rgb
                )
                assert after.radius <= after.centre_x < 32 - after.radius
                assert after.radius <= after.centre_y < 32 - after.radius
    with pytest.raises(ValueError, match="relation"):
        rearrange_scene(scene, rng, "behind")


def test_pretrain_groups_differ_only_in_the_relation_and_each_caption_fits_only_its_image():
    examples = sample_pretrain_groups(400, 4, seed=3)
    assert len(examples) == 400 and len({row[columns.IMAGE_ID] for _, row in examples}) == 400
    kinds = {"relation": 0, "conjunction": 0}
    for start in range(0, 400, 4):
        group = examples[start : start + 4]
        texts = [row[columns.CAPTION] for _, row in group]
        for i, (scene, _) in enumerate(group):
            assert [cap.caption_matches(scene, text) for text in texts][i]
        if " and " in texts[0]:
            assert all(" and " in text for text in texts)
            kinds["conjunction"] += 1
            continue
        kinds["relation"] += 1
        objects = [tuple((o.shape, o.colour, o.size) for o in scene.objects) for scene, _ in group]
        assert len(set(objects)) == 1
        assert len({scene.relation for scene, _ in group}) == 4
        for i, (scene, _) in enumerate(group):  # a relation group's captions are true of one image each
            assert [cap.caption_matches(scene, text) for text in texts] == [k == i for k in range(4)]
    assert kinds["relation"] > kinds["conjunction"] > 0
    assert sample_pretrain_groups(10, 4, seed=3) == examples[:10]
    assert make_pretrain_dataset(6, 3, relation_group_size=4)[columns.CAPTION] == [
        row[columns.CAPTION] for _, row in examples[:6]
    ]
    with pytest.raises(ValueError, match="group_size"):
        sample_pretrain_groups(8, 5)


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: make_replace_dataset(20, seed, "attributes"),
        lambda seed: make_replace_dataset(20, seed, "relations"),
        lambda seed: make_swap_dataset(20, seed),
        lambda seed: make_finetune_dataset(20, seed),
        lambda seed: make_pretrain_dataset(20, seed),
    ],
)
def test_same_seed_same_bytes_and_different_seed_different_data(make):
    first, again, other = _raw(make(0)), _raw(make(0)), _raw(make(1))
    assert first == again
    assert [r[columns.IMAGE]["bytes"] for r in first] != [r[columns.IMAGE]["bytes"] for r in other]
    assert [r[columns.CAPTION] for r in first] != [r[columns.CAPTION] for r in other]


def test_rows_do_not_depend_on_set_size_and_images_are_the_scenes():
    small, large = _raw(make_swap_dataset(5, 4)), _raw(make_swap_dataset(12, 4))
    assert large[:5] == small
    for (scene, row), stored in zip(sample_examples("swap", 5, 4), small):
        assert stored[columns.IMAGE]["bytes"] == scene.to_png()
        assert stored[columns.CAPTION] == row[columns.CAPTION]
    assert len({r[columns.IMAGE_ID] for r in large}) == len(large)


def test_schema_matches_the_shared_column_constants():
    eval_columns = [columns.IMAGE, columns.IMAGE_ID, *columns.EVAL_CAPTION_COLUMNS]
    assert make_swap_dataset(3).column_names == eval_columns
    replace = make_replace_dataset(3, subset="relations")
    assert replace.column_names == [*eval_columns, "subset"]
    assert set(replace["subset"]) == {"relations"}
    finetune = make_finetune_dataset(60)
    assert finetune.column_names == [
        columns.IMAGE,
        columns.IMAGE_ID,
        columns.CAPTION,
        *columns.FINETUNE_POSITIVE_COLUMNS,
        *columns.FINETUNE_NEGATIVE_COLUMNS,
    ]
    for row in finetune.select_columns([columns.CAPTION, columns.HARD_POSITIVE_SWAP]):
        has_and = " and " in row[columns.CAPTION]
        assert (row[columns.HARD_POSITIVE_SWAP] is not None) == has_and
        assert row[columns.HARD_POSITIVE_SWAP] != "None"
    assert finetune.features[columns.IMAGE] == Image()
    assert finetune[0][columns.IMAGE].size == (32, 32)
    assert make_pretrain_dataset(2).column_names == [columns.IMAGE, columns.IMAGE_ID, columns.CAPTION]
    with pytest.raises(ValueError, match="objects"):
        make_replace_dataset(2, subset="objects")


def test_tokenizer_built_on_the_corpus_covers_every_caption_word(tmp_path):
    from transformers import CLIPProcessor

    from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

    processor = CLIPProcessor.from_pretrained(build_tiny_clip(tmp_path, tokenizer_corpus()))
    tokenizer = processor.tokenizer
    for word in vocabulary():
        assert tokenizer.tokenize(word) == [f"{word}</w>"], word
    words_seen = set()
    for kind in KINDS:
        for _, row in sample_examples(kind, 100, seed=5):
            for name, text in row.items():
                if name != columns.IMAGE_ID and text is not None:
                    words_seen.update(text.split())
                    ids = tokenizer(text)["input_ids"]
                    assert len(ids) == len(text.split()) + 2, text
    assert words_seen <= set(vocabulary())
