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
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..command_parsers import add_command
from ..columns import REPLACE_SUBSETS
from ..errors import UserInputError

# A command-line option as `parser.add_argument` takes it: (flags, keyword arguments).
Option = tuple[tuple[str, ...], dict]


def _option(*flags: str, **kwargs) -> Option:
    return flags, kwargs


@dataclass(frozen=True)
class Buildable:
    """One buildable dataset: its help, its builder, its own options and where `--upstream-dir` points.

    Every option's `dest` is a keyword of the builder, so one call serves every dataset: the
    builder gets its own options, `--upstream-dir` where it has one, and the shared options as
    :class:`~hf_hardpos.data.hub_folder.BuildOptions` fields.
    """

    help: str
    export: str  # "<module of hf_hardpos.data>:<function>", imported only when the dataset is built
    options: tuple[Option, ...]
    upstream: str | None = None  # what --upstream-dir is a copy of; None: the dataset has no such option
    upstream_required: bool = False
    aliases: tuple[str, ...] = ()  # other names of the same command


def _images_dir(help_text: str, required: bool = False) -> Option:
    return _option("--images-dir", type=Path, default=None, required=required, help=help_text)


def _subsets(help_text: str, dest: str = "subsets", **kwargs) -> Option:
    return _option("--subsets", nargs="+", default=None, dest=dest, metavar="NAME", help=help_text, **kwargs)


NO_IMAGES = _option("--no-images", dest="embed_images", action="store_false", help="build the rows without the image column")
CROP_FORMAT = _option("--crop-format", default="png", help="encoding of the crops: png (lossless) or jpeg")

