"""Build the SWAP benchmark (Kamath et al. 2024, on ARO's VG Attribution) as a Hub dataset folder.

Example (local sources):
    python dataset_scripts/swap.py --upstream-dir hard_positives --aro-dir aro \
        --images-dir aro/images --output-dir out/swap
    # then: load_dataset("out/swap", split="test")

Images are cropped to each row's bbox (ARO's protocol). Without --aro-dir, ARO's annotation is
downloaded from its Google Drive link; without --images-dir, the Visual Genome archives are downloaded.
"""

import argparse
import sys
from pathlib import Path

from hf_hardpos.data.script_args import add_common_arguments, build_and_push, card_repo_id
from hf_hardpos.data.swap import CROP_FORMATS, export_swap


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument(
        "--aro-dir", type=Path, default=None, help="folder holding ARO's visual_genome_attribution.json"
    )
    parser.add_argument(
        "--images-dir",
        type=Path,
        default=None,
        help="Visual Genome images: VG_100K/, VG_100K_2/ and/or flat <id>.jpg (ARO's images/)",
    )
    parser.add_argument("--crop-format", choices=sorted(CROP_FORMATS), default="png", help="encoding of the crops")
    parser.add_argument("--no-images", action="store_true", help="build the rows without the image column")
    args = parser.parse_args(argv)
    return build_and_push(
        args,
        lambda: export_swap(
            args.output_dir,
            upstream_dir=args.upstream_dir,
            aro_dir=args.aro_dir,
            images_dir=args.images_dir,
            skip_missing=args.skip_missing,
            embed_images=not args.no_images,
            crop_format=args.crop_format,
            cache_dir=args.cache_dir,
            max_shard_size=args.max_shard_size,
            repo_id_for_card=card_repo_id(args, "hardpos/swap"),
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
