"""Builds keep every image's bytes, validate before the first row, commit atomically and leave no stale
shard; no command takes a Hub token."""

from __future__ import annotations

import json
import os
import re

import pyarrow.parquet as pq
import pytest

from hf_hardpos.cli import main as hardpos
from hf_hardpos.data.checks import DataValidationError, MissingImageError
from hf_hardpos.data.hub_folder import BUILD_MANIFEST
from hf_hardpos.data.replace import export_replace
from hf_hardpos.data.swap import export_swap
from hf_hardpos.errors import UserInputError
from tests.support.data_sources import (
    REPLACE_ROWS,
    make_replace_upstream,
    make_swap_upstream,
    make_vg_images,
    replace_images,
    write_json,
)
from tests.support.paths import REPO


@pytest.fixture
def replace_sources(tmp_path):
    upstream = make_replace_upstream(tmp_path / "hp")
    files = make_vg_images(tmp_path / "VG", replace_images())
    return upstream, tmp_path / "VG", files


def image_bytes_per_row(folder):
    """(bytes is not null) for every row of every shard, read from the parquet files themselves."""
    present = []
    for shard in sorted(folder.glob("data/*/*.parquet")):
        column = pq.read_table(shard, columns=["image"]).column("image").combine_chunks()
        present += [value["bytes"] is not None for value in column.to_pylist()]
    return present