DATASETS: dict[str, Buildable] = {
    "replace": Buildable(
        "REPLACE (Kamath et al. 2024): VL-CheckList c/c_n with the paper's c_p, Visual Genome images",
        "replace:export_replace",
        (
            _images_dir("folder with VG_100K/<id>.jpg and VG_100K_2/<id>.jpg (default: download the VG archives)"),
            _subsets("subsets to build (default: both)", choices=REPLACE_SUBSETS),
            NO_IMAGES,
            _option(
                "--union-config", dest="union_config_name", metavar="NAME", default=None,
                help="also declare a config NAME reading both subsets (off by default: `hardpos eval` scores every "
                "config and already reports the paper's pooled REPLACE figure from the two subsets)",
            ),
        ),
        "github.com/amitakamath/hard_positives (data/, swapped_data/)",
    ),
    "swap": Buildable(
        "SWAP (Kamath et al. 2024): ARO VG-Attribution with the paper's c_p, images cropped to the bbox",
        "swap:export_swap",
        (
            _option("--aro-dir", type=Path, default=None, help="folder holding ARO's visual_genome_attribution.json"),
            _images_dir("Visual Genome images: VG_100K/, VG_100K_2/ and/or flat <id>.jpg (ARO's images/)"),
            CROP_FORMAT,
            NO_IMAGES,
        ),
        "github.com/amitakamath/hard_positives (swapped_data/)",
    ),
    "finetune": Buildable(
        "COCO fine-tuning set: train2017 captions with the paper's hard positives (or train2014, CE-CLIP's), "
        "rule-made hard negatives (+ CE-CLIP's typed masked-LM negatives with --mlm-negatives)",
        "coco_finetune:export_finetune",
        (
            _option(
                "--coco-annotations", type=Path, default=None,
                help="the split's captions file (captions_train2017.json by default) or a folder holding it (default: "
                "download COCO's annotations of that year)",
            ),
            _option(
                "--coco-split", choices=("train2017", "train2014"), default="train2017",
                help="COCO captions to build from: train2017 (the paper's 591,753 captions, which the hard-positive "
                "files follow line by line) or train2014 (CE-CLIP's fine-tuning captions; hard positives null)",
            ),
            _option("--coco-images-dir", type=Path, default=None, help="COCO image folder of the split (train2017/), to embed them"),
            _option("--seed", type=int, default=0, help="seed of the rule-based hard-negative generator"),
            _option(
                "--mlm-negatives", nargs="+", type=Path, default=None, metavar="FILE.jsonl",
                help="also build the `ce_clip` config (CE-CLIP's four typed hard negatives: hard_negative_relation, "
                "_attribute, _action, _object) from the output of `hardpos generate --negative --method mlm --kind all` "
                "over this build's captions in row order (or four single --kind outputs); its manifest must sit beside "
                "it. With --coco-images-dir the images are embedded in both configs",
            ),
            _option(
                "--hard-positives", nargs="+", type=Path, default=None, metavar="FILE.jsonl",
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
            f"sugarcrepe:export_{name}",
            (
                _images_dir("COCO val2017 folder, images by file name (default: download val2017.zip, about 1 GB)"),
                _subsets("subsets to build (default: all)"),
                NO_IMAGES,
            ),
            upstream,
        )
        for name, help_text, upstream in (
            ("sugarcrepe", "SugarCrepe (Hsieh et al. 2023): 7 subsets, 7,511 rows of c/c_n on COCO val2017",
             "github.com/RAIVNLab/sugar-crepe (data/<subset>.json)"),
            ("sugarcrepe_pp", "SugarCrepe++ (Dumpala et al. 2024): 5 subsets, 4,757 rows of c/c_p/c_n on COCO val2017",
             "github.com/Sri-Harsha/scpp (data/<subset>.json)"),
        )
    },
    "aro": Buildable(
        "ARO (Yuksekgonul et al. 2023): vg_relation, vg_attribution, coco_order, flickr30k_order",
        "aro:export_aro",
        (
            _option(
                "--aro-dir", type=Path, default=None,
                help="folder with ARO's visual_genome_{relation,attribution}.json and the Karpathy test files "
                "coco_karpathy_test.json / flickr30k_test.json (default: download them from ARO's and BLIP's links)",
            ),
            _images_dir("ARO's images/ or Visual Genome (VG_100K/, VG_100K_2/) for the VG configs (default: ARO's zip)"),
            _option("--coco-images-dir", type=Path, default=None, help="folder holding COCO val2014/ (coco_order)"),
            _option("--flickr-images-dir", type=Path, default=None, help="folder holding flickr30k-images/ (flickr30k_order)"),
            _option("--configs", nargs="+", default=None, help="configs to build (default: all four)"),
            _option("--seed", type=int, default=0, help="seed of the order perturbations (per caption)"),
            CROP_FORMAT,
            NO_IMAGES,
        ),
    ),
    "valse": Buildable(
        "VALSE (Parcalabescu et al. 2022): 11 pieces of caption/foil pairs, annotators' votes kept",
        "valse:export_valse",
        (
            _images_dir("one folder holding every VALSE image by file name", required=True),
            _subsets("pieces to build (default: all 11)", dest="pieces"),
        ),
        "github.com/Heidelberg-NLP/VALSE (data/<piece>.json)",
        upstream_required=True,
    ),
    "vl_checklist": Buildable(
        "VL-CheckList (Zhao et al. 2022): one config per corpus file, POS[0]/NEG[0]; non-commercial licence",
        "vl_checklist:export_vl_checklist",
        (
            _images_dir("folder holding the images under each corpus file's IMG_ROOT (e.g. vg/, hake/, swig/)",
                        required=True),
            _subsets("corpus files to build, by config name (default: all present)", dest="files"),
        ),
        "github.com/om-ai-lab/VL-CheckList (corpus/v1/ and the data/ files it names)",
        upstream_required=True,
    ),
    "own": Buildable(
        "your own hard-positive eval set from a CSV/JSONL of image paths and captions (docs/evaluation.md, Evaluate your own data)",
        "own:export_own",
        (
            _option("--table", type=Path, required=True,
                    help="CSV (with a header) or JSONL: image, caption, hard_negative, hard_positive[, image_id, config]"),
            _images_dir("folder the table's image paths are relative to (default: the table's folder)"),
        ),
    ),
}


def build(args: argparse.Namespace):
    """Run the builder of `args.dataset` with its own options (`args.builder_keywords`) and the shared ones."""
    dataset = DATASETS[args.dataset]
    if dataset.upstream_required and args.upstream_dir is None:
        raise UserInputError(f"hardpos build {args.dataset} needs --upstream-dir: a clone of {dataset.upstream}")
    module, function = dataset.export.split(":")
    export = getattr(importlib.import_module(f"..data.{module}", __package__), function)
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
    for name, dataset in DATASETS.items():
        sub = datasets_parsers.add_parser(name, aliases=dataset.aliases, help=dataset.help, description=dataset.help)
        if name == "own":
            sub.add_argument("--output-dir", type=Path, default=None,
                             help="folder to write the Hub repository into (default: <table's stem>-hardpos beside it)")
        else:
            sub.add_argument("--output-dir", type=Path, required=True, help="folder to write the Hub repository into")
        if dataset.upstream is not None:
            sub.add_argument(
                "--upstream-dir",
                type=Path,
                default=None,
                help=f"local copy of {dataset.upstream}; default: download the files from GitHub",
            )
        keywords = [sub.add_argument(*flags, **kwargs).dest for flags, kwargs in dataset.options]
        sub.add_argument("--cache-dir", type=Path, default=None, help="download/extraction cache and build work folder")
        sub.add_argument(
            "--skip-missing",
            action="store_true",
            help="drop rows whose image is missing (counted in the card, listed in build_report.json) "
            "instead of failing",
        )
        sub.add_argument(
            "--max-shard-size", default=None, help="maximum parquet shard size, e.g. 1GB (default: hf_hardpos.data.hub_folder.SHARD_SIZE)"
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
