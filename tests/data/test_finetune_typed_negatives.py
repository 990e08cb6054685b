"""The COCO builder's `ce_clip` config (issue 14 item 2): CE-CLIP's four typed hard negatives read from
`hardpos generate --negative --method mlm` output, aligned by caption index, and trained on.

The negatives are made by the real masked-LM generator (tiny random BERT + rule-tagged spaCy, see
tests/support/mlm.py) over the captions of a default build, exported the way the docs say; the
expected columns are read from the generation JSONL here, independently of the builder.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from hf_hardpos import cli, columns
from hf_hardpos.data.checks import DataValidationError, MissingSourceError
from hf_hardpos.data.coco_finetune import export_finetune
from hf_hardpos.generation import validation
from hf_hardpos.generation.mlm import TYPES, MLMNegativeGenerator, spacy_tagger
from hf_hardpos.generation.rule_generator import RuleGenerator
from hf_hardpos.generation.run_output import manifest_path
from tests.support.data_sources import (
    COCO_CAPTIONS,
    card_numbers,
    column_sources,
    make_coco_sources,
)
from tests.support.paths import RECIPES

CAPTIONS = [caption for _, _, caption, _, _ in COCO_CAPTIONS]


def load(folder: Path, config: str | None = None) -> datasets.Dataset:
    """`load_dataset` with a cache of the folder's own: `datasets` keys its cache of a local Hub-layout
    folder on the folder's name and its card's metadata (sizes, configs), not on the parquet bytes, so
    two builds named "out" with equal sizes would otherwise read each other's rows."""
    return datasets.load_dataset(
        str(folder), config, split="train", cache_dir=str(folder.parent / "hf_cache")
    )


def build_and_generate(
    tmp_path, tiny_mlm_dir, pos_nlp, *procedure: str, captions=None, report: bool = False
) -> dict:
    """COCO sources (`captions`: tests/support/data_sources.py's `COCO_CAPTIONS` shape, those by default), a default build,
    its captions exported to JSONL, and `hardpos generate --kind all` on them; `procedure`: the extra
    arguments (none: CE-CLIP's, the default)."""
    upstream, annotations, images = (
        tmp_path / "hard_positives",
        tmp_path / "coco",
        tmp_path / "coco" / "train2014",
    )
    make_coco_sources(upstream, annotations, captions, images_dir=images)
    out = tmp_path / "out"
    build = ["build", "finetune", "--upstream-dir", str(upstream), "--coco-annotations", str(annotations),
             "--output-dir", str(out), "--no-progress"]  # fmt: skip
    assert cli.main(build) == 0
    captions = tmp_path / "captions.jsonl"  # the export the builder's error messages and docs describe
    load(out).select_columns(["caption"]).to_json(str(captions))
    pipeline = tmp_path / "pos_pipeline"
    pos_nlp.to_disk(pipeline)
    negatives = tmp_path / "mlm.jsonl"
    assert cli.main(["generate", "--negative", "--method", "mlm", "--kind", "all", "--model", str(tiny_mlm_dir),
                     "--spacy-model", str(pipeline), "--input", str(captions), "--output", str(negatives),
                     "--device", "cpu", "--dtype", "float32", "--no-progress", *procedure,
                     *(["--report"] if report else [])]) == 0  # fmt: skip
    common = {"upstream_dir": upstream, "coco_annotations": annotations, "progress": False}
    return {"build": build, "out": out, "images": images, "negatives": negatives, "common": common}


@pytest.fixture
def coco(tmp_path, tiny_mlm_dir, pos_nlp):
    """`build_and_generate` with our procedure (the card text the tests below read describes ours)."""
    return build_and_generate(tmp_path, tiny_mlm_dir, pos_nlp, "--mlm-procedure", "ours")


def expected_columns(path: Path, rows: int = len(CAPTIONS)) -> dict[str, list[str | None]]:
    """column -> value per caption, straight from the generation records: the output where valid, else null."""
    values = {name: [None] * rows for name in columns.CE_CLIP_NEGATIVE_COLUMNS}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        column = columns.CE_CLIP_NEGATIVE_TYPES[record["kind"]]
        values[column][record["index"]] = record["output"] if record["valid"] else None
    return values


def test_column_names_follow_the_generator_types():
    assert tuple(columns.CE_CLIP_NEGATIVE_TYPES) == TYPES
    assert columns.CE_CLIP_NEGATIVE_COLUMNS == tuple(f"hard_negative_{t}" for t in TYPES)


