"""Several models in one `hardpos eval` run: every image decoded once per preprocessing setting.

    hardpos eval --model A --model B --model C --dataset hardpos/replace --output OUT
    hardpos eval --models table8 --suite compositional --output OUT

Why: the paper's tables are sweeps (14 models in Table 1, 14 in Table 8), and with small models, or
any model on a GPU, the time goes to what every separate run repeats: starting Python and importing
torch/transformers/datasets, reading and hashing the dataset, and decoding and resizing every image.
One run pays the first two once, and its models share decoded pixels (`pixel_store`): models whose
image processors produce the same pixels (backend, size, resize, crop, mean/std) form one group and
decode each image once; other settings form groups of their own.

Each model is evaluated exactly as `hardpos eval --model M` would (`evaluate_model` / `run_suite`,
same resume keys, same batches), into `OUT/<name>/`, so its metrics.json, per-row scores and
provenance are those of a run of that model alone, and resume works per model. A model that fails
is recorded and the others still run (exit status 1 at the end, as a suite).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import run_memo
from ..errors import UserInputError
from ..names import UNSAFE_CHARACTERS, check_output_name

if TYPE_CHECKING:  # `hardpos eval --help` imports this module: no torch at import time
    from ..scoring import ITMScorer

TABLE1 = "table1"
TABLE8 = "table8"
MODEL_LISTS = (TABLE1, TABLE8)


def model_list(name: str) -> tuple[list[str], list[str]]:
    """A named list's `--model` values, and the rows it cannot include with why (`hardpos zoo`).

    `table8`: every Table 8 row with a route (a backend: an HF copy or the checkpoint's own library). `table1`: the Table 1
    rows whose weights are addressable by name (the HF copy of OpenAI's CLIP); the other rows are
    checkpoint files the user downloads, passed as `--model FILE` (one run per `--preset`).
    """
    from ..conversion.presets import PRESETS, PRETRAINED_PRESETS, ROUTE_NONE

    if name == TABLE8:
        models = [p.model for p in PRETRAINED_PRESETS.values() if p.route != ROUTE_NONE and p.model]
        left = [
            f"{p.name} ({p.route}; `hardpos zoo` says why)"
            for p in PRETRAINED_PRESETS.values()
            if p.route == ROUTE_NONE or not p.model
        ]
        return models, left
    if name == TABLE1:
        hub = re.compile(r"Hub ([\w.-]+/[\w.-]+)")
        models, left = [], []
        for preset in PRESETS.values():
            found = hub.search(preset.weights) if preset.file_format == "HF" else None
            if found:
                models.append(found.group(1))
            else:
                left.append(
                    f"{preset.name} (a {preset.file_format} file: --model FILE --preset {preset.name})"
                )
        return models, left
    raise UserInputError(f"--models {name!r} is not one of {list(MODEL_LISTS)}")


def expand_models(models: Sequence[str], lists: Sequence[str], log=print) -> list[str]:
    """`--model` values, then those of each `--models` list, each once, in that order."""
    expanded = list(models)
    for name in lists:
        listed, left = model_list(name)
        expanded.extend(listed)
        if left:
            log(f"--models {name}: not included: {'; '.join(left)}")
    unique = list(dict.fromkeys(expanded))
    if not unique:
        raise UserInputError("give --model (repeatable) or --models LIST")
    return unique


def folder_names(models: Sequence[str]) -> dict[str, str]:
    """Each model's folder under `--output`: the last part of its path or Hub id, with as many parents
    as it takes to tell two models apart (`a/model` and `b/model` -> `a__model`, `b__model`).

    A local folder is named by its resolved path, so `--model ..` or `--model .` is named for the folder
    it is, never a path out of `--output`. Names still equal (ignoring case: `m` and `./m`) get `-2`, `-3`
    ... in the order given, skipping every name another model has, so `--model m --model ./m --model m-1`
    gives `m`, `m-2`, `m-1`: one folder per model, never one model's results over another's.
    """
    parts = {m: _name_parts(m) for m in models}
    depth = {m: 1 for m in models}
    while True:
        names = {m: "__".join(parts[m][-depth[m] :]) for m in models}
        clashes = {n for n in names.values() if list(names.values()).count(n) > 1}
        grow = [
            m
            for m in models
            if names[m] in clashes
            and depth[m] < len(parts[m])  # parents tell apart
            and any(parts[o] != parts[m] for o in models if names[o] == names[m])
        ]  # one path: numbered
        if not grow:
            break
        for m in grow:
            depth[m] += 1
    cleaned = {m: UNSAFE_CHARACTERS.sub("_", n) for m, n in names.items()}
    cleaned = {m: n if n.strip(".") else "model" for m, n in cleaned.items()}  # `...` is no folder name
    taken = {n.casefold() for n in cleaned.values()}
    chosen: dict[str, str] = {}
    for m in models:
        used = {c.casefold() for c in chosen.values()}
        name, number = cleaned[m], 1
        while name.casefold() in used or (number > 1 and name.casefold() in taken):
            number += 1
            name = f"{cleaned[m]}-{number}"
        chosen[m] = name
    return chosen


def _name_parts(model: str) -> list[str]:
    """The parts a model's folder name is made of: its resolved path's if it is a local folder or file,
    else its Hub id's or spec's (split at `/`, `\\` and `:`)."""
    local = Path(model).expanduser()
    raw = local.resolve().parts[1:] if local.exists() else re.split(r"[/\\:]+", model)
    return [p for p in raw if p not in ("", ".", "..", "~")] or ["model"]


@dataclass
class ModelOutcome:
    """One model of the run: its folder, its report (an `EvaluationReport` or a `SuiteReport`) or error, and
    the wall seconds its evaluation took in this run (resolve, load, scoring, saving: what one more model
    of a sweep costs, beside the work all models share)."""

    model: str
    folder: Path
    report: Any = None
    error: str | None = None
    seconds: float | None = None


@dataclass
class MultiRun:
    """Every model's outcome by model (as given, not by folder name), in the order given."""

    outcomes: dict[str, ModelOutcome] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        return [name for name, o in self.outcomes.items() if o.error is not None]


def evaluate_models(
    models: Sequence[str],
    run_one: Callable[[str, Path, Callable[[str], None]], Any],
    output_dir: str | Path,
    log=print,
) -> MultiRun:
    """Run `run_one(model, folder, log)` for each model into `output_dir/<name>/`; a failure is recorded
    (one line) and the next model runs. `run_one` evaluates like a single-model run, with a scorer
    factory that shares the run's `PixelStore`; what every model computes alike is computed once
    (`run_memo`)."""
    names = folder_names(models)
    for model, name in names.items():  # before any model runs: `metrics.json/` would break the next eval
        check_output_name(name, model, "--model")
    result = MultiRun()
    with run_memo.sharing():  # eval sets, image keys, caption slots, token ids: computed once for all models
        for model in models:
            name = names[model]
            folder = Path(output_dir) / name
            prefixed = lambda message, name=name: log(f"[{name}] {message}")
            prefixed(f"evaluating {model} -> {folder}")
            outcome = ModelOutcome(model, folder)
            started = time.perf_counter()
            try:
                outcome.report = run_one(model, folder, prefixed)
                outcome.seconds = time.perf_counter() - started
                prefixed(f"done in {outcome.seconds:.2f} s")
            except KeyboardInterrupt:
                raise
            except Exception as err:  # noqa: BLE001 - one model's failure must not lose the others' results
                text = str(err).strip()
                outcome.error = f"{type(err).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
                prefixed(f"FAILED ({outcome.error}); continuing with the other models")
            result.outcomes[model] = outcome
    return result


def scorer_factory(pixels, workers=None) -> Callable[..., ITMScorer] | None:
    """What `evaluate_model(make_scorer=...)` gets: a scorer sharing `pixels` (a `PixelStore`, or None),
    sharded over `workers` (a `distributed.Workers`, or None), which load the resolved model they are
    sent as is."""
    if workers is not None:
        from .distributed import DistributedScorer

        def make(source, model, processor, *args, **kwargs) -> ITMScorer:
            return DistributedScorer(
                model, processor, *args, pixels=pixels, workers=workers, source=source, **kwargs
            )

        return make
    if pixels is None:
        return None
    from ..pixel_store import SharedPixelScorer

    def make_shared(source, model, processor, *args, **kwargs) -> ITMScorer:
        return SharedPixelScorer(model, processor, *args, pixels=pixels, **kwargs)

    return make_shared
