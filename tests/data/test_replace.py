"""REPLACE builder: fixture sources -> Hub folder -> load_dataset gives the same rows; bad inputs fail clearly."""

import json

import datasets
import pytest

from hf_hardpos.data.checks import (
    AlignmentError,
    DataValidationError,
    MissingImageError,
)
from hf_hardpos.data.dataset_card import completeness_text
from hf_hardpos.data.replace import export_replace, is_substring_artifact, phrase_diff
from tests.support.data_sources import (
    EXPECTED_ARTIFACTS,
    EXPECTED_DUPLICATE_OF,
    REPLACE_ROWS,
    card_numbers,
    card_section,
    card_sources,
    column_sources,
    fake_downloads,
    make_replace_upstream,
    make_vg_images,
    replace_images,
    write_json,
)
from tests.support.paths import REPO, SHARED_DATA

SHARED_HARD_POSITIVES = SHARED_DATA / "hard_positives"


@pytest.fixture
def sources(tmp_path):
    upstream = make_replace_upstream(tmp_path / "hard_positives")
    images = make_vg_images(tmp_path / "VG", replace_images())
    return upstream, tmp_path / "VG", images


@pytest.mark.parametrize(
    "c, c_p, expected",
    [
        ("walking elephant", "strolling elephant", ("walking", "strolling")),
        ("cat behind car", "cat to the rear of car", ("behind", "to the rear of")),
        ("cup on top of table", "cup on table", ("top of", "")),
        ("black  wetsuit", "ebony  wetsuit", ("black", "ebony")),
        ("same words", "same words", ("", "")),
    ],
)
def test_phrase_diff(c, c_p, expected):
    assert phrase_diff(c, c_p) == expected


def test_substring_artifact_needs_a_partial_word_change():
    table = {("red", "crimson"), ("in", "within"), ("long", "lengthy")}
    assert is_substring_artifact("plant covered in leaf", "plant covecrimson in leaf", table)
    assert is_substring_artifact("window belonging to long car", "window belengthying to lengthy car", table)
    assert not is_substring_artifact("red car", "crimson car", table)
    assert not is_substring_artifact(
        "window in building in scene", "window within building within scene", table
    )


def test_build_export_load_gives_the_same_rows(sources, tmp_path):
    upstream, images_dir, image_files = sources
    out = tmp_path / "out"
    report = export_replace(
        out, upstream_dir=upstream, images_dir=images_dir, union_config_name="all", progress=False
    )

    assert report.counts == {"attributes": 7, "relations": 4, "all": 11}
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == [
        "data/attributes/test-00000-of-00001.parquet",
        "data/relations/test-00000-of-00001.parquet",
    ]
    for subset, rows in REPLACE_ROWS.items():
        loaded = datasets.load_dataset(str(out), subset, split="test")
        assert loaded.num_rows == len(rows)
        for index, (row, (image_id, part, c, c_n, c_p)) in enumerate(zip(loaded, rows)):
            texts = (row["image_id"], row["caption"], row["hard_negative"], row["hard_positive"])
            assert texts == (image_id, c, c_n, c_p)
            assert row["image_path"] == f"{part}/{image_id}.jpg"
            assert row["subset"] == subset and row["upstream_index"] == index
            assert (row["replaced_phrase"], row["replacement"]) == phrase_diff(c, c_p)
            assert row["substring_artifact"] == (index in EXPECTED_ARTIFACTS[subset])
            assert row["duplicate_of"] == EXPECTED_DUPLICATE_OF[subset].get(index)
            assert row["is_duplicate"] == (index in EXPECTED_DUPLICATE_OF[subset])
            assert row["image"].size == (16, 12)
        raw = loaded.cast_column("image", datasets.Image(decode=False))
        for row in raw:  # the original JPEG bytes, not re-encoded
            assert row["image"]["bytes"] == image_files[row["image_id"]].read_bytes()

    union = datasets.load_dataset(str(out), "all", split="test")
    assert union["subset"] == ["attributes"] * 7 + ["relations"] * 4

    card = datasets.load_dataset_builder(str(out), "relations").info
    assert card.splits["test"].num_examples == 4
    saved = json.loads((out / "build_report.json").read_text())
    assert saved["flags"]["attributes"] == {"substring_artifact": 2, "is_duplicate": 1}
    readme = (out / "README.md").read_text()
    defects = "Known defects of the upstream data"
    assert card_numbers(readme, defects) == {
        subset: {
            "substring_artifact rows": len(EXPECTED_ARTIFACTS[subset]),
            "is_duplicate rows": len(EXPECTED_DUPLICATE_OF[subset]),
        }
        for subset in REPLACE_ROWS
    }
    listed = {line for line in card_section(readme, defects).splitlines() if line.startswith("- ")}
    assert listed == {
        f'- {subset}: "{REPLACE_ROWS[subset][index][2]}" -> "{REPLACE_ROWS[subset][index][4]}"'
        for subset, indices in EXPECTED_ARTIFACTS.items()
        for index in indices
    }


