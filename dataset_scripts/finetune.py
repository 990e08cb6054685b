"""Build the COCO hard-positive + hard-negative fine-tuning set as a Hub dataset folder.

Example (local sources):
    python dataset_scripts/finetune.py --upstream-dir hard_positives \
        --coco-annotations coco/annotations --output-dir out/coco
    # then: load_dataset("out/coco", split="train"), and join images with
    # hf_hardpos.data.finetune.attach_coco_images(ds, "coco/train2014")

Images are referenced by COCO id and file name; --coco-images-dir embeds them (about 13 GB).
"""

import argparse
import sys
from pathlib import Path

from hf_hardpos.data.finetune import export_finetune
from hf_hardpos.data.script_args import add_common_arguments, build_and_push, card_repo_id


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument(
        "--coco-annotations",
        type=Path,
        default=None,
        help="captions_train2014.json or a folder holding it (default: download COCO's 2014 annotations)",
    )
    parser.add_argument(
        "--coco-images-dir", type=Path, default=None, help="COCO train2014/ folder, to embed the images"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the rule-based hard-negative generator")
    args = parser.parse_args(argv)
    return build_and_push(
        args,
        lambda: export_finetune(
            args.output_dir,
            upstream_dir=args.upstream_dir,
            coco_annotations=args.coco_annotations,
            coco_images_dir=args.coco_images_dir,
            skip_missing=args.skip_missing,
            seed=args.seed,
            cache_dir=args.cache_dir,
            max_shard_size=args.max_shard_size,
            repo_id_for_card=card_repo_id(args, "hardpos/coco"),
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
