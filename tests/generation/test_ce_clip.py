"""CE-CLIP's released negative generator, reproduced (the default of `hardpos generate --method mlm`).

The reference is restated here from lezhang7/Enhance-FineGrained `data/dataset.py` @ef87eb7,
`TextAugment.mask_captions` and `select_unmasked_captions`, independently of hf_hardpos: nouns /
adjectives / verbs are spaCy token texts in order; relation = first two nouns swapped by string
replacement when there are more than two nouns, else "###"; a POS slot masks the first occurrence
of one chosen token text (or is the bare mask token); a `fill-mask` pipeline with top_k=5 fills it
and `results[min(3, len(results))]["sequence"]` is taken. The deliberate changes: the choice is
seeded (`caption_rng(seed, caption, stream=type)`), which the reference leaves to `random`; and a
taken fill that is empty or whitespace (the tiny LM's 4th fill of a bare mask is a special token,
decoded to "") is rejected (`validation.EMPTY`), where the reference keeps it valid.
"""

import json

import pytest
import torch

from hf_hardpos import cli
from hf_hardpos.generation import mlm, validation
from hf_hardpos.generation.ce_clip import CEClipNegativeGenerator
from hf_hardpos.generation.mlm import TYPES, spacy_tagger
from hf_hardpos.generation.resumable import caption_rng
from tests.support.mlm import CAPTIONS

POS_OF = {"attribute": "ADJ", "object": "NOUN", "action": "VERB"}
EXTRA = ["a dog near two dogs and a man", "a man in a t-shirt riding a horse near a fence"]


def _reference(caption, nlp, fill_mask, seed):
    """TextAugment, restated (seeded choice), for one caption: {type: output or "###"}."""
    doc = nlp(caption)
    nouns = [t.text for t in doc if t.pos_ == "NOUN"]
    by_pos = {"ADJ": [t.text for t in doc if t.pos_ == "ADJ"], "NOUN": nouns,
              "VERB": [t.text for t in doc if t.pos_ == "VERB"]}  # fmt: skip
    if len(nouns) > 2:
        relation = caption.replace(nouns[0], "temp1").replace(nouns[1], nouns[0]).replace("temp1", nouns[1])
    else:
        relation = "###"
    out = {"relation": relation}
    for kind, pos in POS_OF.items():
        words = by_pos[pos]
        mask = fill_mask.tokenizer.mask_token
        text = (
            caption.replace(caption_rng(seed, caption, stream=kind).choice(words), mask, 1) if words else mask
        )
        results = fill_mask(text, top_k=5)
        out[kind] = results[min(3, len(results))]["sequence"]
    return out


@pytest.fixture(scope="module")
def generator(tiny_mlm_dir, pos_nlp):
    return CEClipNegativeGenerator.from_pretrained(
        tiny_mlm_dir,
        "all",
        tagger=spacy_tagger(pos_nlp),
        device="cpu",
        dtype=torch.float32,
        seed=7,
        batch_size=3,
        progress=False,
    )


def test_records_equal_the_released_procedure(generator, pos_nlp, tmp_path):
    from transformers import pipeline

    fill_mask = pipeline("fill-mask", model=generator.model, tokenizer=generator.tokenizer)
    captions = [*CAPTIONS, *EXTRA]
    generator.generate_to_jsonl(captions, tmp_path / "ce.jsonl")
    records = [json.loads(line) for line in (tmp_path / "ce.jsonl").read_text().splitlines()]
    assert len(records) == 4 * len(captions)
    for record in records:
        caption = captions[record["index"]]
        if caption is None:
            assert record["reason"] == "empty input"
            continue
        expected = _reference(caption, pos_nlp, fill_mask, seed=7)[record["kind"]]
        if expected == "###":  # the placeholder: a rejected row, output null
            placeholder = (False, None, validation.FEWER_THAN_THREE_NOUNS)
            assert (record["valid"], record["output"], record["reason"]) == placeholder
        elif not expected.strip():  # our one departure: an empty fill is no caption
            assert (record["valid"], record["output"], record["reason"]) == (
                False,
                expected,
                validation.EMPTY,
            )
        else:  # everything else is valid, as in CE-CLIP: no check that it differs
            assert (record["valid"], record["output"]) == (True, expected), record
    by_key = {(r["index"], r["kind"]): r for r in records}
    # "a man riding a horse near a fence": three nouns, the first two exchanged
    assert by_key[(1, "relation")]["output"] == "a horse riding a man near a fence"
    # two nouns only ("a white cat sitting on a mat"): the placeholder
    assert by_key[(0, "relation")]["reason"] == validation.FEWER_THAN_THREE_NOUNS
    # string replacement over the whole caption, inside other words too
    assert by_key[(len(CAPTIONS), "relation")]["output"] == "a dogs near two dogss and a man"
    # no adjective in "the sky": the bare mask token is filled, and the tiny LM's 4th fill decodes to ""
    sky = by_key[(3, "attribute")]
    assert sky["masked"] == generator.tokenizer.mask_token and sky["candidates"][3]["output"] == ""
    assert (sky["valid"], sky["output"], sky["reason"]) == (False, "", validation.EMPTY)
    assert all(len(r["candidates"]) == 5 for r in records if "candidates" in r)
    assert all(r["output"] == r["candidates"][3]["output"] for r in records if "candidates" in r)


