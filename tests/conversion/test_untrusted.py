"""A checkpoint is data: reading an OpenAI TorchScript archive never runs the code inside it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hf_hardpos.conversion.openai import read_torchscript_tensors
from hf_hardpos.conversion.state_dict import load_state_dict
from hf_hardpos.errors import UserInputError
from tests.support.paths import OPEN_CLIP_FIXTURES as FIXTURES

MARKER = "SETSTATE-MARKER-5b1e"


class _Scripted(torch.nn.Module):
    """A module whose scripted __setstate__ prints MARKER: torch.jit.load runs it."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(2))

    @torch.jit.export
    def __getstate__(self) -> tuple[torch.Tensor, bool]:
        return (self.weight, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]) -> None:
        print("SETSTATE-MARKER-5b1e")
        self.weight = state[0]
        self.training = state[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


@pytest.fixture
def crafted(tmp_path):
    path = tmp_path / "ViT-B-32.pt"
    torch.jit.script(_Scripted()).save(str(path))
    return path


def test_the_crafted_archive_runs_its_code_under_torch_jit(crafted, capfd):
    """The premise: torch.jit.load executes the archive's __setstate__ (so the tests below mean something)."""
    torch.jit.load(str(crafted))
    assert MARKER in capfd.readouterr().out


def test_reading_the_crafted_archive_runs_nothing_and_says_what_to_do(crafted, capfd):
    with pytest.raises(UserInputError, match=r"torch\.save\(model\.state_dict\(\)") as refused:
        load_state_dict(crafted)
    assert "__setstate__" in str(refused.value) and str(refused.value).startswith(f"checkpoint {crafted}: ")
    captured = capfd.readouterr()
    assert MARKER not in captured.out + captured.err


def test_hardpos_convert_refuses_it_in_one_line(crafted, tmp_path, capfd):
    from hf_hardpos.cli import main

    rc = main(["convert", str(crafted), "--output-dir", str(tmp_path / "out"), "--no-verify"])
    captured = capfd.readouterr()
    assert rc == 2 and MARKER not in captured.out + captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err and "state_dict" in lines[0]


def test_openai_fixture_reads_the_same_tensors_as_torch_jit():
    """The restricted reader gives torch.jit.load's state dict exactly: same names, dtypes and values."""
    path = FIXTURES / "openai_jit.pt"
    reference = dict(torch.jit.load(str(path), map_location="cpu").state_dict())
    tensors = read_torchscript_tensors(path)
    assert sorted(tensors) == sorted(reference)
    for name, value in reference.items():
        assert tensors[name].dtype == value.dtype and torch.equal(tensors[name], value), name


def test_a_pickle_naming_any_other_global_is_refused(tmp_path):
    """data.pkl may build tensors and ordered dicts only: a reference to os.system is refused, not called."""
    import pickle
    import zipfile

    class Call:
        def __reduce__(self):
            return (print, (MARKER,))

    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil/data.pkl", pickle.dumps(Call(), protocol=2))
        archive.writestr("evil/code/__torch__.py", "")
        archive.writestr("evil/byteorder", "little")
    with pytest.raises(UserInputError, match=r"(__builtin__|builtins)\.print"):
        load_state_dict(path)


def test_a_failing_push_never_shows_the_token(tmp_path, tiny_tokenizer, monkeypatch, capfd):
    """`hardpos convert --push-to-hub` with HF_TOKEN set: the Hub's refusal is one line with the token
    masked, and neither the folder nor its card holds it."""
    import huggingface_hub

    from hf_hardpos.cli import main

    token = "hf_" + "Z" * 34
    monkeypatch.setenv("HF_TOKEN", token)

    class RefusingApi:
        def __init__(self, token=None):
            assert token is None  # huggingface_hub resolves HF_TOKEN or the stored login itself

        def create_repo(self, repo_id, **kwargs):
            raise PermissionError(f"401 Client Error: invalid token {token}")

    monkeypatch.setattr(huggingface_hub, "HfApi", RefusingApi)
    out = tmp_path / "out"
    rc = main(
        [
            "convert",
            str(FIXTURES / "openai_jit.pt"),
            "--tokenizer",
            str(tiny_tokenizer),
            "--output-dir",
            str(out),
            "--no-verify",
            "--no-progress",
            "--push-to-hub",
            "org/model",
        ]
    )
    captured = capfd.readouterr()
    assert rc == 2 and token not in captured.out + captured.err and "hf_***" in captured.err
    assert (out / "README.md").is_file()
    for path in out.rglob("*"):
        assert not path.is_file() or token.encode() not in path.read_bytes(), path


def test_hardpos_eval_of_the_crafted_archive_runs_nothing(crafted, tmp_path, capfd):
    """`hardpos eval --model FILE.pt` reaches the same reader: exit 2, one line, no marker."""
    from hf_hardpos.cli import main
    from tests.support.eval_data import make_eval_set

    data = tmp_path / "set"
    make_eval_set(num_images=2, rows_per_image=1).to_parquet(
        str(data / "data" / "default" / "test-00000-of-00001.parquet")
    )
    (data / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/default/test-*.parquet\n---\n"
    )
    capfd.readouterr()
    rc = main(
        [
            "eval",
            "--model",
            str(crafted),
            "--dataset",
            str(data),
            "--output",
            str(tmp_path / "eval"),
            "--no-progress",
        ]
    )
    captured = capfd.readouterr()
    assert rc == 2 and MARKER not in captured.out + captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and str(crafted) in lines[0] and "torch.save(model.state_dict()" in lines[0]


def _bomb(path: Path, declared_numel: int, entry_bytes: int) -> Path:
    """A TorchScript-shaped archive whose data.pkl refers to one float16 storage of `declared_numel`
    values, stored as `entry_bytes` zeros deflated (~1000:1: a few hundred KB on disk)."""
    import io
    import pickle
    import zipfile
    from collections import OrderedDict

    marker = object()

    class Rebuild:
        def __reduce__(self):
            return (
                torch._utils._rebuild_tensor_v2,
                (marker, 0, (declared_numel,), (1,), False, OrderedDict()),
            )

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.HalfStorage, "0", "cpu", declared_numel) if obj is marker else None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(Rebuild())
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("bomb/data.pkl", buffer.getvalue())
        archive.writestr("bomb/code/__torch__.py", "")
        archive.writestr("bomb/byteorder", "little")
        info = zipfile.ZipInfo("bomb/data/0")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as entry:
            chunk = bytes(1024**2)
            for _ in range(entry_bytes // len(chunk)):
                entry.write(chunk)
    return path


@pytest.mark.parametrize(
    "declared_numel", [4, 48 * 1024**2 // 2]
)  # pickle says 8 bytes / as much as the entry
def test_a_decompression_bomb_is_refused_before_it_is_read(tmp_path, declared_numel):
    """The entry's declared size is checked against the pickle's numel and its compressed size before any
    byte is read: the old reader decompressed all 48 MB (3.2 GB in the reported case) first."""
    import tracemalloc

    path = _bomb(tmp_path / "bomb.pt", declared_numel, 48 * 1024**2)
    assert path.stat().st_size < 1024**2
    tracemalloc.start()
    try:
        with pytest.raises(UserInputError, match="entry bomb/data/0 declares"):
            read_torchscript_tensors(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024**2


def test_torch_load_is_not_handed_a_bomb(tmp_path):
    import zipfile

    path = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(4)}, path)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("weights/data/99", bytes(8 * 1024**2))
    with pytest.raises(UserInputError, match="decompression bomb"):
        load_state_dict(path)


def test_a_gzip_bomb_of_merges_is_refused(tmp_path, monkeypatch):
    import gzip

    from hf_hardpos.conversion import tokenizer

    monkeypatch.setattr(tokenizer, "MAX_MERGES_CHARACTERS", 1024**2)
    path = tmp_path / "merges.txt.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b"#version\n" + b"a b\n" * (1024**2))
    with pytest.raises(UserInputError, match="not a BPE merges file"):
        tokenizer.read_bpe_merges(path)


def test_convert_never_writes_over_its_checkpoint(tmp_path, tiny_tokenizer, capfd):
    from hf_hardpos.cli import main

    out = tmp_path / "out"
    out.mkdir()
    checkpoint = out / "model.safetensors"  # a name save_pretrained writes
    checkpoint.write_bytes((FIXTURES / "openai_jit.pt").read_bytes())
    rc = main(
        [
            "convert",
            str(checkpoint),
            "--tokenizer",
            str(tiny_tokenizer),
            "--output-dir",
            str(out),
            "--overwrite",
            "--no-verify",
            "--no-progress",
        ]
    )
    assert rc == 2 and len(capfd.readouterr().err.strip().splitlines()) == 1
    assert checkpoint.read_bytes() == (FIXTURES / "openai_jit.pt").read_bytes()


def _archive(path: Path, data_pkl: bytes) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("m/data.pkl", data_pkl)
        archive.writestr("m/code/__torch__.py", "")
        archive.writestr("m/byteorder", "little")
    return path


def test_crafted_data_pkl_is_one_line(tmp_path):
    """A data.pkl calling an allowed global with wrong arguments, or a module tree that holds itself."""
    import pickle
    from collections import OrderedDict

    class BadCall:
        def __reduce__(self):
            return (OrderedDict, (5,))

    calls = _archive(tmp_path / "calls.pt", pickle.dumps(BadCall(), protocol=2))
    with pytest.raises(UserInputError, match="data.pkl is not a TorchScript module's data"):
        read_torchscript_tensors(calls)
    # protocol 2: a __torch__ object whose state dict holds the object itself (BUILD after memoising it)
    cyclic = b"\x80\x02c__torch__\nM\nq\x00)\x81q\x01}q\x02X\x04\x00\x00\x00selfq\x03h\x01sb."
    with pytest.raises(UserInputError, match="cycle"):
        read_torchscript_tensors(_archive(tmp_path / "cyclic.pt", cyclic))
