"""SugarCrepe and SugarCrepe++ builders on the REAL upstream files (tests/fixtures/upstream) with placeholder
COCO images: the papers' counts, rows aligned with the sources, SC++'s defective rows flagged, errors."""

import json

import datasets
import pytest

from hf_hardpos.data.checks import DataValidationError, MissingImageError
from hf_hardpos.data.dataset_card import completeness_text
from hf_hardpos.data.sugarcrepe import (
    SUGARCREPE_COUNTS,
    SUGARCREPE_PP_COUNTS,
    export_sugarcrepe,
    export_sugarcrepe_pp,
)
from tests.support.data_sources import (
    card_numbers,
    card_section,
    card_sources,
    column_sources,
    fake_downloads,
    make_coco_placeholders,
    unpack_upstream,
    write_json,
)
from tests.support.paths import REPO


def upstream_rows(root, subset):
    """The upstream rows as (key, filename, caption, caption2 or None, negative_caption), file order."""
    data = json.loads((root / "data" / f"{subset}.json").read_text())
    if isinstance(data, dict):
        return [(int(k), r["filename"], r["caption"], None, r["negative_caption"]) for k, r in data.items()]
    return [(r["id"], r["filename"], r["caption"], r["caption2"], r["negative_caption"]) for r in data]


def coco_images(root, tmp_path, subsets):
    names = [row[1] for subset in subsets for row in upstream_rows(root, subset)]
    return tmp_path / "val2017", make_coco_placeholders(tmp_path / "val2017", names)


def check_rows_and_images(out, root, subset, image_bytes, *, with_positive):
    """Every built row equals its upstream row, in upstream order, with the image named by `filename`."""
    loaded = datasets.load_dataset(str(out), subset, split="test")
    loaded = loaded.cast_column("image", datasets.Image(decode=False))
    expected = upstream_rows(root, subset)
    assert loaded.num_rows == len(expected)
    assert loaded["image_id"] == [row[1] for row in expected]
    assert loaded["caption"] == [row[2] for row in expected]
    assert loaded["hard_negative"] == [row[4] for row in expected]
    if with_positive:
        assert loaded["hard_positive"] == [row[3] for row in expected]
        assert loaded["upstream_id"] == [row[0] for row in expected]
    else:
        assert "hard_positive" not in loaded.column_names
        assert loaded["upstream_key"] == [row[0] for row in expected]
    assert [image["bytes"] for image in loaded["image"]] == [image_bytes[row[1]] for row in expected]
    return loaded


def build_from_real_files(tmp_path, name: str, counts: dict[str, int]):
    """Build a benchmark from its real upstream files (tests/fixtures/upstream) with placeholder COCO
    images; returns the folder, the upstream root, the report and the image bytes by file name."""
    root = unpack_upstream(name, tmp_path / name)
    images_dir, image_bytes = coco_images(root, tmp_path, counts)
    export = {"sugarcrepe": export_sugarcrepe, "sugarcrepe_pp": export_sugarcrepe_pp}[name]
    report = export(tmp_path / "out", upstream_dir=root, images_dir=images_dir, progress=False)
    assert report.counts == counts == report.expected_counts
    return tmp_path / "out", root, report, image_bytes


@pytest.mark.slow
def test_sugarcrepe_real_files_give_the_papers_counts(tmp_path):
    out, root, report, image_bytes = build_from_real_files(tmp_path, "sugarcrepe", SUGARCREPE_COUNTS)
    assert sum(report.counts.values()) == 7_511  # SugarCrepe paper
    assert datasets.get_dataset_config_names(str(out)) == list(SUGARCREPE_COUNTS)
    for subset in SUGARCREPE_COUNTS:
        check_rows_and_images(out, root, subset, image_bytes, with_positive=False)
    swap_obj = datasets.load_dataset(str(out), "swap_obj", split="test")
    assert (
        108 not in swap_obj["upstream_key"] and swap_obj["upstream_key"][-1] == 245
    )  # upstream skips key 108
    # Word-order-only negatives, measured (sugar-crepe #10): none for add/replace, most swap_obj rows.
    flags = {subset: report.flags[subset]["negative_same_words"] for subset in SUGARCREPE_COUNTS}
    assert flags["add_att"] == flags["add_obj"] == 0
    assert flags["swap_obj"] > SUGARCREPE_COUNTS["swap_obj"] // 2
    assert report.skipped_rows == {} and report.local_variants == []
    readme = (out / "README.md").read_text()
    configs = card_numbers(readme, "Configs and row counts")
    assert configs == {
        name: {"rows": count, "paper": count, "shards": 1} for name, count in SUGARCREPE_COUNTS.items()
    }
    provenance = card_sources(readme)
    assert provenance == report.sources
    assert provenance["data/add_att.json"].startswith(
        "https://raw.githubusercontent.com/RAIVNLab/sugar-crepe/0047054b243992f0fad63d6f64f7544862daf846/data/add_att.json"
    )
    assert provenance["data/add_att.json"].endswith(
        "sha256 012d88d729693d193760e6f3393b06a1cf874380a9db0062e937201199fe044d"
    )
    assert (
        card_section(readme, "Citation").strip().startswith("```bibtex\n@inproceedings{hsieh2023sugarcrepe,")
    )


