"""`hardpos build <dataset>`: build a benchmark or training set as a Hub dataset folder, optionally push it.

Writes the Hub repository folder of a dataset (parquet shards, a README whose YAML declares the
configs, and a card with the counts and each source's sha256) into --output-dir; --push-to-hub then
uploads it. Every dataset takes --output-dir, --cache-dir, --skip-missing, --max-shard-size and
--push-to-hub (and --upstream-dir where it has upstream files); `hardpos build DATASET --help` lists
its own options. The output folder is checked before any work, and bad input is a one-line error
(exit 2). The scripts in dataset_scripts/ run this command.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..benchmark_registry import BENCHMARKS, Buildable, images_dir_option, load, option, subsets_option
from ..columns import REPLACE_SUBSETS
from ..errors import UserInputError
from ._parsers import add_command

NO_IMAGES = option(
    "--no-images", dest="embed_images", action="store_false", help="build the rows without the image column"
)
CROP_FORMAT = option("--crop-format", default="png", help="encoding of the crops: png (lossless) or jpeg")

# The datasets whose builders live in `data/`; a benchmark with a folder of its own registers its
# `Buildable` in `benchmark_registry.BENCHMARKS` and is added after these.
DATASETS: dict[str, Buildable] = {
    "replace": Buildable(
        "REPLACE (Kamath et al. 2024): replaced-word c/c_n with the paper's c_p, Visual Genome images",
        "hf_hardpos.data.replace:export_replace",
        (
            images_dir_option(
                "folder with VG_100K/<id>.jpg and VG_100K_2/<id>.jpg (default: download the VG archives)"
            ),
            subsets_option("subsets to build (default: both)", choices=REPLACE_SUBSETS),
            NO_IMAGES,
            option(
                "--union-config",
                dest="union_config_name",
                metavar="NAME",
                default=None,
                help="also declare a config NAME reading both subsets (off by default: `hardpos eval` scores every "
                "config and already reports the paper's pooled REPLACE figure from the two subsets)",
            ),
        ),
        "github.com/amitakamath/hard_positives (data/, swapped_data/)",
    ),
    "swap": Buildable(
        "SWAP (Kamath et al. 2024): ARO VG-Attribution with the paper's c_p, images cropped to the bbox",
        "hf_hardpos.data.swap:export_swap",
        (
            option(
                "--aro-dir",
                type=Path,
                default=None,
                help="folder holding ARO's visual_genome_attribution.json",
            ),
            images_dir_option(
                "Visual Genome images: VG_100K/, VG_100K_2/ and/or flat <id>.jpg (ARO's images/)"
            ),
            CROP_FORMAT,
            NO_IMAGES,
        ),
        "github.com/amitakamath/hard_positives (swapped_data/)",
    ),
    "finetune": Buildable(
        "COCO fine-tuning set: train2017 captions with the paper's hard positives (or train2014, CE-CLIP's), "
        "rule-made hard negatives (+ CE-CLIP's typed masked-LM negatives with --mlm-negatives)",
        "hf_hardpos.data.coco_finetune:export_finetune",
        (
            option(
                "--coco-annotations",
                type=Path,
                default=None,
                help="the split's captions file (captions_train2017.json by default) or a folder holding it (default: "
                "download COCO's annotations of that year)",
            ),
            option(
                "--coco-split",
                choices=("train2017", "train2014"),
                default="train2017",
                help="COCO captions to build from: train2017 (the paper's 591,753 captions, which the hard-positive "
                "files follow line by line) or train2014 (CE-CLIP's fine-tuning captions; hard positives null)",
            ),
            option(
                "--coco-images-dir",
                type=Path,
                default=None,
                help="COCO image folder of the split (train2017/), to embed them",
            ),
            option("--seed", type=int, default=0, help="seed of the rule-based hard-negative generator"),
            option(
                "--mlm-negatives",
                nargs="+",
                type=Path,
                default=None,
                metavar="FILE.jsonl",
                help="also build the `ce_clip` config (CE-CLIP's four typed hard negatives: hard_negative_relation, "
                "_attribute, _action, _object) from the output of `hardpos generate --negative --method mlm --kind all` "
                "over this build's captions in row order (or four single --kind outputs); its manifest must sit beside "
                "it. With --coco-images-dir the images are embedded in both configs",
            ),
            option(
                "--hard-positives",
                nargs="+",
                type=Path,
                default=None,
                metavar="FILE.jsonl",
                help="your own hard positives instead of the paper's: `hardpos generate` outputs (--kind replace and/or "
                "swap, manifest beside each) run over this build's captions in row order, or files in upstream's "
                "{replace,swap}_hp.jsonl format (one JSON string per caption); joined by caption, every caption "
                "checked; a column no file supplies is null",
            ),
        ),
        "github.com/amitakamath/hard_positives (hard_positives_ft/)",
        aliases=("coco_finetune",),
    ),
    **{
        name: Buildable(
            help_text,
            f"hf_hardpos.data.sugarcrepe:export_{name}",
            (
                images_dir_option(
                    "COCO val2017 folder, images by file name (default: download val2017.zip, about 1 GB)"
                ),
                subsets_option("subsets to build (default: all)"),
                NO_IMAGES,
            ),
            upstream,
        )
        for name, help_text, upstream in (
            (
                "sugarcrepe",
                "SugarCrepe (Hsieh et al. 2023): 7 subsets, 7,511 rows of c/c_n on COCO val2017",
                "github.com/RAIVNLab/sugar-crepe (data/<subset>.json)",
            ),
            (
                "sugarcrepe_pp",
                "SugarCrepe++ (Dumpala et al. 2024): 5 subsets, 4,757 rows of c/c_p/c_n on COCO val2017",
                "github.com/Sri-Harsha/scpp (data/<subset>.json)",
            ),
        )
    },
    "aro": Buildable(
        "ARO (Yuksekgonul et al. 2023): vg_relation, vg_attribution, coco_order, flickr30k_order",
        "hf_hardpos.data.aro:export_aro",
        (
            option(
                "--aro-dir",
                type=Path,
                default=None,
                help="folder with ARO's visual_genome_{relation,attribution}.json and the Karpathy test files "
                "coco_karpathy_test.json / flickr30k_test.json (default: download them from ARO's and BLIP's links)",
            ),
            images_dir_option(
                "ARO's images/ or Visual Genome (VG_100K/, VG_100K_2/) for the VG configs (default: ARO's zip)"
            ),
            option(
                "--coco-images-dir", type=Path, default=None, help="folder holding COCO val2014/ (coco_order)"
            ),
            option(
                "--flickr-images-dir",
                type=Path,
                default=None,
                help="folder holding flickr30k-images/ (flickr30k_order)",
            ),
            option("--configs", nargs="+", default=None, help="configs to build (default: all four)"),
            option("--seed", type=int, default=0, help="seed of the order perturbations (per caption)"),
            CROP_FORMAT,
            NO_IMAGES,
        ),
    ),
    "own": Buildable(
        "your own hard-positive eval set from a CSV/JSONL of image paths and captions (docs/evaluation.md, Evaluate your own data)",
        "hf_hardpos.data.own:export_own",
        (
            option(
                "--table",
                type=Path,
                required=True,
                help="CSV (with a header) or JSONL: image, caption, hard_negative, hard_positive[, image_id, config]",
            ),
            images_dir_option("folder the table's image paths are relative to (default: the table's folder)"),
        ),
    ),
}


def buildables() -> dict[str, Buildable]:
    """Every dataset `hardpos build` knows: the ones above, then the registered benchmarks' (read at
    use, so a benchmark registered after this module was imported builds too)."""
    return {**DATASETS, **{name: benchmark.build for name, benchmark in BENCHMARKS.items()}}


def build(args: argparse.Namespace):
    """Run the builder of `args.dataset` with its own options (`args.builder_keywords`) and the shared ones."""
    dataset = buildables()[args.dataset]
    if dataset.upstream_required and args.upstream_dir is None:
        raise UserInputError(
            f"hardpos build {args.dataset} needs --upstream-dir: a clone of {dataset.upstream}"
        )
    export = load(dataset.export)
    keywords = {dest: getattr(args, dest) for dest in args.builder_keywords}
    if dataset.upstream is not None:
        keywords["upstream_dir"] = args.upstream_dir
    if args.max_shard_size is not None:
        keywords["max_shard_size"] = args.max_shard_size
    return export(
        output_dir=args.output_dir,
        skip_missing=args.skip_missing,
        cache_dir=args.cache_dir,
        repo_id_for_card=args.push_to_hub,
        progress=not args.no_progress,
        **keywords,
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, __name__, run)
    datasets_parsers = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    for name, dataset in buildables().items():
        sub = datasets_parsers.add_parser(
            name, aliases=dataset.aliases, help=dataset.help, description=dataset.help
        )
        if name == "own":
            sub.add_argument(
                "--output-dir",
                type=Path,
                default=None,
                help="folder to write the Hub repository into (default: <table's stem>-hardpos beside it)",
            )
        else:
            sub.add_argument(
                "--output-dir", type=Path, required=True, help="folder to write the Hub repository into"
            )
        if dataset.upstream is not None:
            sub.add_argument(
                "--upstream-dir",
                type=Path,
                default=None,
                help=f"local copy of {dataset.upstream}; default: download the files from GitHub",
            )
        keywords = [sub.add_argument(*flags, **kwargs).dest for flags, kwargs in dataset.options]
        sub.add_argument(
            "--cache-dir", type=Path, default=None, help="download/extraction cache and build work folder"
        )
        sub.add_argument(
            "--skip-missing",
            action="store_true",
            help="drop rows whose image is missing (counted in the card, listed in build_report.json) "
            "instead of failing",
        )
        sub.add_argument(
            "--max-shard-size",
            default=None,
            help="maximum parquet shard size, e.g. 1GB (default: hf_hardpos.data.hub_folder.SHARD_SIZE)",
        )
        sub.add_argument(
            "--push-to-hub",
            metavar="ORG/NAME",
            default=None,
            help="upload the built folder to this dataset repo, deleting its data/ files this build does not have "
            "(token: HF_TOKEN or `hf auth login`; no option takes a token)",
        )
        sub.add_argument("--private", action="store_true", help="create the Hub repo as private")
        sub.add_argument("--no-progress", action="store_true", help="no progress bars")
        sub.set_defaults(func=run, builder_keywords=keywords, dataset=name)  # an alias builds `name`


def check_output_dir(output_dir: Path) -> None:
    """Fail before any download or build if the output folder cannot be written."""
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserInputError(f"--output-dir {output_dir}: cannot create it ({error.strerror})") from error
    if not output_dir.is_dir() or not os.access(output_dir, os.W_OK):
        raise UserInputError(f"--output-dir {output_dir}: not a writable folder; choose another --output-dir")


def run(args: argparse.Namespace) -> int:
    from ..data.hub_folder import push_folder
    from ..data.shards import size_in_bytes
    from ..data.sources import existing_cache_dir

    if args.output_dir is None:  # `own` only: every other dataset requires it
        from ..evaluation.eval_data import own_output_dir

        args.output_dir = own_output_dir(args.table)
    check_output_dir(args.output_dir)
    existing_cache_dir(args.cache_dir)  # created now, or refused before any input is read
    if args.max_shard_size is not None:
        size_in_bytes(args.max_shard_size)  # a bad size fails now, not after the build
    build(args)
    if args.push_to_hub:
        print(f"Uploading {args.output_dir} to https://huggingface.co/datasets/{args.push_to_hub}")
        print(push_folder(args.output_dir, args.push_to_hub, private=args.private or None))
    return 0
