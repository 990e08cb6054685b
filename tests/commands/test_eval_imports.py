"""`hardpos eval` imports what evaluation needs and no training stack (issue 52): peft alone costs
seconds of start-up, and transformers' `trainer_utils` imports it whenever it is installed."""

import json
import subprocess
import sys

from tests.support.eval_data import write_attributes_relations_folder

TRAINING_STACK = ("peft", "transformers.trainer", "transformers.trainer_utils", "hf_hardpos.training")

# A fresh interpreter runs `hardpos eval` on two models (the multi-model path) then prints what it imported.
SCRIPT = """
import json, sys
from hf_hardpos.cli import main
status = main(["eval", "--model", sys.argv[1], "--model", sys.argv[2], "--dataset", sys.argv[3],
               "--output", sys.argv[4], "--batch-size", "3", "--no-progress"])
print(json.dumps({"status": status, "imported": [m for m in json.loads(sys.argv[5]) if m in sys.modules],
                  "torch": "torch" in sys.modules}))
"""


def test_eval_imports_no_training_stack(tiny_clip_dir, tmp_path):
    import peft  # noqa: F401  installed here, so a stray import of it would be seen

    folder = write_attributes_relations_folder(tmp_path / "replace")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(tiny_clip_dir),
            str(tiny_clip_dir) + "/.",
            str(folder),
            str(tmp_path / "out"),
            json.dumps(TRAINING_STACK),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {
        "status": 0,
        "imported": [],
        "torch": True,
    }  # it did evaluate, without the training stack
