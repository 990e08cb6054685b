"""Build the REPLACE benchmark (Kamath et al. 2024) as a Hub dataset folder, optionally push it.

Example (local sources):
    python dataset_scripts/replace.py --upstream-dir ../shared/data/hard_positives \
        --images-dir VG --output-dir out/replace
    # then: load_dataset("out/replace", "relations", split="test")

Without --upstream-dir / --images-dir the annotation files are downloaded from GitHub and the Visual
Genome image archives from the Visual Genome site (cached by `datasets`).
"""

import argparse
import sys
from pathlib import Path

from hf_hardpos.data.replace import REPLACE_SUBSETS, export_replace
from hf_hardpos.data.script_args import add_common_arguments, build_and_push, card_repo_id


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument(
        "--images-dir",
        type=Path,
        default=None,
        help="folder with VG_100K/<id>.jpg and VG_100K_2/<id>.jpg (default: download the VG archives)",
    )
    parser.add_argument("--subsets", nargs="+", choices=REPLACE_SUBSETS, default=list(REPLACE_SUBSETS))
    parser.add_argument("--no-images", action="store_true", help="build the rows without the image column")
    parser.add_argument(
        "--union-config",
        metavar="NAME",
        default=None,
        help="also declare a config NAME reading both subsets (off by default: `hardpos eval` scores every "
        "config, and the paper's REPLACE figure is the unweighted mean of the subsets, not a pooled one)",
    )
    args = parser.parse_args(argv)
    return build_and_push(
        args,
        lambda: export_replace(
            args.output_dir,
            upstream_dir=args.upstream_dir,
            images_dir=args.images_dir,
            subsets=args.subsets,
            skip_missing=args.skip_missing,
            embed_images=not args.no_images,
            cache_dir=args.cache_dir,
            max_shard_size=args.max_shard_size,
            union_config_name=args.union_config,
            repo_id_for_card=card_repo_id(args, "hardpos/replace"),
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
