"""No code from a model folder runs: a folder whose config asks for its own Python code (`auto_map`, or a
`model_type` transformers does not ship) is refused with one line before transformers could import it or
ask on the terminal (`model_checks.refuse_remote_code`; every loader passes `trust_remote_code=False`).

Each case is a real subprocess with stdin closed (a prompt would read EOF and fail, not wait) and a
folder holding a Python file that writes a marker file if it is ever imported.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_hardpos.errors import UserInputError
from hf_hardpos.model_checks import refuse_remote_code
from tests.support.eval_data import make_eval_set, write_hub_folder
from tests.support.training import finetune_folder

ROOT = Path(__file__).resolve().parents[1]


def _planted(tmp_path: Path, source: Path, config_file: str = "config.json", **fields) -> tuple[Path, Path]:
    """A copy of a real model folder whose `config_file` gains `fields`, beside a module that writes `marker`."""
    folder = tmp_path / "model"
    shutil.copytree(source, folder)
    marker = tmp_path / "ran.txt"
    (folder / "modeling_evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import CLIPModel as EvilModel\n"
    )
    (folder / "configuration_evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import CLIPConfig as EvilConfig\n"
    )
    path = folder / config_file
    config = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**config, **fields}))
    return folder, marker


AUTO_MAP = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run(
        [sys.executable, "-m", "hf_hardpos", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


def _errors(done: subprocess.CompletedProcess) -> list[str]:
    """The `error:` lines of a run (progress bars of `datasets` may come before), with no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    return [line[line.index("error: ") :] for line in re.split(r"[\r\n]+", done.stderr) if "error: " in line]


@pytest.mark.parametrize("fields", [{"auto_map": AUTO_MAP}, {"auto_map": AUTO_MAP, "model_type": "evil"}])
def test_eval_refuses_a_folder_with_custom_code_without_running_or_asking(tmp_path, tiny_clip_dir, fields):
    folder, marker = _planted(tmp_path, tiny_clip_dir, **fields)
    hub = write_hub_folder(tmp_path / "data", {"attributes": make_eval_set(num_images=2, rows_per_image=1)})
    done = _cli("eval", "--model", str(folder), "--dataset", str(hub), "--output", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    lines = _errors(done)
    assert len(lines) == 1 and "config.json" in lines[0]
    assert "[y/N]" not in done.stdout + done.stderr
    assert not marker.exists()


def test_a_tokenizer_config_auto_map_and_an_unknown_model_type_are_refused(tmp_path, tiny_clip_dir):
    folder, marker = _planted(
        tmp_path,
        tiny_clip_dir,
        "tokenizer_config.json",
        auto_map={"AutoTokenizer": ["modeling_evil.EvilModel", None]},
    )
    with pytest.raises(UserInputError, match="tokenizer_config.json.*auto_map"):
        refuse_remote_code(folder)
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "config.json").write_text(
        json.dumps({**json.loads((folder / "config.json").read_text()), "model_type": "evil"})
    )
    with pytest.raises(UserInputError, match="model_type"):
        refuse_remote_code(folder)
    refuse_remote_code(tiny_clip_dir)  # a plain CLIP folder passes
    assert not marker.exists()


def test_generate_llm_refuses_a_folder_with_custom_code(tmp_path, tiny_clip_dir):
    folder, marker = _planted(
        tmp_path, tiny_clip_dir, auto_map={"AutoModelForCausalLM": "modeling_evil.EvilModel"}
    )
    captions = tmp_path / "captions.jsonl"
    captions.write_text('{"caption": "a red cube"}\n')
    done = _cli(
        "generate",
        "--method",
        "llm",
        "--kind",
        "replace",
        "--model",
        str(folder),
        "--input",
        str(captions),
        "--output",
        str(tmp_path / "out.jsonl"),
    )
    assert done.returncode == 2, done.stderr
    assert len(_errors(done)) == 1 and "auto_map" in _errors(done)[0]
    assert not marker.exists()


def test_train_and_convert_refuse_a_folder_with_custom_code(tmp_path, tiny_clip_dir):
    folder, marker = _planted(tmp_path, tiny_clip_dir, auto_map=AUTO_MAP)
    data = finetune_folder(tmp_path / "data", 8)
    done = _cli(
        "train", "--model_name_or_path", str(folder), "--dataset", str(data), "--output_dir", str(tmp_path / "ft"),
        "--max_steps", "1",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(_errors(done)) == 1 and "auto_map" in _errors(done)[0]
    tokenizer, _ = _planted(
        tmp_path / "t",
        tiny_clip_dir,
        "tokenizer_config.json",
        auto_map={"AutoTokenizer": ["modeling_evil.EvilModel", None]},
    )
    from hf_hardpos.conversion.tokenizer import load_clip_tokenizer

    with pytest.raises(UserInputError, match="auto_map"):
        load_clip_tokenizer(tokenizer, 77)
    assert not marker.exists() and not (tmp_path / "t" / "ran.txt").exists()
