"""Every input or environment failure of `hardpos eval` is one line and exit 2 (Ctrl-C: 130), never a traceback."""

import errno
import os
import shutil

import pytest
import torch
from transformers import CLIPConfig, CLIPModel, CLIPProcessor

from hf_hardpos import cli
from hf_hardpos.errors import UserInputError
from tests.support.eval_data import write_attributes_relations_folder


@pytest.fixture(scope="module")
def broken_models(tiny_clip_dir, tmp_path_factory):
    """Model folders a user could plausibly end up with, each broken in one way."""
    root = tmp_path_factory.mktemp("broken_models")
    no_tokenizer = root / "no_tokenizer"
    shutil.copytree(tiny_clip_dir, no_tokenizer)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        (no_tokenizer / name).unlink(missing_ok=True)
    no_processor = root / "no_processor"
    shutil.copytree(tiny_clip_dir, no_processor)
    for name in ("processor_config.json", "preprocessor_config.json"):
        (no_processor / name).unlink(missing_ok=True)
    small_vocab = root / "small_vocab"
    config = CLIPConfig.from_pretrained(tiny_clip_dir)
    config.text_config.vocab_size = 300  # the tokenizer has 627 ids
    CLIPModel(config).save_pretrained(small_vocab)
    CLIPProcessor.from_pretrained(tiny_clip_dir).save_pretrained(small_vocab)
    return {"no_tokenizer": no_tokenizer, "no_processor": no_processor, "small_vocab": small_vocab}


@pytest.fixture(scope="module")
def data_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    good = write_attributes_relations_folder(_mkdir(root / "good"))
    garbled = write_attributes_relations_folder(_mkdir(root / "garbled"))
    (garbled / "data" / "attributes" / "test-00000-of-00001.parquet").write_bytes(b"not a parquet file")
    return {"good": good, "garbled": garbled}


def _mkdir(path):
    path.mkdir(parents=True)
    return path


def _fail_writes(monkeypatch, code):
    from hf_hardpos import output_folder

    def refuse(target, value, default=None):  # the probe at the start succeeds; saving the results fails
        raise OSError(code, os.strerror(code), str(target))

    monkeypatch.setattr(output_folder, "write_json", refuse)


CASES = [
    # (case id, model, dataset, extra args, what the one-line message must name: file, folder, option, value)
    ("missing dataset path", "good_model", "./no/such/folder", [], ["./no/such/folder"]),
    ("hub model while offline", "someone/not-cached-model", "good", [], ["someone/not-cached-model"]),
    ("no tokenizer files", "no_tokenizer", "good", [], ["no_tokenizer", "tokenizer.json"]),
    ("no processor config", "no_processor", "good", [], ["no_processor", "preprocessor_config.json"]),
    ("tokenizer ids beyond vocab", "small_vocab", "good", [], ["small_vocab", "300"]),
    ("garbled parquet", "good_model", "garbled", [], ["garbled/data/attributes/test-00000-of-00001.parquet"]),
    ("disk full", "good_model", "good", ["--output", "{tmp}/out"], ["out/metrics.json", "disk full"]),
    ("read-only output", "good_model", "good", ["--output", "{tmp}/out"], ["out/metrics.json", "read-only"]),
]
if not torch.cuda.is_available():
    CASES.append(("cuda without cuda", "good_model", "good", ["--device", "cuda"], ["--device cuda", "CUDA"]))