def test_build_without_images(sources, tmp_path):
    upstream, _, _ = sources
    export_replace(
        tmp_path / "out", upstream_dir=upstream, embed_images=False, subsets=["relations"], progress=False
    )
    loaded = datasets.load_dataset(str(tmp_path / "out"), "relations", split="test")
    assert "image" not in loaded.column_names and loaded.num_rows == 4


def test_misaligned_row_is_reported_by_index(sources, tmp_path):
    upstream, images_dir, _ = sources
    swapped = upstream / "swapped_data" / "vl_checklist_attributes.json"
    rows = json.loads(swapped.read_text())
    rows[2]["false_caption"] = "green car"
    write_json(swapped, rows)
    expected = r"misaligned on 1 row\(s\): row 2: false_caption 'blue car' != 'green car'"
    with pytest.raises(AlignmentError, match=expected):
        export_replace(tmp_path / "out", upstream_dir=upstream, images_dir=images_dir, progress=False)


def test_length_mismatch_and_missing_field(sources, tmp_path):
    upstream, images_dir, _ = sources
    swapped = upstream / "swapped_data" / "vl_checklist_relations.json"
    rows = json.loads(swapped.read_text())
    write_json(swapped, rows[:-1])
    with pytest.raises(AlignmentError, match="has 4 rows but .* has 3"):
        export_replace(tmp_path / "out", upstream_dir=upstream, images_dir=images_dir, progress=False)
    del rows[1]["image_id"]
    write_json(swapped, rows)
    with pytest.raises(DataValidationError, match="row 1 lacks field"):
        export_replace(tmp_path / "out", upstream_dir=upstream, images_dir=images_dir, progress=False)


def test_missing_image_is_an_error_or_skipped_and_reported(sources, tmp_path):
    upstream, images_dir, image_files = sources
    image_files["712954"].unlink()
    with pytest.raises(MissingImageError, match="image_id 712954"):
        export_replace(tmp_path / "out", upstream_dir=upstream, images_dir=images_dir, progress=False)
    report = export_replace(
        tmp_path / "out", upstream_dir=upstream, images_dir=images_dir, skip_missing=True, progress=False
    )
    assert report.skipped_missing_images == {"attributes": ["712954"], "relations": ["712954"]}
    assert report.counts["attributes"] == 6 and report.counts["relations"] == 3
    loaded = datasets.load_dataset(str(tmp_path / "out"), "attributes", split="test")
    assert "712954" not in loaded["image_id"]
    saved = json.loads((tmp_path / "out" / "build_report.json").read_text())
    assert saved["skipped_rows"] == {"attributes": 1, "relations": 1}


def test_missing_upstream_file_names_the_expected_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="data/vl_checklist_attributes.json"):
        export_replace(tmp_path / "out", upstream_dir=tmp_path, embed_images=False)


def test_script_builds_and_reports_errors(sources, tmp_path, capsys):
    import runpy

    upstream, images_dir, _ = sources
    script = REPO / "dataset_scripts" / "replace.py"
    main = runpy.run_path(str(script))["main"]
    out = tmp_path / "out"
    assert (
        main(["--upstream-dir", str(upstream), "--images-dir", str(images_dir), "--output-dir", str(out)])
        == 0
    )
    saved = json.loads((out / "build_report.json").read_text())
    assert saved["counts"]["relations"] == 4 and saved["expected_counts"]["relations"] == 16_868
    assert datasets.load_dataset(str(out), "relations", split="test").num_rows == 4
    assert (
        main(["--upstream-dir", str(tmp_path / "nowhere"), "--output-dir", str(out)]) == 2
    )  # input error (issue 10)
    assert str(tmp_path / "nowhere" / "data" / "vl_checklist_attributes.json") in capsys.readouterr().err


def test_hardpos_eval_accepts_the_built_folder(sources, tmp_path, tiny_clip_dir, capsys):
    cli = pytest.importorskip("hf_hardpos.cli")
    upstream, images_dir, _ = sources
    out = tmp_path / "out"
    export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)
    assert datasets.get_dataset_config_names(str(out)) == ["attributes", "relations"]
    argv = [
        "eval",
        "--model",
        str(tiny_clip_dir),
        "--dataset",
        str(out),
        "--batch-size",
        "4",
        "--no-progress",
    ]
    assert cli.main([*argv, "--config", "relations", "--output", str(tmp_path / "eval")]) == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    # one config scored (the build record in its provenance still names both of the build's counts)
    assert list(metrics["results"]) == ["relations"] and list(metrics["provenance"]) == ["relations"]
    assert cli.main(argv) == 0  # all declared configs: both subsets and the paper's unweighted mean
    table = capsys.readouterr().out
    assert "attributes" in table and "relations" in table


