"""COCO fine-tuning builder: captions + upstream hard positives + generated hard negatives, nulls not "None"."""

import json
from pathlib import Path

import datasets
import pytest

from hf_hardpos.data.checks import (
    DataValidationError,
    MissingImageError,
    MissingSourceError,
)
from hf_hardpos.data.coco_captions import get_coco_split
from hf_hardpos.data.coco_finetune import attach_coco_images, export_finetune
from hf_hardpos.data.coco_finetune_card import column_meanings_for, swap_eligible
from tests.support.data_sources import (
    COCO_CAPTIONS,
    COCO_IMAGES,
    card_numbers,
    column_sources,
    make_coco_sources,
    write_json,
)
from tests.support.paths import REPO


def fake_replace(caption: str) -> str | None:
    return caption.replace("red", "blue") if "red" in caption else None


def fake_swap(caption: str) -> str | None:
    return " ".join(reversed(caption.split())) if " and " in caption else None


NEGATIVES = {"replace": fake_replace, "swap": fake_swap}


@pytest.fixture
def sources(tmp_path):
    upstream, coco = tmp_path / "hard_positives", tmp_path / "coco"
    make_coco_sources(upstream, coco, images_dir=coco / "train2014")
    return upstream, coco


def test_build_export_load_gives_the_same_rows(sources, tmp_path):
    upstream, coco = sources
    out = tmp_path / "out"
    report = export_finetune(
        out, upstream_dir=upstream, coco_annotations=coco / "annotations", negative_generators=NEGATIVES
    )
    assert report.counts == {"default": 4, "swap hard positives": 2, "swap-eligible captions": 2}
    loaded = datasets.load_dataset(str(out), split="train")
    assert "image" not in loaded.column_names
    for row, (caption_id, image_id, caption, replace_hp, swap_hp) in zip(loaded, COCO_CAPTIONS):
        assert row["caption_id"] == caption_id and row["image_id"] == str(image_id)
        assert row["file_name"] == COCO_IMAGES[image_id] and row["caption"] == caption
        assert row["hard_positive_replace"] == replace_hp.strip()
        assert row["hard_positive_swap"] == (None if swap_hp == "None" else swap_hp.strip())
        assert row["hard_negative_replace"] == fake_replace(caption)
        assert row["hard_negative_swap"] == fake_swap(caption)
    assert "None" not in loaded["hard_positive_swap"]
    flags = json.loads((out / "build_report.json").read_text())["flags"]["default"]
    assert flags["hard_positive_replace equal to caption"] == 1  # the fixture's unchanged LLM output

    joined = attach_coco_images(loaded, coco / "train2014")
    assert joined[0]["image"].size == (16, 12)


def test_embedded_images_and_missing_image(sources, tmp_path):
    upstream, coco = sources
    common = dict(upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES)
    export_finetune(tmp_path / "out", coco_images_dir=coco / "train2014", **common)
    raw = datasets.load_dataset(str(tmp_path / "out"), split="train").cast_column(
        "image", datasets.Image(decode=False)
    )
    assert raw[0]["image"]["bytes"] == (coco / "train2014" / COCO_IMAGES[57870]).read_bytes()

    (coco / "train2014" / COCO_IMAGES[384029]).unlink()
    with pytest.raises(MissingImageError, match=COCO_IMAGES[384029]):
        export_finetune(tmp_path / "out", coco_images_dir=coco / "train2014", **common)
    report = export_finetune(
        tmp_path / "out", coco_images_dir=coco / "train2014", skip_missing=True, **common
    )
    assert report.counts["default"] == 2 and report.skipped_rows == {"default": 2}


def test_line_count_and_bad_line_errors(sources, tmp_path):
    upstream, coco = sources
    common = dict(upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES)
    swap_file = upstream / "hard_positives_ft" / "swap_hp.jsonl"
    lines = swap_file.read_text().splitlines(keepends=True)
    swap_file.write_text("".join(lines[:-1]))
    with pytest.raises(DataValidationError, match="has 3 lines but .*captions_train2017.json has 4 captions"):
        export_finetune(tmp_path / "out", **common)
    swap_file.write_text("".join(lines[:2]) + "{not json\n" + lines[3])
    with pytest.raises(DataValidationError, match="line 3 is not valid JSON"):
        export_finetune(tmp_path / "out", **common)
    with pytest.raises(ValueError, match="negative_generators lacks"):
        export_finetune(
            tmp_path / "out",
            upstream_dir=upstream,
            coco_annotations=coco,
            negative_generators={"replace": fake_replace},
        )


