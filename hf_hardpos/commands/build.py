"""`hardpos build <dataset>`: build a benchmark or training set as a Hub dataset folder, optionally push it.

One place for the command-line glue of every builder in `hf_hardpos.data` (the scripts in
`dataset_scripts/` call this command): the options every builder shares (`--output-dir`,
`--upstream-dir`, `--cache-dir`, `--skip-missing`, `--max-shard-size`, `--push-to-hub`) are declared
once, the output folder is checked before any work, and bad input is a one-line error (exit 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserInputError


@dataclass(frozen=True)
class Buildable:
    """One buildable dataset: its help, where `--upstream-dir` points, its own options and its build."""

    help: str
    upstream: str | None  # what --upstream-dir is a copy of; None: the dataset has no such option
    default_repo: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    build: Callable[[argparse.Namespace], object]


def _images_dir(help_text: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--images-dir", type=Path, default=None, help=help_text)

    return add


def _common_builder_options(args: argparse.Namespace) -> dict:
    from ..data.hub_folder import SHARD_SIZE

    return {
        "upstream_dir": getattr(args, "upstream_dir", None),
        "skip_missing": args.skip_missing,
        "cache_dir": args.cache_dir,
        "max_shard_size": args.max_shard_size or SHARD_SIZE,
        "repo_id_for_card": args.push_to_hub or DATASETS[args.dataset].default_repo,
        "progress": not args.no_progress,
    }


# --- per-dataset options and calls ------------------------------------------------------------------


def _replace_arguments(parser: argparse.ArgumentParser) -> None:
    from ..columns import REPLACE_SUBSETS

    _images_dir("folder with VG_100K/<id>.jpg and VG_100K_2/<id>.jpg (default: download the VG archives)")(parser)
    parser.add_argument("--subsets", nargs="+", choices=REPLACE_SUBSETS, default=list(REPLACE_SUBSETS))
    parser.add_argument("--no-images", action="store_true", help="build the rows without the image column")
    parser.add_argument(
        "--union-config",
        metavar="NAME",
        default=None,
        help="also declare a config NAME reading both subsets (off by default: `hardpos eval` scores every "
        "config and already reports the paper's pooled REPLACE figure from the two subsets)",
    )


def _build_replace(args: argparse.Namespace):
    from ..data.replace import export_replace

    return export_replace(
        args.output_dir,
        images_dir=args.images_dir,
        subsets=args.subsets,
        embed_images=not args.no_images,
        union_config_name=args.union_config,
        **_common_builder_options(args),
    )


def _swap_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--aro-dir", type=Path, default=None, help="folder holding ARO's visual_genome_attribution.json"
    )
    _images_dir("Visual Genome images: VG_100K/, VG_100K_2/ and/or flat <id>.jpg (ARO's images/)")(parser)
    parser.add_argument("--crop-format", default="png", help="encoding of the crops: png (lossless) or jpeg")
    parser.add_argument("--no-images", action="store_true", help="build the rows without the image column")


def _build_swap(args: argparse.Namespace):
    from ..data.swap import export_swap

    return export_swap(
        args.output_dir,
        aro_dir=args.aro_dir,
        images_dir=args.images_dir,
        embed_images=not args.no_images,
        crop_format=args.crop_format,
        **_common_builder_options(args),
    )


def _finetune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--coco-annotations",
        type=Path,
        default=None,
        help="the split's captions file (captions_train2017.json by default) or a folder holding it (default: "
        "download COCO's annotations of that year)",
    )
    parser.add_argument(
        "--coco-split",
        choices=("train2017", "train2014"),
        default="train2017",
        help="COCO captions to build from: train2017 (the paper's 591,753 captions, which the hard-positive files "
        "follow line by line) or train2014 (CE-CLIP's fine-tuning captions; hard positives null)",
    )
    parser.add_argument(
        "--coco-images-dir", type=Path, default=None, help="COCO image folder of the split (train2017/), to embed them"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the rule-based hard-negative generator")
    parser.add_argument(
        "--mlm-negatives",
        nargs="+",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="also build the `ce_clip` config (CE-CLIP's four typed hard negatives: hard_negative_relation, "
        "_attribute, _action, _object) from the output of `hardpos generate --negative --method mlm --kind all` "
        "over this build's captions in row order (or four single --kind outputs); its manifest must sit beside "
        "it. With --coco-images-dir the images are embedded in both configs",
    )


def _build_finetune(args: argparse.Namespace):
    from ..data.coco_finetune import export_finetune

    return export_finetune(
        args.output_dir,
        coco_annotations=args.coco_annotations,
        coco_images_dir=args.coco_images_dir,
        coco_split=args.coco_split,
        seed=args.seed,
        mlm_negatives=args.mlm_negatives,
        **_common_builder_options(args),
    )


def _coco_benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    _images_dir("COCO val2017 folder, images by file name (default: download val2017.zip, about 1 GB)")(parser)
    parser.add_argument("--subsets", nargs="+", default=None, help="subsets to build (default: all)")
    parser.add_argument("--no-images", action="store_true", help="build the rows without the image column")


def _build_coco_benchmark(name: str) -> Callable[[argparse.Namespace], object]:
    def build(args: argparse.Namespace):
        from ..data import sugarcrepe

        benchmark = {"sugarcrepe": sugarcrepe.SUGARCREPE_BENCHMARK, "sugarcrepe_pp": sugarcrepe.SUGARCREPE_PP_BENCHMARK}
        return sugarcrepe.export_coco_benchmark(
            benchmark[name],
            args.output_dir,
            images_dir=args.images_dir,
            subsets=args.subsets,
            embed_images=not args.no_images,
            **_common_builder_options(args),
        )

    return build


def _aro_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--aro-dir",
        type=Path,
        default=None,
        help="folder with ARO's visual_genome_{relation,attribution}.json and the Karpathy test files "
        "coco_karpathy_test.json / flickr30k_test.json (default: download them from ARO's and BLIP's links)",
    )
    _images_dir("ARO's images/ or Visual Genome (VG_100K/, VG_100K_2/) for the VG configs (default: ARO's zip)")(parser)
    parser.add_argument("--coco-images-dir", type=Path, default=None, help="folder holding COCO val2014/ (coco_order)")
    parser.add_argument(
        "--flickr-images-dir", type=Path, default=None, help="folder holding flickr30k-images/ (flickr30k_order)"
    )
    parser.add_argument("--configs", nargs="+", default=None, help="configs to build (default: all four)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the order perturbations (per caption)")
    parser.add_argument("--crop-format", default="png", help="encoding of the VG crops: png (lossless) or jpeg")
    parser.add_argument("--no-images", action="store_true", help="build the rows without the image column")


def _build_aro(args: argparse.Namespace):
    from ..data.aro import ARO_CONFIGS, export_aro

    options = _common_builder_options(args)
    del options["upstream_dir"]  # ARO's files come through --aro-dir
    return export_aro(
        args.output_dir,
        aro_dir=args.aro_dir,
        images_dir=args.images_dir,
        coco_images_dir=args.coco_images_dir,
        flickr_images_dir=args.flickr_images_dir,
        configs=args.configs or ARO_CONFIGS,
        seed=args.seed,
        crop_format=args.crop_format,
        embed_images=not args.no_images,
        **options,
    )


def _seed_benchmark_arguments(what: str, subsets_help: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--images-dir", type=Path, required=True, help=what)
        parser.add_argument("--subsets", nargs="+", default=None, help=subsets_help)

    return add


def _build_valse(args: argparse.Namespace):
    from ..data.valse import export_valse

    options = _common_builder_options(args)
    if options["upstream_dir"] is None:
        raise UserInputError("hardpos build valse needs --upstream-dir: a clone of github.com/Heidelberg-NLP/VALSE")
    return export_valse(args.output_dir, images_dir=args.images_dir, pieces=args.subsets, **options)


def _build_vl_checklist(args: argparse.Namespace):
    from ..data.vl_checklist import export_vl_checklist

    options = _common_builder_options(args)
    if options["upstream_dir"] is None:
        raise UserInputError("hardpos build vl_checklist needs --upstream-dir: a clone of github.com/om-ai-lab/VL-CheckList")
    return export_vl_checklist(args.output_dir, images_dir=args.images_dir, files=args.subsets, **options)


DATASETS: dict[str, Buildable] = {
    "replace": Buildable(
        "REPLACE (Kamath et al. 2024): VL-CheckList c/c_n with the paper's c_p, Visual Genome images",
        "github.com/amitakamath/hard_positives (data/, swapped_data/)",
        "hardpos/replace",
        _replace_arguments,
        _build_replace,
    ),
    "swap": Buildable(
        "SWAP (Kamath et al. 2024): ARO VG-Attribution with the paper's c_p, images cropped to the bbox",
        "github.com/amitakamath/hard_positives (swapped_data/)",
        "hardpos/swap",
        _swap_arguments,
        _build_swap,
    ),
    "finetune": Buildable(
        "COCO train 2014 captions with the paper's hard positives and rule-made hard negatives "
        "(+ CE-CLIP's typed masked-LM negatives with --mlm-negatives)",
        "github.com/amitakamath/hard_positives (hard_positives_ft/)",
        "hardpos/coco",
        _finetune_arguments,
        _build_finetune,
    ),
    "sugarcrepe": Buildable(
        "SugarCrepe (Hsieh et al. 2023): 7 subsets, 7,511 rows of c/c_n on COCO val2017",
        "github.com/RAIVNLab/sugar-crepe (data/<subset>.json)",
        "hardpos/sugarcrepe",
        _coco_benchmark_arguments,
        _build_coco_benchmark("sugarcrepe"),
    ),
    "sugarcrepe_pp": Buildable(
        "SugarCrepe++ (Dumpala et al. 2024): 5 subsets, 4,757 rows of c/c_p/c_n on COCO val2017",
        "github.com/Sri-Harsha/scpp (data/<subset>.json)",
        "hardpos/sugarcrepe_pp",
        _coco_benchmark_arguments,
        _build_coco_benchmark("sugarcrepe_pp"),
    ),
    "aro": Buildable(
        "ARO (Yuksekgonul et al. 2023): vg_relation, vg_attribution, coco_order, flickr30k_order",
        None,
        "hardpos/aro",
        _aro_arguments,
        _build_aro,
    ),
    "valse": Buildable(
        "VALSE (Parcalabescu et al. 2022): 11 pieces of caption/foil pairs, annotators' votes kept",
        "github.com/Heidelberg-NLP/VALSE (data/<piece>.json)",
        "hardpos/valse",
        _seed_benchmark_arguments("one folder holding every VALSE image by file name", "pieces to build (default: all 11)"),
        _build_valse,
    ),
    "vl_checklist": Buildable(
        "VL-CheckList (Zhao et al. 2022): one config per corpus file, POS[0]/NEG[0]; non-commercial licence",
        "github.com/om-ai-lab/VL-CheckList (corpus/v1/ and the data/ files it names)",
        "hardpos/vl_checklist",
        _seed_benchmark_arguments("folder holding the images under each corpus file's IMG_ROOT (e.g. vg/, hake/, swig/)",
                                  "corpus files to build, by config name (default: all present)"),
        _build_vl_checklist,
    ),
    "own": Buildable(
        "your own hard-positive eval set from a CSV/JSONL of image paths and captions (README: Evaluate your own data)",
        None,
        "you/my-eval-set",
        lambda parser: _own_arguments(parser),
        lambda args: _build_own(args),
    ),
}


def _own_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", type=Path, required=True,
                        help="CSV (with a header) or JSONL: image, caption, hard_negative, hard_positive[, image_id, config]")
    _images_dir("folder the table's image paths are relative to (default: the table's folder)")(parser)


def _build_own(args: argparse.Namespace):
    from ..data.hub_folder import SHARD_SIZE
    from ..data.own import export_own

    return export_own(args.table, args.output_dir, images_dir=args.images_dir, skip_missing=args.skip_missing,
                      cache_dir=args.cache_dir, max_shard_size=args.max_shard_size or SHARD_SIZE,
                      repo_id_for_card=args.push_to_hub)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build",
        help="build a dataset (REPLACE, SWAP, COCO fine-tuning, SugarCrepe, SugarCrepe++, ARO) as a Hub folder",
        description="Write the Hub repository folder of a dataset (parquet shards, README with `configs:` and "
        "a card with counts and source sha256) into --output-dir, and optionally push it.",
    )
    datasets_parsers = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    for name, dataset in DATASETS.items():
        sub = datasets_parsers.add_parser(name, help=dataset.help, description=dataset.help)
        sub.add_argument("--output-dir", type=Path, required=True, help="folder to write the Hub repository into")
        if dataset.upstream is not None:
            sub.add_argument(
                "--upstream-dir",
                type=Path,
                default=None,
                help=f"local copy of {dataset.upstream}; default: download the files from GitHub",
            )
        dataset.add_arguments(sub)
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
        sub.set_defaults(func=run)


def check_output_dir(output_dir: Path) -> None:
    """Fail before any download or build if the output folder cannot be written."""
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserInputError(f"--output-dir {output_dir}: cannot create it ({error.strerror})") from error
    if not output_dir.is_dir() or not os.access(output_dir, os.W_OK):
        raise UserInputError(f"--output-dir {output_dir}: not a writable folder; choose another --output-dir")


def run(args: argparse.Namespace) -> int:
    from ..data.hub_folder import push_folder, size_in_bytes
    from ..data.sources import existing_cache_dir

    check_output_dir(args.output_dir)
    existing_cache_dir(args.cache_dir)  # created now, or refused before any input is read
    if args.max_shard_size is not None:
        size_in_bytes(args.max_shard_size)  # a bad size fails now, not after the build
    DATASETS[args.dataset].build(args)
    if args.push_to_hub:
        print(f"Uploading {args.output_dir} to https://huggingface.co/datasets/{args.push_to_hub}")
        print(push_folder(args.output_dir, args.push_to_hub, private=args.private or None))
    return 0


def run_script(dataset: str, argv: list[str] | None = None) -> int:
    """What `dataset_scripts/<dataset>.py` runs: `hardpos build <dataset> ARGS`."""
    from ..cli import main

    return main(["build", dataset, *(sys.argv[1:] if argv is None else argv)])
