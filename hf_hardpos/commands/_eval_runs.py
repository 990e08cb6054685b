"""What `hardpos eval` runs once its arguments are parsed: one model (once per activation with
`--activation both`) or several models, on one dataset or a suite, and what it prints and returns.

Also the model each run scores (a preset's checkpoint options, the backend's model argument) and the
`RunOptions` the arguments make. A module of `commands/` that is no
command (its name starts with "_"), so `commands/eval.py` keeps to the command's arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BOTH = "both"


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


def run_options(args: argparse.Namespace, **changes):
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


def run_one_model(args: argparse.Namespace, pixels, workers) -> int:
    """One model (once per activation with `--activation both`) on one dataset or a suite."""
    from ..backends import ModelOptions
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
        args.model, conversion["open_clip_config"] = backend_model(
            args.backend, args.model, conversion["open_clip_config"]
        )
    # Before any data is read: these refusals take seconds, not a dataset load.
    check_model_options(args.model, ModelOptions(activation=args.activation, **conversion))
    require_model_exists(args.model)
    compare = len(activations) > 1

    def options_for(activation: str | None):
        """With two activations, each log line says which run it belongs to."""
        log = (lambda message: print(f"[{activation}] {message}")) if compare else print
        return run_options(
            args,
            log=log,
            preset=_paper_preset(args.preset, activation),
            make_scorer=scorer_factory(pixels, workers),
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


def run_models(args: argparse.Namespace, models: list[str], pixels, workers) -> int:
    """Several models, one run (`evaluation.multi_model`): each model's usual outputs in OUT/<name>/, then one table."""
    from ..backends import ModelOptions
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
        check_model_options(model, ModelOptions(activation=args.activation, **conversion))
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
        options = run_options(
            args,
            log=log,
            make_scorer=scorer_factory(pixels, workers),
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
    started = time.perf_counter()
    table = _comparison_table(run)
    print(f"\n=== all models (first = reference A) ===\n{table}")
    print(f"comparison table: {time.perf_counter() - started:.2f} s")
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


def backend_model(backend: str, model: str, open_clip_config: str | None) -> tuple[str, str | None]:
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