def test_sugarcrepe_pp_real_files_counts_alignment_and_defects(tmp_path):
    out, root, report, image_bytes = build_from_real_files(tmp_path, "sugarcrepe_pp", SUGARCREPE_PP_COUNTS)
    assert sum(report.counts.values()) == 4_757  # SugarCrepe++ paper
    defective = {}
    for subset in SUGARCREPE_PP_COUNTS:
        loaded = check_rows_and_images(out, root, subset, image_bytes, with_positive=True)
        rows = upstream_rows(root, subset)
        # Flags are computed from the row itself, and every defective upstream row is flagged, none dropped.
        assert loaded["negative_equals_caption"] == [r[4] == r[2] for r in rows]
        assert loaded["hard_positive_equals_caption"] == [r[3] == r[2] for r in rows]
        defective[subset] = (
            [i for i, flag in enumerate(loaded["negative_equals_caption"]) if flag],
            [i for i, flag in enumerate(loaded["hard_positive_equals_caption"]) if flag],
        )
    # The known defects of the real files: SC++ swap_obj rows 2 and 8 repeat the caption as the negative,
    # replace_att row 14 repeats it as caption2.
    assert defective == {
        "replace_att": ([], [14]),
        "replace_obj": ([], []),
        "replace_rel": ([], []),
        "swap_att": ([], []),
        "swap_obj": ([2, 8], []),
    }
    assert report.flags["swap_obj"] == {"negative_equals_caption": 2, "hard_positive_equals_caption": 0}
    readme = (out / "README.md").read_text()
    assert card_numbers(readme, "Known defects of the upstream data") == report.flags
    assert card_numbers(readme, "Configs and row counts")["replace_obj"] == {
        "rows": 1_652,
        "paper": 1_652,
        "shards": 1,
    }
    assert card_sources(readme)["data/swap_obj.json"].startswith(
        "https://raw.githubusercontent.com/Sri-Harsha/scpp/c083bbf039a5ca215acaf25e7ee736d2ea6f3864/data/swap_obj.json"
    )
    assert "`caption2`" in column_sources(readme)["hard_positive"]  # the card names the source of each column


def test_sugarcrepe_pp_skip_missing_counts_distinct_images_and_dropped_rows(tmp_path):
    root = unpack_upstream("sugarcrepe_pp", tmp_path / "scpp")
    subsets = ["swap_obj", "swap_att"]
    images_dir, _ = coco_images(root, tmp_path, subsets)
    shared = sorted(
        {r[1] for r in upstream_rows(root, "swap_obj")} & {r[1] for r in upstream_rows(root, "swap_att")}
    )[0]
    (images_dir / shared).unlink()
    with pytest.raises(MissingImageError, match=f"file name {shared}"):
        export_sugarcrepe_pp(
            tmp_path / "out", upstream_dir=root, images_dir=images_dir, subsets=subsets, progress=False
        )
    report = export_sugarcrepe_pp(
        tmp_path / "out",
        upstream_dir=root,
        images_dir=images_dir,
        subsets=subsets,
        skip_missing=True,
        progress=False,
    )
    dropped = {s: sum(r[1] == shared for r in upstream_rows(root, s)) for s in subsets}
    assert report.skipped_missing_images == {"swap_obj": [shared], "swap_att": [shared]}
    assert report.distinct_missing_images == 1
    assert report.skipped_rows == dropped
    assert report.counts == {s: SUGARCREPE_PP_COUNTS[s] - dropped[s] for s in subsets}
    readme = (tmp_path / "out" / "README.md").read_text()
    assert completeness_text(report) in readme
    assert card_numbers(readme, "Configs and row counts") == {
        s: {"rows": report.counts[s], "paper": SUGARCREPE_PP_COUNTS[s], "shards": 1} for s in subsets
    }


def test_malformed_upstream_rows_name_file_and_row(tmp_path):
    root = tmp_path / "sugar-crepe"
    write_json(root / "data" / "swap_obj.json", {"0": {"filename": "a.jpg", "caption": "c"}})
    with pytest.raises(DataValidationError, match=r"swap_obj.json: row 0 lacks field\(s\) negative_caption"):
        export_sugarcrepe(tmp_path / "out", upstream_dir=root, subsets=["swap_obj"], embed_images=False)
    write_json(root / "data" / "swap_obj.json", [{"filename": "a.jpg"}])
    with pytest.raises(DataValidationError, match="swap_obj.json: expected a JSON object"):
        export_sugarcrepe(tmp_path / "out", upstream_dir=root, subsets=["swap_obj"], embed_images=False)
    with pytest.raises(DataValidationError, match="unknown sugarcrepe_pp subset"):
        export_sugarcrepe_pp(tmp_path / "out", upstream_dir=root, subsets=["add_att"], embed_images=False)


