#!/usr/bin/env python
"""Fine-tune CLIP with hard positives and hard negatives (Kamath et al. 2024; CE-CLIP losses optional).

The script entry point of `hardpos train` (the code is `hf_hardpos.commands.train`), for launchers
that start a file:

    # No arguments: the demo's hp+hn fine-tune of seed 0 (one process, CPU, minutes), its REPLACE and
    # SWAP rates printed beside the start model's and the demo's hn row.
    python examples/finetune.py

    # A pinned recipe (examples/recipes/: svlc = the HP+HN setting the paper follows, negclip, ce-clip),
    # then any flag as an override; the model card lists every deviation from the recipe.
    accelerate launch --num_processes 4 examples/finetune.py examples/recipes/svlc.yaml --dataset hardpos/coco \
        --eval_datasets hardpos/replace:attributes hardpos/replace:relations hardpos/swap \
        --output_dir clip-hardpos --dataloader_num_workers 8

    # Two CPU processes.
    torchrun --nproc_per_node 2 examples/finetune.py --use_cpu ...

`python examples/finetune.py --help` (or `hardpos train --help`) lists the options with the defaults a
run gets; `--help-all` every TrainingArguments flag.
"""

import sys

from hf_hardpos.commands.train import finetune

if __name__ == "__main__":
    sys.exit(finetune())
