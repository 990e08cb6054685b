"""`hardpos eval`: score a model on one benchmark or a suite and print how every number was obtained.

Recognises what --dataset is (our hard-positive schema, caption + negatives, Winoground, or
clip_benchmark's webdataset layout) and runs its task; or runs a --suite. Prints tables that name their
aggregation and tie rule; writes metrics.json (with provenance) and per-row scores to --output-dir.

    hardpos eval --model openai/clip-vit-base-patch32 --dataset hardpos/replace --output-dir out/clip
    hardpos eval --model negclip.pth --open-clip-config ViT-B-32 --activation both --suite compositional --output-dir out/negclip

A checkpoint file (open_clip, OpenAI TorchScript, TSVLC LoRA) is converted once into a cache keyed by
its content and scored like any HF model. `--activation both` runs the checkpoint once per
activation and prints one side-by-side table, because loading an open_clip checkpoint under the
wrong activation silently changes every score (a frequent complaint in the issue trackers of ARO, SugarCrepe, TSVLC and CE-CLIP), and the reader should see by how much.
"""

from __future__ import annotations

import argparse
import os

from ._eval_runs import BOTH, run_models, run_one_model, run_options
from ._parsers import add_command

# Set before torch is loaded (the command line loads it only once a command runs): OpenMP threads wait
# for each other passively instead of spinning. Evaluation runs many small parallel regions (text
# batches, small models); on a machine whose cores other processes also use, a spinning thread waits
# for a descheduled one, and each region takes a scheduler time slice instead of microseconds
# (benchmarks/eval_sweep.py). Same threads, same work: the embeddings are bit-identical. A value the
# user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def register(subparsers: argparse._SubParsersAction) -> None:
    # Light imports only: this runs for `hardpos eval --help` and every argument error (suite names and
    # tasks are checked in `run`, where the suite module is loaded anyway).
    from ..backends import BACKENDS
    from ..conversion.open_clip_config import ACTIVATIONS
    from ..evaluation.multi_model import MODEL_LISTS
    from ..image_processing import DEFAULT_IMAGE_BACKEND, IMAGE_BACKENDS
    from ..protocol import PROTOCOLS

    parser = add_command(subparsers, __name__, run)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--dataset", help="Hub id or local folder (parquet + README configs, or a clip_benchmark webdataset)"
    )
    source.add_argument(
        "--suite",
        help="a named suite (compositional, retention, paper, ...) or a YAML file listing datasets "
        "(docs/benchmarks.md, Benchmarks)",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=None,
        help="Hub id or local folder of a CLIP-like model, or an open_clip / OpenAI TorchScript / TSVLC-LoRA "
        "checkpoint file (converted once into a cache, then scored like any HF model). Repeatable: several models "
        "in one run share decoded images and each gets OUT/<name>/ as if evaluated alone, then one comparison table",
    )
    parser.add_argument(
        "--models",
        action="append",
        default=None,
        choices=MODEL_LISTS,
        help="add the rows of a `hardpos zoo` list: table8 (the paper's Table 8 models), table1 (its Table 1 rows "
        "whose weights have a Hub id)",
    )
    parser.add_argument(
        "--pixel-cache",
        default=None,
        metavar="DIR",
        help="keep decoded, preprocessed images on disk by content and preprocessing settings, so later runs (new "
        "checkpoints) skip decoding; its size is printed at the end",
    )
    parser.add_argument(
        "--pixel-cache-max-gb",
        type=float,
        default=None,
        help="bound on --pixel-cache's size; once reached, new images are decoded but not written",
    )
    checkpoint = parser.add_argument_group(
        "checkpoint files",
        "only with --model FILE; the converted folders are cached by the checkpoint's sha256 "
        "and these options under $HARDPOS_CONVERTED_CACHE (default <HF_HOME>/hf_hardpos/converted)",
    )
    checkpoint.add_argument(
        "--open-clip-config",
        default=None,
        metavar="NAME_OR_JSON",
        help="open_clip model name (ViT-B-32, ViT-B-32-quickgelu, ...) or model-config JSON (file or text); "
        "required for open_clip checkpoints, inferred for OpenAI archives",
    )
    checkpoint.add_argument(
        "--activation",
        choices=(*ACTIVATIONS, BOTH),
        default=None,
        help="default: the config's. The open_clip baselines were trained with quick_gelu but the paper evaluated "
        f"them with gelu; '{BOTH}' evaluates each and prints them side by side, with --output-dir DIR writing "
        + " and ".join(f"DIR/{a}" for a in ACTIVATIONS),
    )
    checkpoint.add_argument(
        "--tokenizer",
        default=None,
        metavar="FOLDER_OR_ID",
        help="default openai/clip-vit-base-patch32 (offline: the BPE file open_clip ships). With open_clip:... or "
        "--backend open_clip: the model's own tokenizer, or 'clip' for CLIP BPE ids whatever the text tower (how the paper "
        "tokenized its RoBERTa row)",
    )
    checkpoint.add_argument(
        "--preset",
        default=None,
        help="a `hardpos zoo` preset: fills --open-clip-config and --activation (the one the paper evaluated with)",
    )
    checkpoint.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="the model family that scores --model (default: recognised from it, `hardpos zoo` lists them). "
        "--model FILE --backend open_clip scores the checkpoint with open_clip itself instead of converting it to "
        "CLIPModel: any open_clip architecture (ResNet image towers, Hugging Face text towers), open_clip's transforms "
        "and tokenizer; needs --open-clip-config and the [openclip] extra. --model open_clip:NAME/TAG or "
        "open_clip:hf-hub:ORG/REPO is scored by open_clip without it",
    )
    checkpoint.add_argument(
        "--native",
        dest="backend",
        action="store_const",
        const="open_clip",
        help="the same as --backend open_clip",
    )
    parser.add_argument(
        "--task",
        default=None,
        metavar="TASK",
        help="override the task recognised from the data (hard_positive, caption_selection, winoground, "
        "zeroshot_classification, zeroshot_retrieval, ...; docs/benchmarks.md, Benchmarks)",
    )
    parser.add_argument(
        "--config", action="append", dest="configs", help="config to evaluate (repeatable; default: all)"
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--num-workers",
        type=int,
        default=None,
        help="DataLoader workers decoding images (default: the CPU cores this process may use, at most 16; "
        "scores do not depend on it)",
    )
    parser.add_argument("--device", default=None, help="default: cuda, then mps, then cpu")
    parser.add_argument(
        "--dtype",
        choices=["fp32", "bf16", "fp16"],
        default="fp32",
        help="fp32 (default on every device) or bf16/fp16 autocast; lower precision flips near-tied "
        "outcomes (docs/evaluation.md, Numbers that cannot silently drift), and the choice is recorded in metrics.json",
    )
    parser.add_argument("--allow-tf32", action="store_true", help="allow TF32 matmuls/convolutions on CUDA")
    parser.add_argument(
        "--image-backend",
        choices=IMAGE_BACKENDS,
        default=DEFAULT_IMAGE_BACKEND,
        help="transformers image-processor backend (pixels differ slightly between them; recorded and part of every "
        "resume and cache key). Default: pil, whatever else is installed",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="default",
        help="paper: score as the paper's code did (the checkpoint's own preprocessing with torchvision's crop "
        "offsets; float16 weights for OpenAI checkpoints on CUDA, as clip.load; strict ties). Default: fp32, "
        "the model's transformers image processor (docs/evaluation.md, Numbers that cannot silently drift)",
    )
    parser.add_argument(
        "--max-rows", type=int, default=None, help="evaluate only the first N rows per config"
    )
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="95%% intervals by a bootstrap of N resamples over images instead of the Wilson interval every rate gets "
        "by default; computed from the saved per-row scores, so changing it never rescores",
    )
    parser.add_argument(
        "--output-dir",
        "--output",
        dest="output",
        default=None,
        metavar="DIR",
        help="folder for metrics.json and per-row scores (required for --suite)",
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="recompute what --output-dir already holds from the same inputs",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="keep image/text embeddings on disk by content, per model and settings, so every distinct "
        "input is encoded once across datasets and runs",
    )
    parser.add_argument(
        "--no-decode-ahead",
        action="store_true",
        help="do not decode images in a second process while this one starts (it gives the same scores; "
        "evaluation.decode_ahead says when it is taken)",
    )
    parser.add_argument(
        "--no-progress",
        "--quiet",
        dest="no_progress",
        action="store_true",
        help="no progress bars at all, datasets' and transformers' included (off a terminal, bars print one line "
        "every few seconds)",
    )