def test_ce_clip_config_built_loaded_and_trained_with_one_cmr_threshold_per_type(
    coco, tiny_clip_dir, tiny_mlm_dir, tmp_path
):
    out = coco["out"]
    argv = [
        *coco["build"],
        "--mlm-negatives",
        str(coco["negatives"]),
        "--coco-images-dir",
        str(coco["images"]),
    ]
    assert cli.main(argv) == 0
    default, ce_clip = load(out), load(out, "ce_clip")
    assert ce_clip.column_names == [*default.column_names, *columns.CE_CLIP_NEGATIVE_COLUMNS]
    for name in default.column_names:
        if name != "image":
            assert ce_clip[name] == default[name], name  # the same rows, in the same order
    expected = expected_columns(coco["negatives"])
    for name, values in expected.items():
        assert ce_clip[name] == values, name
    assert all(value is None or (value.strip() and value != "None") for v in expected.values() for value in v)
    # Only the first caption has an adjective and a verb ("holding a red umbrella"): nulls, never placeholders.
    for name in (columns.HARD_NEGATIVE_ATTRIBUTE, columns.HARD_NEGATIVE_ACTION):
        assert ce_clip[name][0] is not None and ce_clip[name][1:] == [None, None, None], name
    assert all(any(v is not None for v in values) for values in expected.values())

    readme = (out / "README.md").read_text()
    sources = column_sources(readme)
    for kind, name in columns.CE_CLIP_NEGATIVE_TYPES.items():
        source = sources[name]
        assert f"CE-CLIP {kind} hard negative" in source and "masked LM" in source
        assert f"`{Path(coco['negatives']).name}`" in source and "not CE-CLIP's released negatives" in source
        assert f"masked LM `{tiny_mlm_dir}`, dtype float32, spaCy pipeline `" in source
        present = sum(v is not None for v in expected[name])
        assert f"| `{name}` | {present:,} | 0 |" in readme  # the measured non-null count per type
    assert card_numbers(readme, "Configs and row counts")["ce_clip"]["rows"] == 4
    assert 'load_dataset("hardpos/coco", "ce_clip", split="train")' in readme
    assert (
        "CE-CLIP used distilroberta-base" in readme and "with a masked LM at spaCy part-of-speech" in readme
    )
    provenance = readme.split("## Provenance", 1)[1]
    line = next(line for line in provenance.splitlines() if line.startswith("- mlm.jsonl"))
    assert line.startswith("- mlm.jsonl (ce_clip typed negatives: relation, attribute, action, object): ")
    assert "sha256 " in line and "--method mlm --kind all" in line

    # A few steps of the CE-CLIP recipe on the ce_clip config (overrides: tiny model, CPU, 3 steps).
    from transformers import CLIPModel, CLIPProcessor

    from hf_hardpos.training import HardPosTrainer
    from hf_hardpos.training.finetune_args import parse_arguments

    _, data_args, args, _ = parse_arguments([
        str(RECIPES / "ce-clip.yaml"), "--dataset", str(out), "--output_dir", str(tmp_path / "run"),
        "--per_device_train_batch_size", "2", "--max_steps", "4", "--learning_rate", "1e-3", "--warmup_steps", "0",
        "--fp16", "false", "--use_cpu", "--report_to", "none", "--disable_tqdm", "true", "--logging_steps", "1",
        "--save_strategy", "no",
    ])  # fmt: skip
    assert (data_args.dataset, data_args.train_split) == (str(out), "train")
    train = load(out, data_args.dataset_config)
    trainer = HardPosTrainer(
        model=CLIPModel.from_pretrained(tiny_clip_dir),
        args=args,
        train_dataset=train,
        processor=CLIPProcessor.from_pretrained(tiny_clip_dir),
    )
    cmr = trainer.objective.terms["cmr"]
    assert cmr.negative_types == columns.CE_CLIP_NEGATIVE_COLUMNS
    assert torch.equal(cmr.thresholds, torch.zeros(4))
    trainer.train()
    thresholds = cmr.thresholds
    assert thresholds.shape == (4,) and bool(torch.isfinite(thresholds).all())
    # CE-CLIP clamps each threshold to [0, u]: a type whose negatives still win keeps 0
    assert bool((thresholds >= 0).all()) and bool((thresholds <= args.cmr_upper_bound).all())
    assert bool((thresholds > 0).any())
    logs = [e for e in trainer.state.log_history if "loss_cmr" in e]
    assert len(logs) == 4 and all(np.isfinite(e["loss_cmr"]) for e in logs)
    for name in columns.CE_CLIP_NEGATIVE_COLUMNS:
        used = [e[f"cmr_threshold/{name}"] for e in logs]  # the threshold each step's CMR term used
        assert (
            used[0] == 0.0 and all(np.isfinite(used)) and all(0.0 <= u <= args.cmr_upper_bound for u in used)
        )
    # 2 steps per epoch (4 rows, batch 2): step 3 starts epoch 1 from 0 (CE-CLIP resets them at every epoch
    # start), step 4 uses step 3's
    assert all(logs[2][f"cmr_threshold/{n}"] == 0 for n in columns.CE_CLIP_NEGATIVE_COLUMNS)
    assert any(logs[3][f"cmr_threshold/{n}"] > 0 for n in columns.CE_CLIP_NEGATIVE_COLUMNS)


