"""Build the REPLACE benchmark (Kamath et al. 2024) as a Hub dataset folder, optionally push it.

Same as `hardpos build replace ...`. Example (local sources):
    python dataset_scripts/replace.py --upstream-dir hard_positives \
        --images-dir VG --output-dir out/replace
    # then: load_dataset("out/replace", "relations", split="test")

Without --upstream-dir / --images-dir the annotation files are downloaded from GitHub
(amitakamath/hard_positives at commit 33addaa, each checked against its recorded digest) and the
Visual Genome image archives from the Visual Genome site (cached by `datasets`).
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("replace", argv)


if __name__ == "__main__":
    sys.exit(main())
