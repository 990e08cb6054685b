"""`hardpos compare`: the cross-run table equals the runs' metrics.json; paired tests against hand-computed cases."""

import csv
import io
import json
import re
import shutil
from math import comb

import numpy as np
import pytest
from scipy.stats import binomtest

from hf_hardpos.cli import main
from hf_hardpos.evaluation.aggregation import REPLACE_POOLED, replace_aggregates
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.evaluation.suite import SuiteEntry, run_suite
from hf_hardpos.evaluation.tasks import CAPTION_SELECTION, HARD_POSITIVE
from hf_hardpos.metrics import METRIC_NAMES
from hf_hardpos.reporting.paired import mcnemar_exact_p, paired_difference
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip
from tests.support.paper_data import write_paper_build_report
from tests.support.runs import (
    write_replace_folder,
    write_selection_folder,
    write_swap_folder,
)


@pytest.fixture(scope="module")
def runs(tiny_clip_dir, tmp_path_factory):
    """Two tiny models, each evaluated on one REPLACE-layout folder (`hardpos eval`) and as a suite with SWAP."""
    root = tmp_path_factory.mktemp("compare")
    replace = write_replace_folder(root / "replace")
    swap = write_swap_folder(root / "swap")
    selection = write_selection_folder(root / "selection")
    other = build_tiny_clip(root / "other_model", seed=1)
    out = {}
    for name, model in (("a", tiny_clip_dir), ("b", other)):
        evaluate_model(
            str(model),
            str(replace),
            output_dir=root / f"eval_{name}",
            bootstrap_samples=50,
            progress=False,
            log=lambda m: None,
        )
        out[name] = root / f"eval_{name}"
        entries = [
            SuiteEntry("replace", str(replace), HARD_POSITIVE),
            SuiteEntry("swap", str(swap), HARD_POSITIVE),
            SuiteEntry("selection", str(selection), CAPTION_SELECTION),
        ]
        run_suite(str(model), entries, output_dir=root / f"suite_{name}", progress=False, log=lambda m: None)
        out[f"suite_{name}"] = root / f"suite_{name}"
    return out


def _metrics(folder):
    return json.loads((folder / "metrics.json").read_text())