def test_shared_upstream_data(shared_data, tmp_path):
    """The real upstream files: paper counts, alignment (checked while building) and the known defects."""
    upstream = shared_data / "hard_positives"
    originals = {
        subset: json.loads((upstream / "data" / f"vl_checklist_{subset}.json").read_text())
        for subset in ("attributes", "relations")
    }
    placeholder = make_vg_images(tmp_path / "one", {"x": None}, size=(8, 8))["x"].read_bytes()
    for rows in originals.values():  # an 8x8 placeholder JPEG for each of the ~8k distinct images
        for row in rows:
            path = tmp_path / "VG" / row["image_path"].split("/", 1)[1]
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(placeholder)
    out = tmp_path / "out"
    report = export_replace(out, upstream_dir=upstream, images_dir=tmp_path / "VG", progress=False)
    assert report.counts == {"attributes": 10_575, "relations": 16_868}
    assert report.expected_counts == report.counts  # the paper's rows exactly
    assert report.flags["attributes"]["is_duplicate"] == 186
    assert report.flags["relations"]["is_duplicate"] == 1_403
    for subset, rows in originals.items():
        loaded = datasets.load_dataset(str(out), subset, split="test", cache_dir=str(tmp_path / "cache"))
        loaded = loaded.remove_columns("image")
        assert loaded["caption"] == [row["true_caption"] for row in rows]
        assert loaded["image_id"] == [row["image_id"] for row in rows]
        flagged = {
            (r["caption"], r["hard_positive"]) for r in loaded.filter(lambda r: r["substring_artifact"])
        }
        if subset == "attributes":
            for c, c_p in [
                ("white whiteboard", "ivory ivoryboard"),
                ("plant covered in green leaf", "plant covecrimson in green leaf"),
                ("window belonging to long building", "window belengthying to lengthy building"),
            ]:
                assert (c, c_p) in flagged
        assert all(c_p != c for c, c_p in flagged)
    assert report.flags["attributes"]["substring_artifact"] == 10
    assert report.flags["relations"]["substring_artifact"] == 0


def _fake_downloads(monkeypatch, tmp_path, upstream):
    """Serve the pinned raw URLs from ``upstream`` and the VG archives from folders; returns the log."""
    from hf_hardpos.data.sources import VG_PART_URLS

    archives = {}
    for part, url in VG_PART_URLS.items():
        archives[url] = tmp_path / "extracted" / part
        make_vg_images(archives[url], {i: p for i, p in replace_images().items() if p == part})
    raw = "https://raw.githubusercontent.com/amitakamath/hard_positives/33addaae84b58d96dc8e9251b61d497c536ed23d/"
    requested = fake_downloads(monkeypatch, raw, upstream, archives)
    return raw, requested


def test_default_sources_download_from_the_pinned_commit_and_check_digests(tmp_path, monkeypatch):
    """Without local folders, files come from the pinned commit's raw URLs through the download manager
    (faked here: tests never touch the network), each checked against its recorded digest, and each VG
    archive is fetched only when one of its images is needed. Here the recorded digests and the paper's
    count are set to the fixture's, as if the fixture were the upstream file."""
    from hf_hardpos.data import replace as replace_module
    from hf_hardpos.data.sources import HARD_POSITIVES_REPO, FileDigest, git_blob_of

    upstream = make_replace_upstream(tmp_path / "hard_positives")
    raw, requested = _fake_downloads(monkeypatch, tmp_path, upstream)
    for name in ("data/vl_checklist_relations.json", "swapped_data/vl_checklist_relations.json"):
        monkeypatch.setitem(HARD_POSITIVES_REPO.files, name, FileDigest(git_blob_of(upstream / name)))
    monkeypatch.setitem(replace_module.PAPER_COUNTS, "relations", 4)
    report = export_replace(tmp_path / "out", subsets=["relations"], progress=False)
    assert report.counts == {"relations": 4} and report.local_variants == []
    assert requested[:2] == [
        raw + "data/vl_checklist_relations.json",
        raw + "swapped_data/vl_checklist_relations.json",
    ]
    assert sorted(requested[2:]) == sorted(sources_module_urls())
    provenance = card_sources((tmp_path / "out" / "README.md").read_text())
    assert provenance == report.sources
    assert provenance["data/vl_checklist_relations.json"].startswith(raw + "data/vl_checklist_relations.json")

    # Pinned inputs bind the paper's count: one row fewer than the paper is refused before writing.
    monkeypatch.setitem(replace_module.PAPER_COUNTS, "relations", 5)
    with pytest.raises(
        DataValidationError, match=r"config relations: the upstream files hold 4 rows, the paper 5"
    ):
        export_replace(tmp_path / "refused", subsets=["relations"], progress=False)
    assert not (tmp_path / "refused" / "README.md").exists()


