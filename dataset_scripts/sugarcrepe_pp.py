"""Build SugarCrepe++ (Dumpala et al. 2024: 5 subsets, 4,757 rows of c, c_p, c_n) as a Hub dataset folder.

Same as `hardpos build sugarcrepe_pp ...`. Example (local sources):
    python dataset_scripts/sugarcrepe_pp.py --upstream-dir scpp --images-dir coco/val2017 \
        --output-dir out/sugarcrepe_pp
    # then: load_dataset("out/sugarcrepe_pp", "replace_att", split="test")

Without --upstream-dir the files come from github.com/Sri-Harsha/scpp at a pinned commit; without
--images-dir COCO's val2017.zip is downloaded (cached by `datasets`). Defective rows are flagged.
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("sugarcrepe_pp", argv)


if __name__ == "__main__":
    sys.exit(main())
