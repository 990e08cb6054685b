"""Build the COCO hard-positive + hard-negative fine-tuning set as a Hub dataset folder.

Same as `hardpos build finetune ...`. Example (local sources):
    python dataset_scripts/finetune.py --upstream-dir hard_positives \
        --coco-annotations coco/annotations --output-dir out/coco
    # then: load_dataset("out/coco", split="train"), and join images with
    # hf_hardpos.data.finetune.attach_coco_images(ds, "coco/train2014")

Images are referenced by COCO id and file name; --coco-images-dir embeds them (about 13 GB).
"""

import sys

from hf_hardpos.commands.build import run_script


def main(argv=None) -> int:
    return run_script("finetune", argv)


if __name__ == "__main__":
    sys.exit(main())