@pytest.mark.parametrize("case, model, dataset, extra, words", CASES, ids=[c[0] for c in CASES])
def test_input_failures_are_one_line_and_exit_2(
    case,
    model,
    dataset,
    extra,
    words,
    tiny_clip_dir,
    broken_models,
    data_folders,
    tmp_path,
    capsys,
    monkeypatch,
):
    if case == "disk full":
        _fail_writes(monkeypatch, errno.ENOSPC)
    if case == "read-only output":
        _fail_writes(monkeypatch, errno.EROFS)
    models = {"good_model": tiny_clip_dir, **broken_models}
    argv = [
        "eval",
        "--model",
        str(models.get(model, model)),
        "--dataset",
        str(data_folders.get(dataset, dataset)),
        "--no-progress",
        *(a.format(tmp=tmp_path) for a in extra),
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("hardpos eval: error:")
    for word in words:
        assert word in err


def test_debug_shows_the_traceback(data_folders, tiny_clip_dir, monkeypatch):
    monkeypatch.setenv("HARDPOS_DEBUG", "1")
    with pytest.raises(UserInputError):
        cli.main(["eval", "--model", str(tiny_clip_dir), "--dataset", "./no/such/folder"])


def test_a_closed_pipe_ends_quietly():
    """`hardpos zoo | head -1` once `head` has exited: writing fails with EPIPE; no traceback, and the shell's
    status for a process ended by SIGPIPE."""
    import signal
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "hf_hardpos", "zoo"], stdout=write_end, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE
    assert done.stderr == b""


def test_ctrl_c_exits_130_with_one_line(tiny_clip_dir, data_folders, monkeypatch, capsys):
    from hf_hardpos.evaluation import run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "evaluate_model", interrupted)
    argv = ["eval", "--model", str(tiny_clip_dir), "--dataset", str(data_folders["good"]), "--no-progress"]
    assert cli.main(argv) == 130
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_argument_errors_exit_2_without_importing_the_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["eval", "--model", "m"])  # neither --dataset nor --suite
    assert exit_info.value.code == 2
    assert "--dataset" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    listed = capsys.readouterr().out
    assert all(command in listed for command in cli.COMMANDS)


def test_parsers_import_no_heavy_library():
    """`hardpos --help`, `hardpos eval --help` and argument errors must not wait for torch/datasets/transformers
    (timed by benchmarks/cli_startup.py); checked in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import sys, hf_hardpos, hf_hardpos.conversion, hf_hardpos.training; from hf_hardpos.cli import build_parser; "
        "build_parser(['eval']); build_parser(['--help']); "
        "print(sorted(m for m in ('torch', 'datasets', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("package", ["hf_hardpos", "hf_hardpos.conversion", "hf_hardpos.training"])
def test_lazy_exports_resolve_and_unknown_names_fail(package):
    """Every name a package exports lazily (`hf_hardpos.lazy.lazy_exports`) imports; others are AttributeError."""
    import importlib

    module = importlib.import_module(package)
    assert module.__all__ == sorted(module.__all__) and all(
        getattr(module, name) is not None for name in module.__all__
    )
    with pytest.raises(AttributeError, match=package):
        _ = module.no_such_name


def test_an_unreadable_hub_dataset_says_whether_a_local_folder_of_that_name_exists(tmp_path, monkeypatch):
    """A Hub-like name that cannot be read (offline here) says, in its one line, whether a folder of that name
    is here: a person who mistyped a folder learns it is not one, one who meant the Hub learns nothing is lost."""
    from hf_hardpos.errors import UserInputError
    from hf_hardpos.evaluation.eval_data import load_eval_sets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserInputError) as err:
        load_eval_sets("someone/no-such-set", None, "test")
    message = str(err.value)
    assert "\n" not in message and message.endswith("no local folder someone/no-such-set exists here either")


def test_the_executable_skips_the_exit_collection_and_keeps_the_status(monkeypatch, capsys):
    """`console_main` (the `hardpos` executable, `python -m hf_hardpos`) returns `main`'s exit status and
    freezes the objects alive, which the interpreter's exit collection then skips (2.5 s after a
    `hardpos eval`); `main` itself, which a process that goes on may call, never freezes."""
    import gc

    assert gc.get_freeze_count() == 0
    try:
        assert cli.main(["zoo"]) == 0
        assert gc.get_freeze_count() == 0
        monkeypatch.setattr("sys.argv", ["hardpos", "eval", "--model"])  # an argument error: exit status 2
        with pytest.raises(SystemExit) as refused:
            cli.console_main()
        assert refused.value.code == 2
        monkeypatch.setattr("sys.argv", ["hardpos", "zoo"])
        assert cli.console_main() == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    capsys.readouterr()
