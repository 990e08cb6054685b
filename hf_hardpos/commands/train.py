"""`hardpos train`: fine-tune a CLIP model with hard positives and hard negatives (Kamath et al. 2024;
CE-CLIP's losses optional), evaluating any benchmark `hardpos eval` knows along the way.

With no arguments: a small real fine-tune on the synthetic world, on CPU, in a few minutes. It starts
from the demo's pretrained tiny CLIP (trained once and cached under HF_HOME), evaluates the synthetic
REPLACE and SWAP sets before the first step and after every epoch, and writes the model, its card and
the Trainer's state to ./hardpos-synthetic.

    hardpos train
    hardpos train examples/recipes/svlc.yaml --dataset hardpos/coco \\
        --eval_datasets hardpos/replace:attributes hardpos/swap --output_dir clip-hardpos
    hardpos train --dataset hardpos/coco --output_dir clip-hardpos --use_lora --max_steps 100
    accelerate launch -m hf_hardpos train ...   (several processes; or examples/finetune.py)

A recipe (examples/recipes/*.yaml) or a YAML/JSON file of flags goes first; flags override it. Every
`transformers.TrainingArguments` flag is accepted, spelt as the Trainer spells it (--learning_rate);
`hardpos train --help` lists them all with their defaults. Bad options or data: one line, exit status 2;
Ctrl-C saves the current step as a checkpoint and exits with 130 (--resume_from_checkpoint last resumes).
"""

from __future__ import annotations

import argparse

from ..cli import add_command


def register(subparsers: argparse._SubParsersAction) -> None:
    # The Trainer's flags are parsed by HfArgumentParser (training.finetune_args), so the command takes
    # everything after its name, --help included, as it is.
    add_command(subparsers, __name__, run, own_arguments=True)


def run(args: argparse.Namespace) -> int:
    from ..training.finetune import run as finetune

    return finetune(args.arguments, prog="hardpos train")