def test_ce_clip_procedure_round_trip_with_a_caption_of_no_tagged_word(
    tiny_mlm_dir, pos_nlp, tmp_path, capsys
):
    """The default procedure (CE-CLIP's) on a caption with no noun, adjective or verb masks it whole; the
    tiny LM's 4th fill of a bare mask is a special token, which decodes to "". That record is rejected
    (`validation.EMPTY`, our one departure from TextAugment), counted, and built as a null, so the build
    goes through (it refused the whole file when the record claimed validity)."""
    captions = [*COCO_CAPTIONS, (5, 384029, "On the left", "On the left side", "None")]
    coco = build_and_generate(tmp_path, tiny_mlm_dir, pos_nlp, captions=captions, report=True)
    printed = capsys.readouterr().out  # the build's lines, then generate's summary (JSON) and report
    start, end = printed.index("\n{\n") + 1, printed.index("\n}\n") + 2
    summary, report = json.loads(printed[start:end]), printed[end + 1 :]
    records = [json.loads(line) for line in coco["negatives"].read_text().splitlines()]
    mask = AutoTokenizer.from_pretrained(tiny_mlm_dir).mask_token
    no_tagged_word = [r for r in records if r["index"] == 4 and r["kind"] != "relation"]
    assert [r["masked"] for r in no_tagged_word] == [mask] * 3  # masked whole, as TextAugment does
    empty = [r for r in records if "candidates" in r and not r["candidates"][3]["output"].strip()]
    assert all(r in empty for r in no_tagged_word)  # the fixture's LM fills a bare mask with ""
    for record in records:
        if record in empty:
            assert (record["valid"], record["output"], record["reason"]) == (False, "", validation.EMPTY)
        elif record["kind"] != "relation":  # every other fill stays valid, as in CE-CLIP
            assert record["valid"] and record["output"].strip(), record
    assert summary["reasons"][validation.EMPTY] == len(empty)
    assert summary["valid"] == sum(r["valid"] for r in records)
    for kind in ("attribute", "action", "object"):
        rejected = sum(r["kind"] == kind for r in empty)
        share = 100 * rejected / len(captions)
        assert re.search(
            rf"^{kind}: rejected .*\n(?:  .*\n)*?\s+{rejected}\s+{share:.1f}%\s+{validation.EMPTY}$",
            report,
            re.MULTILINE,
        ), kind

    assert cli.main([*coco["build"], "--mlm-negatives", str(coco["negatives"])]) == 0
    ce_clip = load(coco["out"], "ce_clip")
    expected = expected_columns(coco["negatives"], len(captions))
    assert {name: ce_clip[name] for name in columns.CE_CLIP_NEGATIVE_COLUMNS} == expected
    assert all(ce_clip[columns.CE_CLIP_NEGATIVE_TYPES[r["kind"]]][r["index"]] is None for r in empty)


def mlm_generators(tiny_mlm_dir, pos_nlp) -> dict[str, MLMNegativeGenerator]:
    """One generator per `--kind` (the four types and "all"), sharing one loaded masked LM."""
    loaded = MLMNegativeGenerator.from_pretrained(
        tiny_mlm_dir, "all", tagger=spacy_tagger(pos_nlp), device="cpu", dtype=torch.float32, progress=False
    )
    return {
        kind: MLMNegativeGenerator(loaded.model, loaded.tokenizer, kind, tagger=loaded.tagger, progress=False)
        for kind in (*TYPES, "all")
    }