def test_a_build_run_inside_the_image_root_embeds_every_image(replace_sources, tmp_path, monkeypatch):
    """Issue 29.11: with --images-dir . the stored paths exist from the working directory; the bytes
    must still be stored, and the folder must load from anywhere else with every image."""
    import datasets

    upstream, images_dir, files = replace_sources
    monkeypatch.chdir(images_dir)
    out = tmp_path / "out"
    assert (
        hardpos(
            [
                "build",
                "replace",
                "--upstream-dir",
                str(upstream),
                "--images-dir",
                ".",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = sum(len(subset) for subset in REPLACE_ROWS.values())
    assert image_bytes_per_row(out) == [True] * rows
    monkeypatch.chdir(tmp_path)
    loaded = datasets.load_dataset(str(out), "attributes", split="test")
    first = loaded.cast_column("image", datasets.Image(decode=False))[0]["image"]
    assert first["bytes"] == files[REPLACE_ROWS["attributes"][0][0]].read_bytes()


def test_rebuild_removes_stale_configs_and_shards(replace_sources, tmp_path):
    """Issue 29.12: a rebuild with fewer configs leaves only this build's data/ folders."""
    upstream, images_dir, _ = replace_sources
    out = tmp_path / "out"
    export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)
    assert sorted(p.name for p in (out / "data").iterdir()) == ["attributes", "relations"]
    (out / ".git").mkdir()  # a cloned Hub repository: not the builder's to touch
    export_replace(out, upstream_dir=upstream, images_dir=images_dir, subsets=["relations"], progress=False)
    assert sorted(p.name for p in (out / "data").iterdir()) == ["relations"]
    leftovers = [p for p in out.iterdir() if p.name.startswith(".hardpos") and p.name != BUILD_MANIFEST]
    assert (out / ".git").is_dir() and not leftovers


def test_a_failing_build_leaves_the_previous_one_intact(replace_sources, tmp_path):
    """Issue 22.3: the new build is staged and moved in only when complete; a corrupt image fails before
    anything is written, naming the file and the row, and the previous build still loads as it was."""
    upstream, images_dir, files = replace_sources
    out = tmp_path / "out"
    export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    files["712956"].write_bytes(files["712956"].read_bytes()[:60])  # truncated JPEG
    with pytest.raises(
        MissingImageError, match=r"712956\.jpg: not a readable image .*vl_checklist_attributes\.json: row 4"
    ):
        export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    files["712955"].write_bytes(b"")  # empty file, skipped with --skip-missing and counted
    report = export_replace(
        out, upstream_dir=upstream, images_dir=images_dir, skip_missing=True, progress=False
    )
    assert report.counts == {"attributes": 4, "relations": 4}
    assert report.skipped_rows == {"attributes": 3}


@pytest.mark.parametrize(
    "bbox, message",
    [
        ((float("nan"), 1, 4, 4), r"row 1 field bbox_x is nan, not a finite number"),
        ((1, 1, float("inf"), 4), r"row 1 field bbox_w is inf"),
        ((1, 1, 0.4, 4), r"row 1 has a bbox .* of zero size in pixels"),
        ((40, 30, 5, 5), r"row 1 has a bbox \(40, 30, 45, 35\) outside its 16x12 image"),
    ],
)
def test_bad_bounding_boxes_fail_before_the_first_row(tmp_path, bbox, message):
    """Issue 29.14: NaN, inf, a box rounding to zero pixels, and one outside the image are refused
    with file and row before anything is written (not a crash mid-build, not a black crop)."""
    upstream, aro = tmp_path / "hp", tmp_path / "aro"
    make_swap_upstream(upstream, aro)
    make_vg_images(tmp_path / "VG", {"2323": "VG_100K", "4545": "VG_100K_2"})
    path = aro / "visual_genome_attribution.json"
    rows = json.loads(path.read_text())
    rows[1].update(zip(("bbox_x", "bbox_y", "bbox_w", "bbox_h"), bbox))
    write_json(path, rows)
    with pytest.raises(DataValidationError, match=message):
        export_swap(
            tmp_path / "out", upstream_dir=upstream, aro_dir=aro, images_dir=tmp_path / "VG", progress=False
        )
    assert not (tmp_path / "out" / "README.md").exists()


def test_cache_dir_that_does_not_exist_is_created_before_reading_inputs(replace_sources, tmp_path, capsys):
    upstream, images_dir, _ = replace_sources
    cache = tmp_path / "new" / "cache"
    args = [
        "build",
        "replace",
        "--upstream-dir",
        str(upstream),
        "--images-dir",
        str(images_dir),
        "--no-progress",
    ]
    assert hardpos([*args, "--cache-dir", str(cache), "--output-dir", str(tmp_path / "out")]) == 0
    assert cache.is_dir()
    (tmp_path / "file").write_text("x")
    capsys.readouterr()
    assert (
        hardpos([*args, "--cache-dir", str(tmp_path / "file" / "c"), "--output-dir", str(tmp_path / "o2")])
        == 2
    )
    err = capsys.readouterr().err
    assert "--cache-dir" in err and "Traceback" not in err and not (tmp_path / "o2" / "README.md").exists()


def _all_help_texts():
    """`--help` of hardpos, of every subcommand and of every `hardpos build` dataset."""
    import argparse

    from hf_hardpos import cli

    texts, stack = [], [cli.build_parser()]  # no argv: every command registered
    while stack:
        current = stack.pop()
        texts.append(current.format_help())
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return texts


def test_no_command_takes_a_token(capsys):
    """Issue 28.3: a token on a command line is readable by every user; none of our options takes one."""
    import subprocess
    import sys

    token_option = re.compile(
        r"--[\w-]*token(?![a-z])", re.IGNORECASE
    )  # --token, --hub_token; not --tokenizer
    texts = _all_help_texts()
    assert len(texts) > 10 and any("--tokenizer" in text for text in texts)
    for text in texts:
        assert not token_option.findall(text), token_option.findall(text)
    script = REPO / "examples" / "finetune.py"
    result = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0 and "--output_dir" in result.stdout
    assert not token_option.findall(result.stdout), token_option.findall(result.stdout)


def test_a_token_never_reaches_the_card_or_an_error(replace_sources, tmp_path, monkeypatch, capsys):
    """With HF_TOKEN set, a failing push prints one line without the token, and nothing written holds it."""
    import huggingface_hub

    token = "hf_" + "Q" * 34
    monkeypatch.setenv("HF_TOKEN", token)

    class RefusingApi:
        def __init__(self, token=None):
            assert token is None  # huggingface_hub reads HF_TOKEN itself

        def create_repo(self, repo_id, **kwargs):
            raise PermissionError(f"401 Unauthorized for token {token}")

    monkeypatch.setattr(huggingface_hub, "HfApi", RefusingApi)
    upstream, images_dir, _ = replace_sources
    out = tmp_path / "out"
    rc = hardpos(
        [
            "build",
            "replace",
            "--upstream-dir",
            str(upstream),
            "--images-dir",
            str(images_dir),
            "--output-dir",
            str(out),
            "--no-progress",
            "--push-to-hub",
            "org/replace",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 2 and token not in captured.out + captured.err and "hf_***" in captured.err
    for path in out.rglob("*"):
        assert not path.is_file() or token.encode() not in path.read_bytes()


def test_hardpos_eval_refuses_folders_that_do_not_declare_their_files(
    replace_sources, tmp_path, tiny_clip_dir, capsys
):
    """Issue 22.3: no README (a build killed before it), README without `configs:`, a stale parquet no
    config declares, or a declared pattern with no file: one line naming the folder, exit 2."""
    upstream, images_dir, _ = replace_sources
    out = tmp_path / "out"
    export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)
    argv = [
        "eval",
        "--model",
        str(tiny_clip_dir),
        "--dataset",
        str(out),
        "--batch-size",
        "4",
        "--no-progress",
        "--output",
        str(tmp_path / "eval"),
    ]
    readme = (out / "README.md").read_text()
    stale = out / "data" / "attributes" / "test-00000-of-00002.parquet"
    cases = {
        "no README": lambda: (out / "README.md").unlink(),
        "no configs": lambda: (out / "README.md").write_text("---\nlicense: mit\n---\n# card\n"),
        "undeclared": lambda: (
            stale.parent.parent.joinpath("old").mkdir()
            or stale.parent.parent.joinpath("old", "test.parquet").write_bytes(
                stale.with_name("test-00000-of-00001.parquet").read_bytes()
            )
        ),
        "no file": lambda: stale.with_name("test-00000-of-00001.parquet").rename(stale.parent / "x.bin"),
    }
    for name, damage in cases.items():
        damage()
        capsys.readouterr()
        assert hardpos(argv) == 2, name
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and str(out) in lines[0] and "Traceback" not in err, (name, err)
        strays = [
            p
            for p in (out / "data" / "old" / "test.parquet", out / "data" / "attributes" / "x.bin")
            if p.exists()
        ]
        if strays:  # files the build did not write: refused, never deleted (the user removes them)
            with pytest.raises(UserInputError, match="not written by hardpos build"):
                export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)
            assert all(p.exists() for p in strays)
            for stray in strays:
                stray.unlink()
        export_replace(out, upstream_dir=upstream, images_dir=images_dir, progress=False)  # repaired
    assert (out / "README.md").read_text().split("Built with")[0] == readme.split("Built with")[0]
    assert hardpos(argv) == 0