def test_seeded_choice_repeats_and_the_seed_changes_it(generator, tiny_mlm_dir, pos_nlp):
    caption = "a woman eating pizza with a man on a bench"
    first = [c.output for c in generator.generate_kinds([caption])[0].values()]
    assert first == [c.output for c in generator.generate_kinds([caption, "two dogs"])[0].values()]
    outputs = set()
    for seed in range(6):
        other = CEClipNegativeGenerator(
            generator.model, generator.tokenizer, "object", tagger=generator.tagger, seed=seed
        )
        outputs.add(other.generate_kinds([caption])[0]["object"].extra["masked"])
    assert len(outputs) > 1  # four nouns to choose from: the seed decides which is masked


def test_cli_default_is_ce_clip_and_records_it(tiny_mlm_dir, pos_nlp, tmp_path, capsys):
    nlp_dir = tmp_path / "pos"
    pos_nlp.to_disk(nlp_dir)
    source = tmp_path / "c.txt"
    source.write_text("a man riding a horse near a fence\nthe sky\n")
    out = tmp_path / "neg.jsonl"
    argv = ["generate", "--negative", "--method", "mlm", "--kind", "all", "--model", str(tiny_mlm_dir),
            "--spacy-model", str(nlp_dir), "--input", str(source), "--output", str(out), "--device", "cpu",
            "--dtype", "float32", "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    capsys.readouterr()
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["options"]["procedure"] == "ce-clip" and manifest["settings"]["picked_index"] == 3
    assert "sha256" in manifest["options"]["model_fingerprint"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # "the sky": one noun ("###"), no adjective and no verb (masked whole, the tiny LM's fill decodes to "")
    reasons = [validation.FEWER_THAN_THREE_NOUNS, validation.EMPTY, validation.EMPTY, None]
    assert [(r["valid"], r["reason"]) for r in rows if r["index"] == 1] == [(r is None, r) for r in reasons]
    assert [r["valid"] for r in rows if r["index"] == 0] == [
        True,
        False,
        True,
        True,
    ]  # a man riding a horse ...


@pytest.mark.parametrize("procedure", ["ce-clip", "ours"])
def test_captions_the_model_cannot_take_are_recorded_not_fatal(procedure, tiny_mlm_dir, pos_nlp, tmp_path):
    too_long = " ".join(["a big dog"] * 30)  # 90 words, the tiny LM has 64 positions
    captions = ["a white cat sitting on a mat", too_long, "a [MASK] on a mat", "a red car"]
    argv = ["generate", "--negative", "--method", "mlm", "--kind", "object", "--model", str(tiny_mlm_dir),
            "--input", str(tmp_path / "c.txt"), "--output", str(tmp_path / "o.jsonl"), "--device", "cpu",
            "--no-progress", "--mlm-procedure", procedure, "--spacy-model", str(tmp_path / "pos")]  # fmt: skip
    pos_nlp.to_disk(tmp_path / "pos")
    (tmp_path / "c.txt").write_text("\n".join(captions) + "\n")
    assert cli.main(argv) == 0
    reasons = {
        r["index"]: r["reason"] for r in map(json.loads, (tmp_path / "o.jsonl").read_text().splitlines())
    }
    assert reasons[1] == validation.TOO_LONG_FOR_MODEL and reasons[2] == validation.MASK_IN_INPUT
    assert reasons[0] is None and reasons[3] is None


def test_ours_masks_whole_words_only(tiny_mlm_dir, pos_nlp):
    ours = mlm.MLMNegativeGenerator.from_pretrained(
        tiny_mlm_dir,
        "object",
        tagger=spacy_tagger(pos_nlp),
        device="cpu",
        dtype=torch.float32,
        progress=False,
    )
    tagged = spacy_tagger(pos_nlp)(["a t-shirt"])[0]
    assert any(w.text == "shirt" and w.pos == "NOUN" for w in tagged)  # the tagger does see "shirt"
    (result,) = ours.generate_kinds(["a t-shirt"])
    assert result["object"].output is None and result["object"].reason == "no word of this part of speech"
    (result,) = ours.generate_kinds(["a man in a t-shirt"])
    assert result["object"].output is not None and "t-shirt" in result["object"].output


def test_types_are_the_generators():
    assert TYPES == ("relation", "attribute", "action", "object")


def test_dataset_card_names_the_procedure_that_made_the_columns(tmp_path):
    from hf_hardpos import columns
    from hf_hardpos.data import coco_typed_negatives
    from hf_hardpos.generation import ce_clip

    def meanings(procedure):
        options = {"kind": "all", "model": "m", "dtype": "float32", "seed": 0, **procedure}
        source = coco_typed_negatives.TypedNegativesSource(tmp_path / "neg.jsonl", TYPES, options)
        negatives = coco_typed_negatives.TypedNegatives({}, dict.fromkeys(TYPES, source))
        return coco_typed_negatives.typed_column_meanings(negatives)

    for kind, name in columns.CE_CLIP_NEGATIVE_TYPES.items():
        assert ce_clip.TYPE_PROCEDURES[kind] in meanings({"procedure": "ce-clip"})[name]
        assert coco_typed_negatives.TYPE_PROCEDURES[kind] in meanings({"procedure": "ours"})[name]
        assert (
            coco_typed_negatives.TYPE_PROCEDURES[kind] in meanings({})[name]
        )  # written before `procedure` was recorded
