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
import sys
from pathlib import Path

from ..command_parsers import add_command

# Set before torch is loaded (the command line loads it only once a command runs): OpenMP threads wait
# for each other passively instead of spinning. Evaluation runs many small parallel regions (text
# batches, small models); on a machine whose cores other processes also use, a spinning thread waits
# for a descheduled one, and each region takes a scheduler time slice instead of microseconds
# (benchmarks/eval_sweep.py). Same threads, same work: the embeddings are bit-identical. A value the
# user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

BOTH = "both"


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
        "--no-progress",
        "--quiet",
        dest="no_progress",
        action="store_true",
        help="no progress bars at all, datasets' and transformers' included (off a terminal, bars print one line "
        "every few seconds)",
    )


def _conversion_options(args: argparse.Namespace) -> tuple[dict, list[str | None]]:
    """The checkpoint options (a preset's defaults under explicit ones) and the activation(s) to evaluate.

    One entry per activation: `[None]` (the config's, or an HF model), `[act]`, or every activation
    for `--activation both`.
    """
    from ..conversion.open_clip_config import ACTIVATIONS
    from ..conversion.presets import get_preset
    from ..errors import UserInputError

    config, activation = args.open_clip_config, args.activation
    if args.preset:
        preset = get_preset(args.preset)
        if not Path(args.model).expanduser().is_file():
            raise UserInputError(
                f"--preset applies to checkpoint files; --model {args.model} is not one (a Hugging Face model needs "
                "no conversion)"
            )
        config = config or preset.open_clip_config
        activation = activation or preset.paper_activation
    activations = list(ACTIVATIONS) if activation == BOTH else [activation]
    return {"open_clip_config": config, "tokenizer": args.tokenizer}, activations


def run(args: argparse.Namespace) -> int:
    """Under `torchrun` / `accelerate launch` (WORLD_SIZE > 1) process 0 runs the command and the others
    encode their share of its inputs (`evaluation.distributed`); otherwise the command runs here alone."""
    from ..evaluation.distributed import process_group

    with process_group(args.device) as workers:
        if workers is not None and not workers.is_driver:
            return workers.follow()
        return _run(args, workers)


def _run_options(args: argparse.Namespace, **changes):
    """The command line's `RunOptions` (checked: invalid numbers are refused before anything is loaded)."""
    from ..evaluation.options import RunOptions

    options = RunOptions(
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        device=args.device,
        precision=args.dtype,
        allow_tf32=args.allow_tf32,
        image_backend=args.image_backend,
        protocol=args.protocol,
        max_rows=args.max_rows,
        bootstrap_samples=args.bootstrap,
        cache_dir=args.cache_dir,
        resume=not args.no_resume,
        progress=not args.no_progress,
    ).replace(**changes)
    options.check()
    return options


def _run(args: argparse.Namespace, workers) -> int:
    from ..evaluation.multi_model import expand_models
    from ..run_memo import sharing

    _run_options(args)  # refuses invalid numbers first
    models = expand_models(args.model or [], args.models or [])
    pixels = _pixel_store(args, several=len(models) > 1 or bool(args.models))
    with sharing():  # the data read to recognise the task, then by every model, is loaded once (`run_memo`)
        if len(models) > 1 or args.models:
            return _run_models(args, models, pixels, workers)
        args.model = models[0]
        return _run_one_model(args, pixels, workers)