def _compare(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _records(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_lists_both_runs_with_their_pooled_figures_and_a_paired_interval(runs, capsys, tmp_path):
    target = tmp_path / "table.csv"
    code, _, _ = _compare(capsys, runs["a"], runs["b"], "--format", "csv", "--output", target)
    assert code == 0
    records = _records(target.read_text())
    pooled = {k: _metrics(runs[k])["aggregates"][REPLACE_POOLED] for k in ("a", "b")}
    run_rows = [r for r in records if r["kind"] == "run"]
    assert len({r["row"] for r in run_rows}) == 2
    for record, key in zip([r for r in run_rows if r["metric"] == "brittleness"], ("a", "b")):
        assert float(record["value"]) == pooled[key]["brittleness"]
    for record in run_rows:
        key = "a" if record["row"] == run_rows[0]["row"] else "b"
        assert float(record["value"]) == pooled[key][record["metric"]]  # exactly as saved, never rounded
        assert float(record["ci_low"]) == pooled[key][f"{record['metric']}_ci_low"]
    differences = {r["metric"]: r for r in records if r["kind"] == "difference"}
    assert set(differences) == set(METRIC_NAMES)
    for metric, record in differences.items():
        assert float(record["value"]) == pytest.approx(pooled["b"][metric] - pooled["a"][metric], abs=1e-12)
        assert float(record["ci_low"]) <= float(record["value"]) <= float(record["ci_high"])
        assert (record["p_value"] != "") == (metric != "brittleness")  # McNemar for the two accuracies only


def test_paired_counts_come_from_the_saved_rows(runs, capsys):
    """McNemar's b and c, recounted from both runs' parquet files, give the printed p-value."""
    import pyarrow.parquet as pq

    code, out, _ = _compare(capsys, runs["a"], runs["b"], "--format", "json")
    assert code == 0
    record = next(
        r
        for r in json.loads(out)["records"]
        if r["kind"] == "difference" and r["metric"] == "original_accuracy"
    )
    outcome = {
        k: np.concatenate(
            [
                pq.read_table(runs[k] / f"scores-{c}.parquet")["original_correct"].to_numpy()
                for c in ("attributes", "relations")
            ]
        )
        for k in ("a", "b")
    }
    b = int(np.sum(outcome["a"] & ~outcome["b"]))
    c = int(np.sum(~outcome["a"] & outcome["b"]))
    assert record["p_value"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue if b + c else 1.0)


@pytest.mark.parametrize("b,c", [(0, 0), (1, 9), (0, 5), (3, 3), (7, 2), (12, 30), (640, 730), (685, 685)])
def test_mcnemar_exact_against_the_binomial(b, c):
    """Two-sided exact McNemar: 2 * P(X <= min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1 (scipy's binomtest
    gives the same for p = 1/2, where the distribution is symmetric)."""
    n = b + c
    hand = 1.0 if n == 0 else min(1.0, 2 * sum(comb(n, k) for k in range(min(b, c) + 1)) / 2**n)
    assert mcnemar_exact_p(b, c) == pytest.approx(hand, rel=1e-12)
    if n:
        assert mcnemar_exact_p(b, c) == pytest.approx(binomtest(b, n, 0.5).pvalue, rel=1e-9)
    assert mcnemar_exact_p(1, 9) == pytest.approx(22 / 1024) and mcnemar_exact_p(0, 5) == pytest.approx(
        1 / 16
    )


def test_models_that_differ_on_no_row():
    outcome = np.array([1, 0, 1, 1, 0, 1, 0, 0], dtype=float)
    d = paired_difference(outcome, outcome.copy(), np.repeat(["i1", "i2", "i3", "i4"], 2))
    assert (d.difference, d.ci_low, d.ci_high, d.mcnemar_p) == (0.0, 0.0, 0.0, 1.0)
    assert (d.discordant_a, d.discordant_b) == (0, 0) and not d.excludes_zero


def test_a_model_better_on_every_row():
    a, b = np.zeros(6), np.ones(6)
    d = paired_difference(a, b)
    assert (d.difference, d.ci_low, d.ci_high) == (1.0, 1.0, 1.0) and d.excludes_zero
    assert d.mcnemar_p == pytest.approx(2 / 2**6)


def test_paired_bootstrap_over_images_hand_computed():
    """10 images of 3 rows; B beats A on every row of 5 images and ties A on the other 5. Drawing images, the
    difference is X/10 with X ~ Binomial(10, 1/2): P(X <= 1) = 11/1024 < 2.5% < P(X <= 2) = 56/1024, so the 95%
    interval is [0.2, 0.8]; resampling rows instead would be narrower, which is why images are drawn."""
    images = np.repeat([f"img{i}" for i in range(10)], 3)
    better = np.repeat([1.0] * 5 + [0.0] * 5, 3)
    a = np.zeros(30)
    d = paired_difference(a, better, images, resamples=20_000)
    assert d.difference == 0.5
    assert (d.ci_low, d.ci_high) == (pytest.approx(0.2), pytest.approx(0.8))
    by_rows = paired_difference(a, better, None, resamples=20_000)
    assert by_rows.ci_high - by_rows.ci_low < d.ci_high - d.ci_low


def test_a_run_against_its_own_copy_differs_on_no_row(runs, capsys, tmp_path):
    copy = shutil.copytree(runs["a"], tmp_path / "copy")
    code, out, _ = _compare(capsys, runs["a"], copy, "--format", "json")
    assert code == 0
    diffs = [r for r in json.loads(out)["records"] if r["kind"] == "difference"]
    assert len(diffs) == 3
    for r in diffs:
        assert (r["value"], r["ci_low"], r["ci_high"], r["excludes_zero"]) == (0.0, 0.0, 0.0, False)
        assert r["p_value"] in (None, 1.0)


@pytest.mark.parametrize("edit", ["dtype", "data"])
def test_runs_of_other_data_or_dtype_are_refused_or_flagged(runs, capsys, tmp_path, edit):
    copy = shutil.copytree(runs["b"], tmp_path / "edited")
    saved = _metrics(copy)
    if edit == "dtype":
        saved["run"]["settings"]["precision"] = "bf16"
    else:
        saved["provenance"]["relations"]["dataset"]["sha256"] = "0" * 64
    (copy / "metrics.json").write_text(json.dumps(saved))
    code, _, err = _compare(capsys, runs["a"], copy)
    assert code == 2 and ("dtype fp32 vs bf16" if edit == "dtype" else "data [relations]") in err
    code, out, _ = _compare(capsys, runs["a"], copy, "--allow-mismatch", "--format", "json")
    assert code == 0
    table = json.loads(out)
    assert [r for r in table["records"] if r["kind"] == "difference"] == []  # side by side, never differenced
    assert any("not comparable" in line for line in table["captions"])


def test_paper_protocol_runs_differ_in_dtype_by_design(runs, capsys, tmp_path):
    """Under --protocol paper each model is scored in the dtype the paper's code used, so two such runs are
    compared (dtypes named); another protocol on one side is refused."""
    copies = {}
    for key, precision in (("a", "fp16-weights"), ("b", "fp32")):
        copy = shutil.copytree(runs[key], tmp_path / key)
        saved = _metrics(copy)
        saved["run"]["settings"]["precision"] = precision
        saved["run"]["settings"]["protocol"] = {
            "name": "paper",
            "precision": precision,
            "image_backend": "paper",
        }
        (copy / "metrics.json").write_text(json.dumps(saved))
        copies[key] = copy
    code, out, _ = _compare(capsys, copies["a"], copies["b"], "--format", "json")
    assert code == 0
    table = json.loads(out)
    assert len([r for r in table["records"] if r["kind"] == "difference"]) == 3
    assert any("dtype fp16-weights vs fp32" in line for line in table["captions"])
    code, _, err = _compare(capsys, runs["a"], copies["b"])
    assert code == 2 and "image backend" in err


def test_suite_folders_give_replace_and_swap_groups(runs, capsys):
    code, out, _ = _compare(capsys, runs["suite_a"], runs["suite_b"], "--format", "json")
    assert code == 0
    table = json.loads(out)
    assert list(table["groups"]) == ["REPLACE", "SWAP", "selection"]
    assert table["groups"]["selection"] == ["accuracy"]  # another task: its own metrics
    swap = _metrics(runs["suite_a"] / "swap")["results"]["default"]
    replace = _metrics(runs["suite_a"] / "replace")["aggregates"][REPLACE_POOLED]
    first = [r for r in table["records"] if r["kind"] == "run"][0]["row"]
    values = {(r["benchmark"], r["metric"]): r["value"] for r in table["records"] if r["row"] == first}
    for metric in METRIC_NAMES:
        assert values[("SWAP", metric)] == swap[metric]
        assert values[("REPLACE", metric)] == replace[metric]
    saved = _metrics(runs["suite_a"])["datasets"]["selection"]["results"]["default"]
    assert values[("selection", "accuracy")] == saved["accuracy"]
    # Caption selection keeps no per-row outcomes: no paired difference, and the caption says so.
    assert {(r["benchmark"]) for r in table["records"] if r["kind"] == "difference"} == {"REPLACE", "SWAP"}
    assert any("selection: this task's per-row outcomes are not saved" in line for line in table["captions"])


def _as_paper_data(folder, replace_folder):
    """`folder`'s REPLACE run made a run on the paper's REPLACE: every row (10,575 + 16,868, the counts of
    Kamath et al.'s data files at amitakamath/hard_positives@33addaa) of a build whose record names the four
    pinned upstream annotation files with their digests (as `hardpos eval` records it from build_report.json)."""
    from hf_hardpos.evaluation.paper_data import build_record

    counts = {"attributes": 10_575, "relations": 16_868}
    files = [f"{part}/vl_checklist_{subset}.json" for subset in counts for part in ("data", "swapped_data")]
    write_paper_build_report(replace_folder, "replace", files, counts)
    record = build_record(str(replace_folder))
    (replace_folder / "build_report.json").unlink()
    saved = _metrics(folder)
    for config, rows in counts.items():
        saved["results"][config]["num_examples"] = rows
        saved["provenance"][config]["build"] = record
        # The per-row scores would hold `rows` rows: a run that kept none (compare cross-checks those it has).
        (folder / f"scores-{config}.parquet").unlink()
    # The pooled column and macro mean of those counts, as `hardpos eval` writes them (report and compare
    # refuse aggregates that are not their configs').
    for name, row in replace_aggregates(saved["results"]).items():
        saved["aggregates"][name] = {**saved["aggregates"][name], **row}
    (folder / "metrics.json").write_text(json.dumps(saved))
    return saved


def test_paper_rows_for_a_known_model_show_a_delta_only_on_the_papers_data(runs, capsys, tmp_path):
    """A run of openai/clip-vit-base-patch32 gets the paper's CLIP ViT-B/32 row (Table 1); the difference to it
    only once the run's data are the paper's REPLACE (all rows, built from the pinned upstream files)."""
    from hf_hardpos.published import lookup

    copy = shutil.copytree(runs["a"], tmp_path / "clip")
    saved = _metrics(copy)
    saved["model"] = "openai/clip-vit-base-patch32"
    (copy / "metrics.json").write_text(json.dumps(saved))
    code, out, _ = _compare(capsys, copy, "--paper", "--format", "json")
    assert code == 0
    table = json.loads(out)
    for metric in METRIC_NAMES:
        printed = lookup("CLIP ViT-B/32", "replace", metric).value
        published = next(r for r in table["records"] if r["kind"] == "published" and r["metric"] == metric)
        assert published["value"] == pytest.approx(printed / 100)
    # The tiny REPLACE-layout folder is not the paper's: the published row, no difference, and why.
    assert [r for r in table["records"] if r["kind"] == "difference"] == []
    rows = saved["aggregates"][REPLACE_POOLED]["num_examples"]
    why = [line for line in table["captions"] if "no difference shown" in line]
    assert (
        len(why) == 1
        and f"{rows} of 27,443 rows" in why[0]
        and "not built from the paper's sources" in why[0]
    )

    saved = _as_paper_data(copy, tmp_path / "replace_build")
    code, out, err = _compare(capsys, copy, "--paper", "--format", "csv")
    assert code == 0, err
    records = _records(out)
    for metric in METRIC_NAMES:
        printed = lookup("CLIP ViT-B/32", "replace", metric).value
        delta = next(r for r in records if r["kind"] == "difference" and r["metric"] == metric)
        assert float(delta["value"]) == pytest.approx(
            saved["aggregates"][REPLACE_POOLED][metric] - printed / 100
        )
    code, out, _ = _compare(capsys, runs["a"], "--paper", "--format", "json")  # a local folder: no paper row
    assert [r for r in json.loads(out)["records"] if r["kind"] == "published"] == []


def test_paper_accepts_any_printed_row(runs, capsys):
    """`--paper ROW`: any printed row of either paper beside every run, here Kamath et al. Table 1's NegCLIP and
    "Our HP+HN" (models the package cannot download) beside a local suite run of REPLACE and SWAP-layout folders:
    the printed rows, and no difference, since neither folder is the paper's data."""
    code, out, _ = _compare(
        capsys, runs["suite_a"], "--paper", "negclip", "--paper", "Our HP+HN", "--format", "json"
    )
    assert code == 0
    table = json.loads(out)
    records = table["records"]
    printed = {
        ("NegCLIP", "REPLACE"): (68.6, 52.1, 21.5),
        ("NegCLIP", "SWAP"): (70.9, 56.7, 26.4),
        ("HP+HN (Kamath et al.)", "REPLACE"): (69.0, 58.0, 16.9),
        ("HP+HN (Kamath et al.)", "SWAP"): (73.2, 61.1, 22.9),
    }
    for (system, group), values in printed.items():
        for metric, value in zip(METRIC_NAMES, values):
            published = next(r for r in records if r["kind"] == "published" and r["row"] == f"{system} (published)"
                             and r["benchmark"] == group and r["metric"] == metric)  # fmt: skip
            assert published["value"] == pytest.approx(value / 100)
    assert [r for r in records if r["kind"] == "difference"] == []
    saved = _metrics(runs["suite_a"])["datasets"]
    for system in ("NegCLIP", "HP+HN (Kamath et al.)"):
        notes = [
            line
            for line in table["captions"]
            if line.startswith(f"{system} (published):") and "no difference" in line
        ]
        rows = {
            "REPLACE": saved["replace"]["aggregates"][REPLACE_POOLED]["num_examples"],
            "SWAP": saved["swap"]["results"]["default"]["num_examples"],
        }
        assert any("REPLACE:" in n and f"{rows['REPLACE']} of 27,443 rows" in n for n in notes)
        assert any("SWAP:" in n and f"{rows['SWAP']} of 28,748 rows" in n for n in notes)
    code, _, err = _compare(capsys, runs["suite_a"], "--paper", "no such model")
    assert code == 2 and "--paper 'no such model'" in err and "NegCLIP" in err


def test_text_markdown_and_latex_show_the_same_figures(runs, capsys):
    pooled = _metrics(runs["a"])["aggregates"][REPLACE_POOLED]
    shown = f"{100 * pooled['augmented_accuracy']:.1f}"
    for fmt in ("text", "markdown", "latex"):
        code, out, _ = _compare(capsys, runs["a"], runs["b"], "--format", fmt)
        assert code == 0 and shown in out and REPLACE_POOLED in out
    assert r"\multicolumn{3}{c}{REPLACE}" in out


def test_a_folder_that_is_no_run_is_a_clear_error(capsys, tmp_path):
    code, _, err = _compare(capsys, tmp_path)
    assert code == 2 and "metrics.json" in err and "trainer_state.json" in err


def test_fine_tuning_folders_show_their_latest_evaluation_without_a_paired_test(capsys, tmp_path):
    """A fine-tuning folder's newest checkpoint holds the trainer's latest eval sections (no per-row scores):
    compare shows their figures as saved and, unable to prove the same rows, computes no difference."""
    from hf_hardpos.evaluation.aggregation import replace_aggregates

    folders = []
    for name, (attributes, relations) in {
        "ft_a": ((6, 4, 2), (5, 3, 3)),
        "ft_b": ((7, 5, 1), (6, 4, 2)),
    }.items():
        results = {
            config: {
                "original_accuracy": o / 10,
                "augmented_accuracy": a / 10,
                "brittleness": b / 10,
                "num_examples": 10,
            }
            for config, (o, a, b) in (("attributes", attributes), ("relations", relations))
        }
        section = {
            "task": "hard_positive",
            "results": results,
            "aggregates": replace_aggregates(results),
            "step": 8,
        }
        checkpoint = tmp_path / name / "checkpoint-8"
        checkpoint.mkdir(parents=True)
        # ft_b as examples/finetune.py leaves it: trainer.save_state() at the top, eval sections per checkpoint.
        state_folder = checkpoint if name == "ft_a" else tmp_path / name
        (state_folder / "trainer_state.json").write_text(
            json.dumps({"log_history": [{"step": 8, "loss": 1.0}]})
        )
        (checkpoint / "hardpos_eval_sections.json").write_text(json.dumps({"replace": section}))
        stale = tmp_path / name / "checkpoint-4"  # an older evaluation: never the one shown
        stale.mkdir()
        (stale / "hardpos_eval_sections.json").write_text(
            json.dumps({"replace": {"task": "hard_positive", "results": {}, "aggregates": {}}})
        )
        folders.append((tmp_path / name, section))
    code, out, _ = _compare(capsys, *(f for f, _ in folders), "--format", "json")
    assert code == 0
    table = json.loads(out)
    for (_folder, section), label in zip(folders, ("ft_a", "ft_b")):
        for metric in METRIC_NAMES:
            value = next(r["value"] for r in table["records"] if r["row"] == label and r["metric"] == metric)
            assert value == section["aggregates"][REPLACE_POOLED][metric]
    assert table["records"][0]["value"] == pytest.approx((6 + 5) / 20)
    assert [r for r in table["records"] if r["kind"] == "difference"] == []
    assert any("data identity unknown" in line for line in table["captions"])


def test_reference_picks_run_a(runs, capsys):
    """--reference sets A whatever the argument order; given among the RUNs it is listed once."""
    code, out, _ = _compare(
        capsys, runs["suite_a"], runs["suite_b"], "--reference", runs["suite_b"], "--format", "json"
    )
    assert code == 0
    table = json.loads(out)
    rows = list(dict.fromkeys(r["row"] for r in table["records"]))
    assert len([r for r in rows if " - " not in r]) == 2
    first, second = rows[0], rows[1]
    assert first == "other_model"  # suite_b's model
    assert f"{second} - {first}" in rows


def test_text_fits_the_width_and_keeps_every_figure(runs, capsys):
    code, wide, _ = _compare(capsys, runs["suite_a"], runs["suite_b"])
    code, narrow, _ = _compare(capsys, runs["suite_a"], runs["suite_b"], "--width", "80")
    assert code == 0
    assert max(len(line) for line in wide.splitlines()) > 80
    assert max(len(line) for line in narrow.splitlines()) <= 80
    numbers = re.compile(r"[+-]?\d+\.\d(?: \[[^\]]*\])?\*?(?: p=[\d.e-]+)?")
    table_part = wide.split("\n\n")[0]
    assert sorted(numbers.findall(table_part)) == sorted(
        n for part in narrow.split("\n\n")[:-1] for n in numbers.findall(part)
    )


def test_mismatches_are_explained_in_words(runs, capsys, tmp_path):
    copy = shutil.copytree(runs["b"], tmp_path / "edited")
    saved = _metrics(copy)
    saved["run"]["settings"]["precision"] = "bf16"
    (copy / "metrics.json").write_text(json.dumps(saved))
    code, _, err = _compare(capsys, runs["a"], copy)
    assert code == 2
    assert (
        "tiny_clip" in err
        and "other_model: bf16" in err
        and "lower precision flips near-tied outcomes" in err
    )


def test_a_fine_tuning_folder_compares_with_an_eval_run(runs, capsys, tmp_path):
    """Its evaluations' dtype is recorded (fp32) and settings it does not record are named, not refused."""
    saved = _metrics(runs["suite_a"])["datasets"]["swap"]
    section = {
        "task": "hard_positive",
        "source": saved["source"],
        "results": {"all": saved["results"]["default"]},
        "aggregates": {},
        "step": 8,
    }
    checkpoint = tmp_path / "ft" / "checkpoint-8"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 8, "loss": 1.0}]}))
    (checkpoint / "hardpos_eval_sections.json").write_text(json.dumps({"swap": section}))
    code, out, err = _compare(capsys, runs["suite_a"], tmp_path / "ft", "--format", "json")
    assert code == 0, err
    table = json.loads(out)
    ft = [r for r in table["records"] if r["row"] == "ft" and r["benchmark"] == "SWAP"]
    assert {r["metric"]: r["value"] for r in ft} == {m: saved["results"]["default"][m] for m in METRIC_NAMES}
    assert any("names its only table 'default'" in line and "'all'" in line for line in table["captions"])
    assert not any("dtype" in line and "not comparable" in line for line in table["captions"])