def test_default_generators_are_the_package_rules(sources, tmp_path):
    rules = pytest.importorskip("hf_hardpos.generation.rules")
    upstream, coco = sources
    export_finetune(tmp_path / "out", upstream_dir=upstream, coco_annotations=coco)
    loaded = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert loaded["hard_negative_swap"] == [rules.swap_hard_negative(c) for _, _, c, _, _ in COCO_CAPTIONS]
    produced = [n for n in loaded["hard_negative_replace"] if n is not None]
    assert produced and all(n not in [c for _, _, c, _, _ in COCO_CAPTIONS] for n in produced)


def test_script(sources, tmp_path):
    import runpy

    upstream, coco = sources
    main = runpy.run_path(str(REPO / "dataset_scripts" / "coco_finetune.py"))["main"]
    pytest.importorskip("hf_hardpos.generation.rules")
    out = tmp_path / "out"
    assert (
        main(["--upstream-dir", str(upstream), "--coco-annotations", str(coco), "--output-dir", str(out)])
        == 0
    )
    assert datasets.load_dataset(str(out), split="train").num_rows == 4
    assert (
        main(["--upstream-dir", str(upstream), "--coco-annotations", str(tmp_path), "--output-dir", str(out)])
        == 2
    )  # input error


def test_card_says_where_each_column_comes_from_and_whose_negatives_they_are(sources, tmp_path):
    """Issue 9 item 8: the rule-made hard negatives are not called the paper's; every column has a source."""
    upstream, coco = sources
    export_finetune(
        tmp_path / "out", upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES
    )
    readme = (tmp_path / "out" / "README.md").read_text()
    sources_by_column = column_sources(readme)
    names = datasets.load_dataset(str(tmp_path / "out"), split="train").column_names
    assert sources_by_column == {
        name: column_meanings_for(get_coco_split("train2017"))[name] for name in names
    }
    assert all(sources_by_column.values())
    for name in ("hard_negative_replace", "hard_negative_swap"):
        assert "not the paper's" in sources_by_column[name]
    assert "replace_hp.jsonl" in sources_by_column["hard_positive_replace"]
    assert "the paper's hard negatives" not in readme.lower()


def _train2017_file(coco, captions):
    """A train2017-shaped captions file: `images` and `annotations` in COCO's layout, in this order."""
    write_json(coco / "annotations" / "captions_train2017.json", {
        "info": {"year": 2017}, "licenses": [],
        "images": [{"id": i, "file_name": f"{i:012d}.jpg", "height": 12, "width": 16} for i in sorted({c[1] for c in captions})],
        "annotations": [{"image_id": i, "id": a, "caption": c} for a, i, c in captions],
    })  # fmt: skip


def test_train2017_rows_follow_caption_file_order_and_upstream_jsonl_lines(tmp_path):
    """One row per caption of captions_train2017.json, in its order, the n-th line of each upstream
    hard_positives_ft file on the n-th caption ("None" -> null, as json.dumps wrote it upstream)."""
    upstream, coco = tmp_path / "hard_positives", tmp_path / "coco"
    captions = [(9, 30, "A cat and a dog sleeping"), (4, 10, "A man riding a red horse"),
                (7, 20, "Bread and butter on a plate"), (1, 10, "Salt and pepper and oil and vinegar on a long wooden "
                                                           "table next to the old window frame")]  # fmt: skip
    _train2017_file(coco, captions)
    replace = [
        "A cat and a dog napping",
        "A man riding a crimson horse",
        "Bread and butter on a dish",
        "Salt ...",
    ]
    swap = ["A dog and a cat sleeping", "None", "Butter and bread on a plate", "None"]
    folder = upstream / "hard_positives_ft"
    folder.mkdir(parents=True)
    (folder / "replace_hp.jsonl").write_text("".join(json.dumps(x) + "\n" for x in replace))
    (folder / "swap_hp.jsonl").write_text("".join(json.dumps(x) + "\n" for x in swap))
    report = export_finetune(tmp_path / "out", upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES,
                             progress=False)  # fmt: skip
    rows = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert rows["caption_id"] == [9, 4, 7, 1] and rows["image_id"] == ["30", "10", "20", "10"]
    assert rows["file_name"] == [
        "000000000030.jpg",
        "000000000010.jpg",
        "000000000020.jpg",
        "000000000010.jpg",
    ]
    assert rows["hard_positive_replace"] == replace
    assert rows["hard_positive_swap"] == [
        "A dog and a cat sleeping",
        None,
        "Butter and bread on a plate",
        None,
    ]
    # SWAP eligibility: the word "and" and fewer than 15 words (the last caption has 19 words)
    assert [swap_eligible(c) for _, _, c in captions] == [True, False, True, False]
    assert report.counts["swap-eligible captions"] == 2 and report.counts["swap hard positives"] == 2
    flags = json.loads((tmp_path / "out" / "build_report.json").read_text())["flags"]["default"]
    assert flags["swap hard positives on ineligible captions"] == 0