def _run_one_model(args: argparse.Namespace, pixels, workers) -> int:
    """One model (once per activation with `--activation both`) on one dataset or a suite."""
    from ..compute import pick_device
    from ..errors import UserInputError
    from ..evaluation.activations import activation_comparison_table
    from ..evaluation.eval_data import require_dataset_exists
    from ..evaluation.multi_model import scorer_factory
    from ..evaluation.run import evaluate_model
    from ..evaluation.suite import (
        activation_comparison_suite_table,
        load_suite,
        run_suite,
    )
    from ..evaluation.tasks import TASKS, detect_task
    from ..model_source import check_model_options, require_model_exists

    if args.task is not None and args.task not in TASKS:
        raise UserInputError(f"--task {args.task!r} is not one of {list(TASKS)}")
    if args.dataset is not None:
        require_dataset_exists(args.dataset)
    pick_device(args.device)  # refuses a device that is not there before anything is loaded
    conversion, activations = _conversion_options(args)
    if args.backend:
        args.model, conversion["open_clip_config"] = _backend_model(
            args.backend, args.model, conversion["open_clip_config"]
        )
    # Before any data is read: these refusals take seconds, not a dataset load.
    check_model_options(args.model, conversion["open_clip_config"], args.activation, conversion["tokenizer"])
    require_model_exists(args.model)
    compare = len(activations) > 1

    def options_for(activation: str | None):
        """With two activations, each log line says which run it belongs to."""
        log = (lambda message: print(f"[{activation}] {message}")) if compare else print
        return _run_options(
            args,
            log=log,
            preset=_paper_preset(args.preset, activation),
            make_scorer=scorer_factory(pixels, workers, _model_spec(args.model, conversion, activation)),
        )

    def output_for(activation: str | None) -> str | None:
        """`--activation both` keeps one folder per activation, so resume and metrics.json stay per model."""
        if args.output is None or not compare:
            return args.output
        return str(Path(args.output) / activation)

    if args.suite is None:
        task = args.task or detect_task(args.dataset, args.split, args.configs)
        reports = {
            activation: evaluate_model(
                args.model,
                args.dataset,
                args.configs,
                args.split,
                task=task,
                output_dir=output_for(activation),
                options=options_for(activation),
                activation=activation,
                **conversion,
            )
            for activation in activations
        }
        print(activation_comparison_table(reports) if compare else next(iter(reports.values())).table())
        # A --max-rows run may have gone beside a fuller result: name the folder it really wrote.
        _print_written(
            args.output, [r.output_dir for r in reports.values()], "metrics.json and per-row scores"
        )
        if pixels is not None:
            print(_pixel_line(pixels, workers))
        return 0
    if args.output is None:
        raise UserInputError(
            "--output-dir is required for --suite (results are saved per dataset, to resume)"
        )
    if args.protocol != "default":
        raise UserInputError(
            "--protocol applies to a dataset evaluated on its own (--dataset), not to --suite"
        )
    entries = load_suite(args.suite)
    suite_reports = {
        activation: run_suite(
            args.model,
            entries,
            output_dir=output_for(activation),
            options=options_for(activation),
            activation=activation,
            **conversion,
        )
        for activation in activations
    }
    first = next(iter(suite_reports.values()))
    print(activation_comparison_suite_table(suite_reports) if compare else first.table())
    _print_written(args.output, [output_for(a) for a in activations], "metrics.json")
    if pixels is not None:
        print(_pixel_line(pixels, workers))
    return _failure_status({a: r.failed for a, r in suite_reports.items() if r.failed}, compare)


def _failure_status(failed: dict[str | None, list[str]], compare: bool) -> int:
    """1, with the failed datasets named on stderr, when any failed (every dataset ran; the failures are in
    their sections and in metrics.json); else 0."""
    if not failed:
        return 0
    listed = "; ".join(f"{', '.join(names)}" + (f" [{a}]" if compare else "") for a, names in failed.items())
    print(f"hardpos eval: error: incomplete suite, failed: {listed}", file=sys.stderr)
    return 1


def _pixel_line(pixels, workers) -> str:
    """`PixelStore.summary`, saying whose counts they are when several processes decode."""
    if workers is None:
        return pixels.summary()
    return f"process 0 of {workers.size}: {pixels.summary()} (the other processes decode their own batches)"


def _model_spec(model: str, conversion: dict, activation: str | None) -> dict:
    """What another process needs to load the same model (`evaluation.distributed`): the user's model and options."""
    return {"model": model, "activation": activation, **conversion}


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


