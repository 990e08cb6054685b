"""The synthetic world: determinism, labels correct by construction, schema, tokenizer coverage."""

import numpy as np
import pytest
from datasets import Image

from hf_hardpos import columns
from hf_hardpos.synthetic import captions as cap
from hf_hardpos.synthetic.lexicon import (
    COLOURS,
    RELATIONS,
    SHAPES,
    SIZES,
    form_probabilities,
    vocabulary,
)
from hf_hardpos.synthetic.scene import (
    PALETTE,
    RADIUS_RANGES,
    Scene,
    SceneObject,
    sample_scene,
)
from hf_hardpos.synthetic.world import (
    make_finetune_dataset,
    make_pretrain_dataset,
    make_replace_dataset,
    make_swap_dataset,
    render_rows,
    sample_examples,
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
        ("a cube", True),  # alt-text: under-specified, still true
        ("a crimson block and a ball", True),
        ("a ball left of a cube", False),
        ("a ball right of a small block", True),
        ("a red sphere", False),  # the sphere is blue
        ("a cone", False),
    ],
)
def test_checker_on_a_hand_made_scene(text, expected):
    assert cap.caption_matches(_hand_scene(), text) is expected


def test_checker_rejects_text_outside_the_world():
    with pytest.raises(ValueError, match="magenta"):
        cap.parse_caption("a small magenta cube and a large blue sphere")
    with pytest.raises(ValueError, match="not a synthetic-world caption"):
        cap.parse_caption("two dogs on a couch")
    with pytest.raises(ValueError, match="beside"):
        cap.parse_caption("a red cube beside a ball")
    with pytest.raises(ValueError, match="unexpected words"):
        cap.parse_caption("a red cube and a ball today")


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


def test_replace_edits_one_slot_and_positive_and_negative_edit_the_same_word():
    for kind in ("replace-attributes", "replace-relations"):
        for _, row in sample_examples(kind, 200, seed=1):
            original = cap.parse_caption(row["caption"])
            negative = cap.parse_caption(row["hard_negative"])
            positive = cap.parse_caption(row["hard_positive"])
            for edited in (negative, positive):
                changed = cap.changed_slots(original, edited)
                assert len(changed) == 1, (row, edited)
            assert cap.changed_slots(negative, positive) == changed
            if kind == "replace-relations":
                assert changed == [cap.Slot(cap.RELATION_SLOT)]
            else:  # as VL-Checklist's attribute rows: an adjective, never the object noun
                assert changed[0].name in cap.ADJECTIVE_SLOTS


def test_swap_positive_reorders_and_swap_negative_exchanges_one_attribute():
    for _, row in sample_examples("swap", 200, seed=2):
        first, second = row["caption"].split(" and ")
        assert row["hard_positive"] == f"{second} and {first}"
        original, negative = cap.parse_caption(row["caption"]), cap.parse_caption(row["hard_negative"])
        exchanged = [
            s
            for s in ("size", "colour", "shape")
            if getattr(negative.first, s) == getattr(original.second, s) != getattr(original.first, s)
        ]
        assert len(exchanged) == 1 and exchanged[0] in cap.ADJECTIVE_SLOTS, row


def test_rendered_pixels_agree_with_scene_labels():
    for index in range(300):
        scene = sample_scene(np.random.default_rng([7, index]))
        pixels = np.asarray(scene.render(), dtype=int)
        assert pixels.shape == (32, 32, 3)
        assert scene.relation_between(0, 1) == scene.relation
        for obj in scene.objects:
            low, high = RADIUS_RANGES[obj.size]
            assert low <= obj.radius <= high
            assert (
                obj.radius <= obj.centre_x < 32 - obj.radius and obj.radius <= obj.centre_y < 32 - obj.radius
            )
            centre = pixels[obj.centre_y, obj.centre_x]
            nearest = min(PALETTE, key=lambda c: np.sum((np.array(PALETTE[c]) - centre) ** 2))
            assert nearest == obj.colour, (index, obj, centre)
        assert scene.objects[0].shape != scene.objects[1].shape
        assert scene.objects[0].colour != scene.objects[1].colour


def test_alt_text_is_true_but_under_specified_at_the_documented_rates():
    """Pretraining captions play web alt-text: always true, often partial, relations rare (AltTextStyle)."""
    examples = sample_examples("pretrain", 3000, seed=4)
    parsed = []
    for scene, row in examples:
        assert cap.caption_matches(scene, row[columns.CAPTION]), row
        parsed.append(cap.parse_caption(row[columns.CAPTION]))
    phrases = [p for c in parsed for p in (c.first, c.second) if p is not None]
    two = [c for c in parsed if c.second is not None]
    style = cap.ALT_TEXT
    # Binomial rates within ~4 standard errors of the declared probabilities.
    assert abs(1 - len(two) / len(parsed) - style.one_object) < 0.04
    assert abs(np.mean([p.colour is not None for p in phrases]) - style.colour) < 0.03
    assert abs(np.mean([p.size is not None for p in phrases]) - style.size) < 0.03
    assert abs(np.mean([c.relation is not None for c in two]) - style.relation) < 0.04
    assert all(p.shape is not None for p in phrases)
    # Synonyms at Zipf frequencies: the common form of a two-form word is written 80% of the time.
    assert form_probabilities(2) == pytest.approx((0.8, 0.2))
    shapes = [p.shape for p in phrases]
    common = sum(s == forms[0] for s in shapes for forms in SHAPES.values())
    assert abs(common / len(shapes) - 0.8) < 0.03