def test_swap_eligibility_counts_words_and_the_word_and():
    assert swap_eligible("A cat and a dog")
    assert swap_eligible("Cats, dogs and birds.") and swap_eligible("AND so on")
    assert not swap_eligible("A sandy beach with a band")  # "and" inside other words does not count
    assert swap_eligible(" ".join(["word"] * 13 + ["and"]))  # 14 words
    assert not swap_eligible(" ".join(["word"] * 14 + ["and"]))  # 15 words


def test_blank_lines_are_nulls_and_are_counted(sources, tmp_path):
    """A blank line is one caption's missing hard positive, never skipped: skipping it would move every later
    line onto the previous caption, and a stray extra line would hide that from the count check."""
    upstream, coco = sources
    common = dict(upstream_dir=upstream, coco_annotations=coco, negative_generators=NEGATIVES, progress=False)
    swap_file = upstream / "hard_positives_ft" / "swap_hp.jsonl"
    lines = swap_file.read_text().splitlines(keepends=True)
    swap_file.write_text(lines[0] + "\n" + lines[2] + lines[3])  # caption 2's line blank; 4 lines
    export_finetune(tmp_path / "out", **common)
    rows = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert rows["hard_positive_swap"] == [None, None, None, "A bowl of broccoli and rice"]
    swap_file.write_text("".join(lines) + "\n")  # a stray blank line at the end: 5 lines for 4 captions
    with pytest.raises(DataValidationError, match=r"swap_hp.jsonl has 5 lines but .* has 4 captions"):
        export_finetune(tmp_path / "out2", **common)
    swap_file.write_text("".join(lines).replace('"None"', "None"))  # a bare None is a null too
    export_finetune(tmp_path / "out3", **common)
    assert datasets.load_dataset(str(tmp_path / "out3"), split="train")["hard_positive_swap"][0] is None


def test_train2014_is_an_option_without_hard_positives(tmp_path):
    upstream, coco = tmp_path / "hard_positives", tmp_path / "coco"
    make_coco_sources(upstream, coco, split="train2014")
    common = dict(coco_annotations=coco, negative_generators=NEGATIVES, progress=False)
    with pytest.raises(MissingSourceError, match="captions_train2017.json not found"):
        export_finetune(tmp_path / "out", upstream_dir=upstream, **common)
    report = export_finetune(tmp_path / "out", coco_split="train2014", **common)  # no upstream files read
    rows = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert rows["caption"] == [c for _, _, c, _, _ in COCO_CAPTIONS]
    assert rows["file_name"][0] == "COCO_train2014_000000057870.jpg"
    assert rows["hard_positive_replace"] == rows["hard_positive_swap"] == [None] * 4
    assert report.counts["swap hard positives"] == 0
    assert (
        card_numbers((tmp_path / "out" / "README.md").read_text(), "Configs and row counts")["default"][
            "rows"
        ]
        == 4
    )
    with pytest.raises(DataValidationError, match="pass --coco-split train2014"):
        export_finetune(tmp_path / "out", upstream_dir=upstream, **dict(common, coco_annotations=coco / "annotations" /
                                                                        "captions_train2014.json"))  # fmt: skip


# ---- your own hard positives (`--hard-positives`) --------------------------------------------------


def _generate_hard_positives(tmp_path, kind: str, captions: list[str]) -> Path:
    """`hardpos generate --method rules --kind KIND` over the captions in annotation order (as exported from a build)."""
    from hf_hardpos.cli import main

    source = tmp_path / "captions.jsonl"
    source.write_text("".join(json.dumps({"caption": c}) + "\n" for c in captions))
    output = tmp_path / f"{kind}_generated.jsonl"
    assert main(["generate", "--kind", kind, "--method", "rules", "--input", str(source), "--output", str(output),
                 "--no-progress"]) == 0  # fmt: skip
    return output


