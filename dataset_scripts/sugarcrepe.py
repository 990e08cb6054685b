"""Build SugarCrepe (Hsieh et al. 2023: 7 subsets, 7,511 rows) as a Hub dataset folder.

Same as `hardpos build sugarcrepe ...`. Example (local sources):
    python dataset_scripts/sugarcrepe.py --upstream-dir sugar-crepe --images-dir coco/val2017 \
        --output-dir out/sugarcrepe
    # then: load_dataset("out/sugarcrepe", "swap_obj", split="test")

Without --upstream-dir the files come from github.com/RAIVNLab/sugar-crepe at a pinned commit; without
--images-dir COCO's val2017.zip is downloaded (cached by `datasets`).
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("sugarcrepe", argv)


if __name__ == "__main__":
    sys.exit(main())