def test_precise_captions_say_everything():
    for _, row in sample_examples("finetune", 300, seed=6):
        caption = cap.parse_caption(row[columns.CAPTION])
        assert caption.second is not None
        for phrase in (caption.first, caption.second):
            assert None not in (phrase.size, phrase.colour, phrase.shape)
    assert set(cap.ObjectPhrase(None, "red", "cube").text().split()) == {"a", "red", "cube"}
    assert {len(f) for t in (SIZES, COLOURS, SHAPES, RELATIONS) for f in t.values()} <= {2, 3}


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


@pytest.mark.parametrize(
    "kind, make", [("finetune", make_finetune_dataset), ("pretrain", make_pretrain_dataset)]
)
def test_rendered_rows_are_the_datasets_rows_with_the_same_pixels(kind, make):
    """What the demo trains on (rendered once, in memory) is row for row what the `datasets.Dataset` yields."""
    dataset, rendered = make(6, 2), render_rows(kind, 6, 2)
    assert rendered.column_names == dataset.column_names and len(rendered) == len(dataset)
    for index, stored in enumerate(dataset):
        row = rendered[index]
        assert {k: v for k, v in row.items() if k != columns.IMAGE} == {
            k: v for k, v in stored.items() if k != columns.IMAGE
        }
        assert row[columns.IMAGE].mode == "RGB"
        assert np.array_equal(
            np.asarray(row[columns.IMAGE]), np.asarray(stored[columns.IMAGE].convert("RGB"))
        )


def test_a_set_rendered_in_two_parts_is_the_set_rendered_at_once():
    """The demo renders the pretraining rows in two halves, in two processes (`start`)."""
    whole, first, second = (
        render_rows("pretrain", 7, 3),
        render_rows("pretrain", 3, 3),
        render_rows("pretrain", 7, 3, start=3),
    )
    assert len(first) + len(second) == len(whole)
    for row, part in zip(whole.rows, first.rows + second.rows):
        assert {k: v for k, v in row.items() if k != columns.IMAGE} == {
            k: v for k, v in part.items() if k != columns.IMAGE
        }
        assert np.array_equal(np.asarray(row[columns.IMAGE]), np.asarray(part[columns.IMAGE]))
    with pytest.raises(ValueError, match="start"):
        render_rows("pretrain", 3, 3, start=4)


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


def test_precise_captions_use_common_words_and_name_the_larger_object_first():
    """The fine-tuning and evaluation captions are written as an annotator writes: the common word of every
    concept, the larger object first (`salience_order`); between equal sizes "X and Y" left to right (top to
    bottom when stacked). Only the hard positives use synonyms, and only "Y and X" breaks the order."""
    for kind in ("finetune", "swap", "replace-attributes", "replace-relations"):
        for scene, row in sample_examples(kind, 200, seed=8):
            caption = cap.parse_caption(row[columns.CAPTION])
            for phrase in (caption.first, caption.second):
                for slot in cap.ATTRIBUTE_SLOTS:
                    assert getattr(phrase, slot) == cap.surface_forms(slot, phrase.concept(slot))[0], row
            sizes = {obj.size for obj in scene.objects}
            if len(sizes) == 2:
                assert (caption.first.size, caption.second.size) == ("large", "small"), row
            if caption.relation is not None:
                assert (
                    caption.relation
                    == cap.surface_forms("relation", cap.concept_of("relation", caption.relation))[0]
                )
            elif len(sizes) == 1:
                first = scene.objects[cap.reading_order(scene)[0]]
                assert caption.first.describes(first) and scene.relation_between(
                    *cap.reading_order(scene)
                ) in ("left", "above")


def test_size_swap_negatives_and_swap_positives_break_the_larger_first_order():
    """The SWAP artifact: a rule-made negative that exchanges the sizes names the small object first, which no
    caption does; so does the SWAP hard positive "Y and X" whenever the sizes differ."""
    counts = {"caption": 0, "negative": 0, "positive": 0}
    for scene, row in sample_examples("finetune", 600, seed=10):
        if len({obj.size for obj in scene.objects}) == 1:
            continue
        for name, column in (("caption", columns.CAPTION), ("negative", columns.HARD_NEGATIVE_SWAP),
                             ("positive", columns.HARD_POSITIVE_SWAP)):  # fmt: skip
            if row[column] is not None:
                counts[name] += cap.parse_caption(row[column]).first.size == "small"
    assert counts["caption"] == 0 and counts["negative"] > 50 and counts["positive"] > 50


def test_replace_negatives_draw_the_new_word_from_the_whole_word_list():
    """A rule-made negative picks the replacement among all surface forms of the new concept (uniformly), not
    at caption frequencies: rare synonyms are as common in negatives as common words."""
    rare = total = expected = 0
    for _, row in sample_examples("finetune", 1500, seed=9):
        original, negative = (
            cap.parse_caption(row[c]) for c in (columns.CAPTION, columns.HARD_NEGATIVE_REPLACE)
        )
        (slot,) = cap.changed_slots(original, negative)
        word = cap.slot_value(negative, slot)
        forms = cap.surface_forms(slot.name, cap.concept_of(slot.name, word))
        rare += word != forms[0]
        expected += 1 - 1 / len(forms)  # uniform over the concept's forms; Zipf would give about 0.2
        total += 1
    assert abs(rare - expected) / total < 0.04 and rare / total > 0.45