def run(args: argparse.Namespace) -> int:
    """Under `torchrun` / `accelerate launch` (WORLD_SIZE > 1) process 0 runs the command and the others
    encode their share of its inputs (`evaluation.distributed`); otherwise the command runs here alone."""
    from ..evaluation.decode_ahead import DecodeAhead, wanted

    # Before torch is imported: the decoder forks from a process with no other thread (decode_ahead).
    folders = wanted(args)
    ahead = DecodeAhead.begin(*folders, args.split) if folders else None
    try:
        from ..evaluation.distributed import process_group

        with process_group(args.device) as workers:
            if workers is not None and not workers.is_driver:
                return workers.follow()
            return _run(args, workers, ahead)
    finally:
        if ahead is not None:
            ahead.close()


def _run(args: argparse.Namespace, workers, ahead=None) -> int:
    from ..evaluation.multi_model import expand_models
    from ..run_memo import sharing

    run_options(args)  # refuses invalid numbers first
    models = expand_models(args.model or [], args.models or [])
    several = len(models) > 1 or bool(args.models)
    pixels = _pixel_store(args, several)  # refuses a misused --pixel-cache-max-gb either way
    if ahead is not None:
        pixels = ahead.pixels(shared=several)
    with sharing():  # the data read to recognise the task, then by every model, is loaded once (`run_memo`)
        if len(models) > 1 or args.models:
            return run_models(args, models, pixels, workers)
        args.model = models[0]
        return run_one_model(args, pixels, workers)


def _pixel_store(args: argparse.Namespace, several: bool):
    """A `PixelStore` when models share decoded images (several models) or `--pixel-cache` keeps them; else None."""
    from ..errors import UserInputError

    if args.pixel_cache_max_gb is not None and args.pixel_cache is None:
        raise UserInputError("--pixel-cache-max-gb bounds --pixel-cache DIR; give that too")
    if not several and args.pixel_cache is None:
        return None
    from ..pixel_store import PixelStore, bound_bytes

    try:
        bound = bound_bytes(args.pixel_cache_max_gb) if args.pixel_cache_max_gb is not None else None
    except ValueError as err:
        raise UserInputError(f"--pixel-cache-max-gb {err}") from None
    try:
        return PixelStore(args.pixel_cache, max_disk_bytes=bound)
    except OSError as err:
        raise UserInputError(
            f"--pixel-cache {args.pixel_cache}: cannot use it ({err.strerror or err})"
        ) from err
