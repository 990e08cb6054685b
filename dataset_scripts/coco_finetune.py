"""Build the COCO hard-positive + hard-negative fine-tuning set as a Hub dataset folder.

Same as `hardpos build finetune ...`. One row per caption of COCO's captions_train2017.json (591,753,
the paper's set), in file order, the n-th line of the paper's hard_positives_ft/{replace,swap}_hp.jsonl
on the n-th caption. Example (local sources):
    python dataset_scripts/coco_finetune.py --upstream-dir hard_positives \
        --coco-annotations coco/annotations --output-dir out/coco
    # then: load_dataset("out/coco", split="train"), and join images with
    # hf_hardpos.data.coco_finetune.attach_coco_images(ds, "coco/train2017")

Images are referenced by COCO id and file name; --coco-images-dir embeds them (about 18 GB).
--coco-split train2014 builds from captions_train2014.json instead (CE-CLIP's fine-tuning captions,
which the ce-clip recipe names); the paper's hard positives do not belong to those captions, so its
hard-positive columns are null.

CE-CLIP's four typed hard negatives (config `ce_clip`): generate them over the captions of a
default build, in row order, then build again with --mlm-negatives:
    python -c "import datasets; datasets.load_dataset('out/coco', split='train')\
        .select_columns(['caption']).to_json('captions.jsonl')"
    hardpos generate --negative --method mlm --kind all --input captions.jsonl --output mlm.jsonl
    python dataset_scripts/coco_finetune.py --coco-split train2014 \
        --coco-annotations coco/annotations --output-dir out/coco2014 --mlm-negatives mlm.jsonl
    # then: load_dataset("out/coco2014", "ce_clip", split="train")
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("finetune", argv)


if __name__ == "__main__":
    sys.exit(main())