def test_build_from_generated_hard_positives_joined_by_caption(tmp_path, capsys):
    from hf_hardpos.cli import main

    coco = tmp_path / "coco"
    make_coco_sources(tmp_path / "upstream_unused", coco)
    captions = [c for _, _, c, _, _ in COCO_CAPTIONS]
    replace, swap = (_generate_hard_positives(tmp_path, kind, captions) for kind in ("replace", "swap"))
    capsys.readouterr()
    out = tmp_path / "out"
    argv = ["build", "coco_finetune", "--coco-annotations", str(coco), "--output-dir", str(out), "--no-progress",
            "--hard-positives", str(replace), str(swap)]  # fmt: skip
    assert main(argv) == 0
    loaded = datasets.load_dataset(str(out), split="train")
    records = {kind: [json.loads(line) for line in path.read_text().splitlines()] for kind, path in
               (("replace", replace), ("swap", swap))}  # fmt: skip
    for row, (caption_id, _, caption, _, _) in zip(loaded, COCO_CAPTIONS):
        assert row["caption_id"] == caption_id and row["caption"] == caption
    for kind, column in (("replace", "hard_positive_replace"), ("swap", "hard_positive_swap")):
        expected = [r["output"] if r["valid"] else None for r in records[kind]]
        assert loaded[column] == expected
    assert (
        loaded["hard_positive_swap"][1] == "A cat and a dog on a sofa"
    )  # made by the rule, not upstream's file
    assert any(value is not None for value in loaded["hard_positive_replace"])
    readme = (out / "README.md").read_text()
    assert "replace_generated.jsonl" in readme and "not the paper's released ones" in readme


def test_generated_hard_positives_that_do_not_match_are_refused_naming_file_and_line(tmp_path):
    coco = tmp_path / "coco"
    make_coco_sources(tmp_path / "upstream_unused", coco)
    captions = [c for _, _, c, _, _ in COCO_CAPTIONS]
    common = dict(coco_annotations=coco, negative_generators=NEGATIVES)
    other = tmp_path / "other"
    other.mkdir()
    fewer = _generate_hard_positives(other, "replace", captions[:3])
    with pytest.raises(
        DataValidationError, match=r"replace_generated.jsonl: generated from 3 captions .* has 4"
    ):
        export_finetune(tmp_path / "out", hard_positives=[fewer], **common)
    replace = _generate_hard_positives(tmp_path, "replace", captions)
    lines = replace.read_text().splitlines(keepends=True)
    tampered = json.loads(lines[2])
    tampered["input"] = "another caption"
    replace.write_text("".join([*lines[:2], json.dumps(tampered) + "\n", *lines[3:]]))
    with pytest.raises(
        DataValidationError, match=r"replace_generated.jsonl line 3: written for input 'another caption'"
    ):
        export_finetune(tmp_path / "out", hard_positives=[replace], **common)
    replace.write_text("".join(lines[:3]))
    with pytest.raises(DataValidationError, match=r"no record for 1 of the 4 captions for type replace"):
        export_finetune(tmp_path / "out", hard_positives=[replace], **common)
    replace.write_text("".join(lines + lines[:1]))
    with pytest.raises(
        DataValidationError, match=r"replace_generated.jsonl line 5: a second record for caption index 0"
    ):
        export_finetune(tmp_path / "out", hard_positives=[replace], **common)


def test_upstream_format_files_are_accepted_with_their_line_count_checked(tmp_path):
    upstream, coco = tmp_path / "upstream", tmp_path / "coco"
    make_coco_sources(upstream, coco)
    mine = tmp_path / "mine_swap_hp.jsonl"
    mine.write_text("".join(json.dumps(s) + "\n" for *_, s in COCO_CAPTIONS))
    export_finetune(
        tmp_path / "out", hard_positives=[mine], coco_annotations=coco, negative_generators=NEGATIVES
    )
    loaded = datasets.load_dataset(str(tmp_path / "out"), split="train")
    assert loaded["hard_positive_swap"] == [None if s == "None" else s.strip() for *_, s in COCO_CAPTIONS]
    assert loaded["hard_positive_replace"] == [None] * 4  # no file supplied it: null, upstream's not read
    mine.write_text("".join(json.dumps(s) + "\n" for *_, s in COCO_CAPTIONS[:3]))
    with pytest.raises(DataValidationError, match=r"mine_swap_hp.jsonl has 3 lines but .* has 4 captions"):
        export_finetune(
            tmp_path / "out", hard_positives=[mine], coco_annotations=coco, negative_generators=NEGATIVES
        )
    unnamed = tmp_path / "positives.jsonl"
    unnamed.write_text("".join(json.dumps(s) + "\n" for *_, s in COCO_CAPTIONS))
    with pytest.raises(DataValidationError, match="positives.jsonl: no manifest beside it"):
        export_finetune(
            tmp_path / "out", hard_positives=[unnamed], coco_annotations=coco, negative_generators=NEGATIVES
        )
