"""Build VALSE (Parcalabescu et al. 2022: 11 pieces, 8,782 rows, 7,702 valid) as a Hub dataset folder.

Same as `hardpos build valse ...`. Example:
    python dataset_scripts/valse.py --upstream-dir VALSE --images-dir valse_images --output-dir out/valse
    # then: load_dataset("out/valse", "existence", split="test")

--upstream-dir is a clone of github.com/Heidelberg-NLP/VALSE; --images-dir one folder holding the
Visual7W, COCO, SWiG and VisDial images by file name (VALSE does not ship them).
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("valse", argv)


if __name__ == "__main__":
    sys.exit(main())