def test_four_single_type_outputs_make_the_same_config(coco, tiny_mlm_dir, pos_nlp, tmp_path):
    generators = mlm_generators(tiny_mlm_dir, pos_nlp)
    paths = [tmp_path / f"{kind}.jsonl" for kind in TYPES]
    for kind, path in zip(TYPES, paths):
        generators[kind].generate_to_jsonl(CAPTIONS, path)
    report = export_finetune(tmp_path / "split", mlm_negatives=paths[::-1], **coco["common"])
    assert report.counts == {
        "default": 4,
        "ce_clip": 4,
        "swap hard positives": 2,
        "swap-eligible captions": 2,
    }
    ce_clip = load(tmp_path / "split", "ce_clip")
    assert {name: ce_clip[name] for name in columns.CE_CLIP_NEGATIVE_COLUMNS} == expected_columns(
        coco["negatives"]
    )
    for name in columns.CE_CLIP_NEGATIVE_TYPES.values():
        present = sum(value is not None for value in ce_clip[name])
        assert report.flags["ce_clip"][f"{name} present"] == present
    sources = column_sources((tmp_path / "split" / "README.md").read_text())
    assert "POS tagger not recorded (a Python API run)" in sources[columns.HARD_NEGATIVE_OBJECT]
    assert "`object.jsonl`" in sources[columns.HARD_NEGATIVE_OBJECT]


def _mutate(path: Path, tmp_path: Path, lines: list[str] | None = None, manifest: bool = True) -> Path:
    """A copy of a generation output (with its manifest unless told otherwise), its lines replaced if given."""
    copy = tmp_path / "bad" / path.name
    copy.parent.mkdir(exist_ok=True)
    copy.write_text("".join(lines) if lines is not None else path.read_text())
    manifest_path(copy).unlink(missing_ok=True)
    if manifest:
        shutil.copy(manifest_path(path), manifest_path(copy))
    return copy


def test_outputs_that_do_not_match_the_captions_are_refused_naming_file_and_line(
    coco, tiny_mlm_dir, pos_nlp, tmp_path, capsys
):
    good = coco["negatives"]
    lines = good.read_text().splitlines(keepends=True)
    assert len(lines) == 4 * len(TYPES)

    def refused(paths, match, error=DataValidationError):
        with pytest.raises(error, match=match):
            export_finetune(tmp_path / "never", mlm_negatives=paths, **coco["common"])
        assert not (tmp_path / "never").exists()  # checked before anything is built

    generators = mlm_generators(tiny_mlm_dir, pos_nlp)
    reordered = tmp_path / "reordered.jsonl"
    generators["all"].generate_to_jsonl(CAPTIONS[::-1], reordered)
    refused(
        [reordered], rf"{reordered}: generated from other captions than those of .*captions_train2017.json"
    )
    fewer = tmp_path / "fewer.jsonl"
    generators["all"].generate_to_jsonl(CAPTIONS[:3], fewer)
    refused([fewer], rf"{fewer}: generated from 3 captions \(its manifest\) but .* has 4")

    tampered = json.loads(lines[5])
    tampered["input"] = "a cat on a sofa"
    bad = _mutate(good, tmp_path, [*lines[:5], json.dumps(tampered) + "\n", *lines[6:]])
    refused([bad], rf"{bad} line 6: written for input 'a cat on a sofa' at index 1")
    bad = _mutate(good, tmp_path, lines[:-1])
    refused([bad], rf"{bad}: no record for 1 of the 4 captions for type object \(first: caption index 3\)")
    bad = _mutate(good, tmp_path, [*lines[:-1], lines[-1][:20]])
    refused([bad], rf"{bad} line 16: incomplete last line")
    bad = _mutate(good, tmp_path, [*lines, lines[2]])
    refused(
        [bad], rf"{bad} line 17: a second record for caption index 0, type action \(the first is on line 3\)"
    )
    bad = _mutate(good, tmp_path, manifest=False)
    refused([bad], rf"{bad}: no manifest beside it \(mlm.jsonl.manifest.json\)")
    refused([tmp_path / "absent.jsonl"], "absent.jsonl: file not found", MissingSourceError)

    rules = tmp_path / "rules.jsonl"
    RuleGenerator("replace", negative=True, progress=False).generate_to_jsonl(CAPTIONS, rules)
    refused([rules], rf"{rules}: written by `hardpos generate` with method 'rules'")
    attribute = tmp_path / "attribute.jsonl"
    generators["attribute"].generate_to_jsonl(CAPTIONS, attribute)
    refused([attribute], r"no records of type\(s\) relation, action, object")
    refused([good, attribute], rf"{attribute}: supplies type attribute, which {good} supplies too")

    # The command line: one line naming the file, exit 2.
    assert cli.main([*coco["build"], "--mlm-negatives", str(fewer)]) == 2
    assert f"error: {fewer}: generated from 3 captions" in capsys.readouterr().err