def _renamed(folder, tmp_path, model: str):
    """A copy of a run folder whose metrics.json names another model (a hand-edited or hostile folder)."""
    copy = tmp_path / f"renamed{len(list(tmp_path.iterdir()))}"
    shutil.copytree(folder, copy)
    metrics = _metrics(copy)
    metrics["model"] = model
    (copy / "metrics.json").write_text(json.dumps(metrics))
    return copy


FORMULA = "=2+5+cmd|' -c calc'!A0"


def test_csv_cells_never_start_a_spreadsheet_formula(runs, capsys, tmp_path):
    code, out, _ = _compare(capsys, _renamed(runs["a"], tmp_path, FORMULA), runs["b"], "--format", "csv")
    assert code == 0
    cells = [cell for record in _records(out) for cell in record.values()]
    assert "'" + FORMULA in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _number(c))]
    assert all(_number(r["value"]) for r in _records(out))  # numbers stay numbers, negative ones too


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_markdown_and_latex_keep_names_inside_their_cells(runs, capsys, tmp_path):
    renamed = _renamed(runs["a"], tmp_path, "a|b\nc & d_$x$")
    code, out, _ = _compare(capsys, renamed, runs["b"], "--format", "markdown")
    rows = [line for line in out.splitlines() if line.startswith("|")]
    pipes = {len(line.replace(r"\|", "").split("|")) for line in rows}
    assert code == 0 and len(rows) >= 4 and len(pipes) == 1
    code, out, _ = _compare(capsys, renamed, runs["b"], "--format", "latex")
    body = out[out.index(r"\hline", out.index(r"\hline") + 1) : out.index(r"\end{tabular}")]
    assert code == 0 and r"a|b c \& d\_\$x\$" in body
    assert all(line.endswith((r"\\", r"\hline")) for line in body.splitlines() if line)


