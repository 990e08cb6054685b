"""Build the SWAP benchmark (Kamath et al. 2024, on ARO's VG Attribution) as a Hub dataset folder.

Same as `hardpos build swap ...`. Example (local sources):
    python dataset_scripts/swap.py --upstream-dir hard_positives --aro-dir aro \
        --images-dir aro/images --output-dir out/swap
    # then: load_dataset("out/swap", split="test")

Images are cropped to each row's bbox (ARO's protocol). Without --aro-dir, ARO's annotation is
downloaded from its Google Drive link; without --images-dir, the Visual Genome archives are downloaded.
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("swap", argv)


if __name__ == "__main__":
    sys.exit(main())
