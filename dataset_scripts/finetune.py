"""Build the COCO hard-positive + hard-negative fine-tuning set as a Hub dataset folder.

Same as `hardpos build finetune ...`. Example (local sources):
    python dataset_scripts/finetune.py --upstream-dir hard_positives \
        --coco-annotations coco/annotations --output-dir out/coco
    # then: load_dataset("out/coco", split="train"), and join images with
    # hf_hardpos.data.finetune.attach_coco_images(ds, "coco/train2014")

Images are referenced by COCO id and file name; --coco-images-dir embeds them (about 13 GB).

CE-CLIP's four typed hard negatives (config `ce_clip`): generate them over the captions of a
default build, in row order, then build again with --mlm-negatives:
    python -c "import datasets; datasets.load_dataset('out/coco', split='train')\
        .select_columns(['caption']).to_json('captions.jsonl')"
    hardpos generate --negative --method mlm --kind all --input captions.jsonl --output mlm.jsonl
    python dataset_scripts/finetune.py --upstream-dir hard_positives \
        --coco-annotations coco/annotations --output-dir out/coco --mlm-negatives mlm.jsonl
    # then: load_dataset("out/coco", "ce_clip", split="train")
"""

import sys

from hf_hardpos.commands.build import run_script


def main(argv=None) -> int:
    return run_script("finetune", argv)


if __name__ == "__main__":
    sys.exit(main())