def sources_module_urls():
    from hf_hardpos.data.sources import VG_PART_URLS

    return VG_PART_URLS.values()


def test_a_download_that_is_not_the_pinned_file_is_refused(tmp_path, monkeypatch, sources):
    """The fixture is not the upstream file: downloaded, it fails the digest check (exit 2 from the CLI);
    given as a local copy, it builds, and the card says the rows are not the pinned upstream files."""
    from hf_hardpos.data.sources import UpstreamMismatchError

    upstream, images_dir, _ = sources
    _fake_downloads(monkeypatch, tmp_path, upstream)
    with pytest.raises(
        UpstreamMismatchError, match=r"vl_checklist_relations\.json .* is not the file of amitakamath"
    ):
        export_replace(tmp_path / "out", subsets=["relations"], embed_images=False, progress=False)
    report = export_replace(
        tmp_path / "local", upstream_dir=upstream, subsets=["relations"], embed_images=False, progress=False
    )
    assert report.local_variants == [
        "data/vl_checklist_relations.json",
        "swapped_data/vl_checklist_relations.json",
    ]
    assert not report.counts_must_match
    readme = (tmp_path / "local" / "README.md").read_text()
    assert card_sources(readme) == report.sources
    assert completeness_text(report) in readme


@pytest.mark.skipif(not SHARED_HARD_POSITIVES.is_dir(), reason="needs ../shared/data/hard_positives")
def test_the_recorded_digests_are_those_of_the_upstream_files():
    """The copies in ../shared/data/hard_positives are the files at amitakamath/hard_positives @33addaa
    (their git blob ids are that commit's tree entries); their sha256 and blob ids are the recorded ones."""
    from hf_hardpos.data.sources import HARD_POSITIVES_REPO, git_blob_of
    from hf_hardpos.provenance import sha256_file

    for subset in ("attributes", "relations"):
        for name in (f"data/vl_checklist_{subset}.json", f"swapped_data/vl_checklist_{subset}.json"):
            digest = HARD_POSITIVES_REPO.files[name]
            assert sha256_file(SHARED_HARD_POSITIVES / name) == digest.sha256
            assert git_blob_of(SHARED_HARD_POSITIVES / name) == digest.git_blob


def test_skip_missing_card_counts_distinct_images_and_says_rows_were_dropped(sources, tmp_path):
    """Issue 10: an image used by both subsets is one missing image, and the card says rows were dropped."""
    upstream, images_dir, image_files = sources
    image_files["712954"].unlink()  # used by one attributes row and one relations row
    report = export_replace(
        tmp_path / "out", upstream_dir=upstream, images_dir=images_dir, skip_missing=True, progress=False
    )
    assert report.distinct_missing_images == 1
    assert report.skipped_rows == {"attributes": 1, "relations": 1}
    assert report.skipped_missing_images == {"attributes": ["712954"], "relations": ["712954"]}
    readme = (tmp_path / "out" / "README.md").read_text()
    assert completeness_text(report) in readme
    # The one golden sentence: what a user of an incomplete build reads first.
    assert completeness_text(report).endswith(
        "**Not the complete benchmark: 2 upstream row(s) were dropped** because their image was missing or "
        "unreadable at build time (`--skip-missing`): 1 distinct image(s) in all (attributes: 1 row(s), 1 image(s), "
        "relations: 1 row(s), 1 image(s)). They are listed in `build_report.json`; results on this build are not "
        "comparable with the paper's."
    )
    complete = export_replace(
        tmp_path / "full",
        upstream_dir=upstream,
        images_dir=images_dir,
        subsets=["relations"],
        skip_missing=True,
        progress=False,
    )
    assert complete.counts == {"relations": 3}  # 712954 still missing: the relations row is dropped
    image_files["712954"].write_bytes(image_files["712956"].read_bytes())
    repaired = export_replace(tmp_path / "full", upstream_dir=upstream, images_dir=images_dir, progress=False)
    assert repaired.skipped_rows == {} and repaired.skipped_missing_images == {}
    readme = (tmp_path / "full" / "README.md").read_text()
    assert completeness_text(repaired) in readme
    assert all(column_sources(readme).values())