def test_scripts_and_hardpos_build(tmp_path, capsys):
    import runpy

    from hf_hardpos.cli import main as hardpos

    root = unpack_upstream("sugarcrepe_pp", tmp_path / "scpp")
    images_dir, _ = coco_images(root, tmp_path, ["swap_obj"])
    script = REPO / "dataset_scripts" / "sugarcrepe_pp.py"
    main = runpy.run_path(str(script))["main"]
    common = ["--upstream-dir", str(root), "--subsets", "swap_obj", "--no-progress"]
    assert main([*common, "--images-dir", str(images_dir), "--output-dir", str(tmp_path / "a")]) == 0
    saved = json.loads((tmp_path / "a" / "build_report.json").read_text())
    assert saved["counts"] == saved["expected_counts"] == {"swap_obj": 245}
    assert datasets.load_dataset(str(tmp_path / "a"), "swap_obj", split="test").num_rows == 245
    # Without images, through `hardpos build` directly.
    assert (
        hardpos(["build", "sugarcrepe_pp", *common, "--no-images", "--output-dir", str(tmp_path / "b")]) == 0
    )
    # Bad input: one line naming the problem, exit 2.
    assert (
        hardpos(
            [
                "build",
                "sugarcrepe_pp",
                *common,
                "--images-dir",
                str(tmp_path / "none"),
                "--output-dir",
                str(tmp_path / "c"),
            ]
        )
        == 2
    )
    assert "--images-dir" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert hardpos(["build", "sugarcrepe", "--output-dir", str(tmp_path / "file" / "x")]) == 2
    assert "--output-dir" in capsys.readouterr().err
    script = REPO / "dataset_scripts" / "sugarcrepe.py"
    sc_root = unpack_upstream("sugarcrepe", tmp_path / "sugar-crepe")
    main = runpy.run_path(str(script))["main"]
    argv = [
        "--upstream-dir",
        str(sc_root),
        "--subsets",
        "swap_att",
        "--no-images",
        "--output-dir",
        str(tmp_path / "d"),
    ]
    assert main([*argv, "--max-shard-size", "lots"]) == 2
    assert "--max-shard-size" in capsys.readouterr().err
    assert main(argv) == 0
    assert datasets.load_dataset(str(tmp_path / "d"), "swap_att", split="test").num_rows == 666


def test_default_sources_are_the_pinned_upstream_files_and_coco_val2017(tmp_path, monkeypatch):
    """Without local folders: the JSON comes from the pinned commit's raw URL and the images from COCO's
    val2017.zip, both through the download manager (faked: tests never touch the network)."""
    root = unpack_upstream("sugarcrepe_pp", tmp_path / "scpp")
    extracted = tmp_path / "extracted"
    coco_images(root, extracted, ["swap_obj"])  # -> extracted/val2017/<file name>
    raw = "https://raw.githubusercontent.com/Sri-Harsha/scpp/c083bbf039a5ca215acaf25e7ee736d2ea6f3864/"
    requested = fake_downloads(
        monkeypatch, raw, root, {"http://images.cocodataset.org/zips/val2017.zip": extracted}
    )
    report = export_sugarcrepe_pp(tmp_path / "out", subsets=["swap_obj"], progress=False)
    assert report.counts == {"swap_obj": 245}
    assert requested == [raw + "data/swap_obj.json", "http://images.cocodataset.org/zips/val2017.zip"]
    assert report.sources["images"] == "COCO val2017: http://images.cocodataset.org/zips/val2017.zip"


def test_hardpos_eval_reads_the_built_sugarcrepe_pp(tmp_path, tiny_clip_dir, capsys):
    """SC++ rows are (c, c_p, c_n): `hardpos eval` scores them as a hard-positive set (augmented accuracy,
    brittleness) straight from the built folder."""
    from hf_hardpos.cli import main as hardpos

    root = unpack_upstream("sugarcrepe_pp", tmp_path / "scpp")
    images_dir, _ = coco_images(root, tmp_path, ["swap_obj"])
    export_sugarcrepe_pp(
        tmp_path / "out", upstream_dir=root, images_dir=images_dir, subsets=["swap_obj"], progress=False
    )
    argv = ["eval", "--model", str(tiny_clip_dir), "--dataset", str(tmp_path / "out"), "--no-progress"]
    assert hardpos([*argv, "--output", str(tmp_path / "eval")]) == 0
    table = capsys.readouterr().out
    assert "swap_obj" in table and "brittle" in table.lower()