def test_rows_all_shows_every_subset_with_its_printed_figures(runs, capsys):
    """`--rows all`: REPLACE's two subsets beside its pooled column, each equal to metrics.json, and the paper's
    per-subset row (Kamath et al. Table 7, CLIP ViT-B/32: relations 57.6 / 45.3 / 21.7, attributes 68.1 / 49.0 /
    25.5) beside them, without a difference (the folder is not the paper's data)."""
    code, out, _ = _compare(
        capsys, runs["a"], "--rows", "all", "--paper", "CLIP ViT-B/32", "--format", "json"
    )
    assert code == 0
    table = json.loads(out)
    assert list(table["groups"]) == ["REPLACE", "REPLACE [attributes]", "REPLACE [relations]"]
    saved = _metrics(runs["a"])["results"]
    records = table["records"]
    for config in ("attributes", "relations"):
        for metric in METRIC_NAMES:
            ours = next(r for r in records if r["kind"] == "run" and r["benchmark"] == f"REPLACE [{config}]"
                        and r["metric"] == metric)  # fmt: skip
            assert ours["value"] == saved[config][metric]
    printed = {"attributes": (68.1, 49.0, 25.5), "relations": (57.6, 45.3, 21.7)}
    for config, values in printed.items():
        for metric, value in zip(METRIC_NAMES, values):
            published = next(r for r in records if r["kind"] == "published" and r["benchmark"] == f"REPLACE [{config}]"
                             and r["metric"] == metric)  # fmt: skip
            assert published["value"] == pytest.approx(value / 100)
    assert [r for r in records if r["kind"] == "difference"] == []
    code, out, _ = _compare(capsys, runs["a"], "--format", "json")
    assert list(json.loads(out)["groups"]) == ["REPLACE"]  # headline rows only, by default


def test_the_metrics_of_one_comparison_share_draws_yet_each_interval_is_its_own():
    """`paired_differences` (what `hardpos compare` and a multi-model eval compute: three metrics at once)
    gives each metric the interval and test it gets compared alone, whichever metrics come with it."""
    from hf_hardpos.reporting.paired import paired_differences

    rng = np.random.default_rng(7)
    images = np.repeat([f"i{k}" for k in range(300)], 3)[:850]
    a = {m: rng.integers(0, 2, 850) for m in ("orig", "aug", "brittle")}
    b = {m: rng.integers(0, 2, 850) for m in ("orig", "aug", "brittle")}
    together = paired_differences(a, b, images, accuracies=("orig",))
    for name in a:
        alone = paired_differences({name: a[name]}, {name: b[name]}, images, accuracies=("orig",))[name]
        assert together[name] == alone
        assert alone == paired_difference(a[name], b[name], images, accuracy=name == "orig")
    assert together["orig"].mcnemar_p is not None and together["aug"].mcnemar_p is None
    assert len({(d.ci_low, d.ci_high) for d in together.values()}) == 3
