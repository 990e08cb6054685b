"""Build ARO (Yuksekgonul et al. 2023: vg_relation, vg_attribution, coco_order, flickr30k_order) as a Hub
dataset folder.

Same as `hardpos build aro ...`. Example (local sources):
    python dataset_scripts/aro.py --aro-dir aro --images-dir aro/images --coco-images-dir coco \
        --flickr-images-dir flickr30k --output-dir out/aro
    # then: load_dataset("out/aro", "coco_order", split="test")

Without --aro-dir ARO's annotations (Google Drive) and BLIP's Karpathy test files are downloaded; the
order configs need spaCy's en_core_web_sm for ARO's part-of-speech shuffles.
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("aro", argv)


if __name__ == "__main__":
    sys.exit(main())