def _run_models(args: argparse.Namespace, models: list[str], pixels, workers) -> int:
    """Several models, one run (`evaluation.multi_model`): each model's usual outputs in OUT/<name>/, then one table."""
    from ..compute import pick_device
    from ..errors import UserInputError
    from ..evaluation.eval_data import require_dataset_exists
    from ..evaluation.multi_model import evaluate_models, scorer_factory
    from ..evaluation.run import evaluate_model
    from ..evaluation.suite import load_suite, run_suite
    from ..evaluation.tasks import TASKS, detect_task
    from ..model_source import check_model_options, require_model_exists

    if args.output is None:
        raise UserInputError("--output-dir is required with several models (each gets OUT/<name>/)")
    for option, value in (
        ("--preset", args.preset),
        ("--backend", args.backend),
        ("--activation both", args.activation == BOTH),
    ):
        if value:
            raise UserInputError(f"{option} applies to one model; run that model on its own")
    if args.task is not None and args.task not in TASKS:
        raise UserInputError(f"--task {args.task!r} is not one of {list(TASKS)}")
    conversion = {"open_clip_config": args.open_clip_config, "tokenizer": args.tokenizer}
    for model in models:  # every refusal before any data is read or any model scored
        check_model_options(model, conversion["open_clip_config"], args.activation, conversion["tokenizer"])
        require_model_exists(model)
    pick_device(args.device)
    if args.dataset is not None:
        require_dataset_exists(args.dataset)
        task = args.task or detect_task(args.dataset, args.split, args.configs)
    elif args.protocol != "default":
        raise UserInputError(
            "--protocol applies to a dataset evaluated on its own (--dataset), not to --suite"
        )
    else:
        entries = load_suite(args.suite)

    def run_one(model: str, folder: Path, log):
        options = _run_options(
            args,
            log=log,
            make_scorer=scorer_factory(pixels, workers, _model_spec(model, conversion, args.activation)),
        )
        if args.dataset is not None:
            return evaluate_model(
                model,
                args.dataset,
                args.configs,
                args.split,
                task=task,
                output_dir=folder,
                options=options,
                activation=args.activation,
                **conversion,
            )
        return run_suite(
            model, entries, output_dir=folder, options=options, activation=args.activation, **conversion
        )

    run = evaluate_models(models, run_one, args.output)
    for model, outcome in run.outcomes.items():
        print(f"\n=== {outcome.folder.name}: {model} ===")
        print(outcome.report.table() if outcome.error is None else f"FAILED: {outcome.error}")
    print(f"\n=== all models (first = reference A) ===\n{_comparison_table(run)}")
    print(_pixel_line(pixels, workers))
    _print_written(
        args.output, [o.folder for o in run.outcomes.values() if o.error is None], "each model's outputs"
    )
    failed = run.failed + [
        n for n, o in run.outcomes.items() if o.error is None and getattr(o.report, "failed", None)
    ]
    if failed:
        print(f"hardpos eval: error: incomplete, failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _comparison_table(run) -> str:
    """`hardpos compare`'s table of the models of a `MultiRun` that finished (first model = reference A), or why none."""
    from ..errors import UserInputError
    from ..reporting.compare import compare_runs
    from ..reporting.compare_formats import render
    from ..reporting.runs import load_run

    done = [o.folder for o in run.outcomes.values() if o.error is None]
    if not done:
        return "no model finished: nothing to compare"
    try:
        runs = [load_run(folder) for folder in done]
        return render(compare_runs(runs, allow_mismatch=True), "text")
    except UserInputError as err:
        return f"no comparison table: {err}"


def _paper_preset(preset: str | None, activation: str | None) -> str | None:
    """The preset whose published figures apply: only when converted with the activation the paper used."""
    from ..conversion.presets import get_preset

    if preset is None or activation not in (None, get_preset(preset).paper_activation):
        return None
    return preset


def _backend_model(backend: str, model: str, open_clip_config: str | None) -> tuple[str, str | None]:
    """`--model M --backend B [--open-clip-config C]`: the model argument backend B scores M as (a checkpoint
    file in B's syntax), and the --open-clip-config left to apply."""
    from ..backends import BACKENDS, backend_for
    from ..errors import UserInputError

    model, open_clip_config = BACKENDS[backend].checkpoint_model(model, open_clip_config)
    if backend_for(model).name != backend:
        raise UserInputError(
            f"--model {model} is a {backend_for(model).name} model, not one for --backend {backend}"
        )
    return model, open_clip_config


def _print_written(output: str | None, folders: list[str | None], what: str) -> None:
    if output is not None:
        print(f"wrote {what} to {', '.join(str(folder) for folder in folders)}")
