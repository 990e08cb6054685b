"""Model cards written from what a training run actually did.

Why generated: a card that states the base model, the data and its sizes, the loss and its weights,
the hyperparameters that were changed and the metrics that were measured makes a checkpoint
reproducible (unknown recipes and unreproducible numbers are the top complaint in the issue trackers
of ARO, SugarCrepe, TSVLC and CE-CLIP). Everything here is read off the trainer: its arguments, its objective's config,
its datasets, `state.log_history` (the training log) and `eval_sections` (the latest evaluation of
each eval set: rows, tie rule, aggregation), both of which the checkpoints carry, so they survive a
resume. Hard-positive sets and every other benchmark (caption selection, Winoground, zero-shot
retention) go into `model-index` side by side, each under its own task type.
The text lives in one Jinja template, `hf_hardpos/templates/model_card.md`, shipped as package data;
`--model_card_template` swaps in another.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from enum import Enum
from numbers import Real
from pathlib import Path
from typing import Any

from accelerate.utils import extract_model_from_parallel
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..citations import CE_CLIP, HARD_POSITIVES, cite
from ..metrics import METRIC_NAMES
from ..provenance import looks_like_hub_id, versions
from ..evaluation.tasks import CAPTION_SELECTION, HARD_POSITIVE, WINOGROUND, ZEROSHOT_CLASSIFICATION, ZEROSHOT_RETRIEVAL
from ..tables import metrics_table, render_table
from ..evaluation.tasks.zeroshot_retrieval import RECALL_KS
from ..evaluation.section import Section
from .losses import registry
from .recipe import RecipeReport, batch_layout
from .run_facts import base_vs_tuned, compute_facts

TEMPLATE_NAME = "model_card.md"
# `model-index` task (type, name) of each benchmark task. The Hub lists zero-shot image classification;
# the compositional tasks and retrieval have no Hub task id, so they get descriptive ones.
CARD_TASKS = {
    HARD_POSITIVE: ("image-text-matching", "Image-text matching with hard positives"),
    CAPTION_SELECTION: ("image-text-matching", "Image-caption selection among hard negatives"),
    WINOGROUND: ("image-text-matching", "Winoground"),
    ZEROSHOT_CLASSIFICATION: ("zero-shot-image-classification", "Zero-shot image classification"),
    ZEROSHOT_RETRIEVAL: ("image-text-retrieval", "Zero-shot image-text retrieval"),
}
# The rates of each task that `model-index` carries (counts and mean cosine scores stay in the body).
CARD_METRICS = {
    HARD_POSITIVE: METRIC_NAMES,
    CAPTION_SELECTION: ("accuracy", "macro_accuracy"),
    WINOGROUND: ("text_score", "image_score", "group_score"),
    ZEROSHOT_CLASSIFICATION: ("acc1", "acc5", "mean_per_class_recall"),
    ZEROSHOT_RETRIEVAL: tuple(f"{d}_retrieval_recall@{k}" for d in ("image", "text") for k in RECALL_KS),
}
MAX_LOG_ROWS = 25
# Arguments that describe where a run wrote things, not how it trained.
_UNINFORMATIVE_ARGS = {
    "output_dir", "logging_dir", "run_name", "hub_token", "push_to_hub_token", "hub_model_id",
    "resume_from_checkpoint", "overwrite_output_dir", "model_card_template",
    # derived by TrainingArguments.__post_init__ from the environment, or forced by ours
    "accelerator_config", "report_to", "disable_tqdm", "remove_unused_columns",
}

# The two papers this package implements (keys of `hf_hardpos.citations`), cited on every card.
PAPER_CITATIONS = (HARD_POSITIVES, CE_CLIP)


@dataclass
class HardPosModelCardData:
    """What the trainer cannot know by itself; every field is optional.

    Args:
        model_name: the card title; defaults to the output folder's name.
        base_model: Hub id of the model fine-tuned from; defaults to the model config's `_name_or_path`
            (kept out of the YAML when it is a local path, which the Hub would reject).
        train_dataset_id: Hub id (or local path) of the training set, e.g. "hardpos/coco".
        train_dataset_config, train_dataset_split, train_dataset_revision: which config, split and
            revision (the Hub commit the rows came from) of `train_dataset_id` was trained on; a Hub id
            alone names a moving target.
        eval_dataset_ids: Hub id per eval-set name, used as `dataset.type` in `model-index`.
        train_dataset_description, eval_dataset_descriptions: how to name data that has no Hub id
            (e.g. the synthetic world and its seed) in the card body.
        language, license, tags: card metadata.
        recipe: the recipe file the run followed and every deviation from it (`recipe.RecipeReport`).
    """

    model_name: str | None = None
    base_model: str | None = None
    train_dataset_id: str | None = None
    train_dataset_config: str | None = None
    train_dataset_split: str | None = None
    train_dataset_revision: str | None = None
    eval_dataset_ids: dict[str, str] = field(default_factory=dict)
    train_dataset_description: str | None = None
    eval_dataset_descriptions: dict[str, str] = field(default_factory=dict)
    language: str | list[str] | None = "en"
    license: str | None = None
    tags: list[str] = field(
        default_factory=lambda: ["clip", "vision-language", "compositionality", "hard-positives", "hf_hardpos"]
    )
    recipe: RecipeReport | None = None


def template_path(override: str | None = None) -> Path:
    """The Jinja template: `override` if given, else the packaged one."""
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"model card template {override!r} does not exist")
        return path
    # Package data beside the modules (pyproject: hf_hardpos/templates/*.md), installed or editable.
    return Path(__file__).resolve().parent.parent / "templates" / TEMPLATE_NAME


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    return str(value)


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    return value.value if isinstance(value, Enum) else value


def non_default_hyperparameters(args) -> dict[str, Any]:
    """The training arguments whose value differs from their dataclass default.

    Read from the field declarations rather than from a second `TrainingArguments` instance: building
    one runs its `__post_init__`, which resets accelerate's global state in the middle of training.
    Values that `__post_init__` derives (e.g. `logging_dir`) count as set only when they differ.
    """
    defaults = {f.name: _field_default(f) for f in dataclasses.fields(args) if f.init}
    current = args.to_dict()
    return {
        key: value
        for key, value in sorted(current.items())
        if key in defaults and key not in _UNINFORMATIVE_ARGS and _normalise(defaults[key]) != _normalise(value)
    }


def _normalise(value: Any) -> Any:
    if value in (None, False, "", [], (), {}):
        return None  # unset, whichever empty form __post_init__ chose
    if isinstance(value, (tuple, list)):
        return [_normalise(v) for v in value]
    return value.value if isinstance(value, Enum) else value


def _row_label(set_name: str, row: str, unnamed: str | None) -> str:
    """A row as the card names it: the set alone for the row its logged names leave unnamed."""
    return set_name if row == unnamed else f"{set_name} / {row}"


def model_index_results(sections: dict[str, dict], eval_sets: dict, dataset_ids: dict[str, str]) -> list[EvalResult]:
    """`model-index` entries: every rate of `CARD_METRICS` of every row of every set, with its task type.

    `dataset.type` is the set's Hub id when known, `dataset.split` the split read from a source. The Hub
    groups metrics by task, dataset type, config and split, so every row that its logged names name
    (configs, aggregates, Winoground tags) is given as `dataset.config` (and named `<set> / <row>`), and
    the unnamed row of a set of one config of a source has that config: two sets of one Hub id never merge.
    """
    results = []
    for set_name, saved in sections.items():
        section = Section.from_dict(saved)
        task_type, task_name = CARD_TASKS[section.task]
        eval_set = eval_sets[set_name]
        split = None if eval_set.in_memory else eval_set.split
        unnamed = section.unnamed_row()
        given_config = eval_set.configs[0] if eval_set.configs else None
        for row, metrics in section.rows().items():
            for metric in CARD_METRICS[section.task]:
                if _is_number(metrics.get(metric)):
                    results.append(
                        EvalResult(
                            task_type=task_type,
                            task_name=task_name,
                            dataset_type=dataset_ids.get(set_name, set_name),
                            dataset_name=_row_label(set_name, row, unnamed),
                            dataset_config=given_config if row == unnamed else row,
                            dataset_split=split,
                            metric_type=metric,
                            metric_name=metric.replace("_", " "),
                            metric_value=float(metrics[metric]),  # numpy scalars break the YAML (docs/reference.md, Installation notes)
                        )
                    )
    return results


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _cell(metric: str, value: Any, rates: tuple[str, ...]) -> str:
    if isinstance(value, float) and metric in rates:
        return f"{100 * value:.1f}"
    return _fmt(value)


def section_table(section: Section) -> str:
    """One benchmark set as a markdown table: a row per config/aggregate, its rates in percent."""
    rows = section.rows()
    rates = CARD_METRICS[section.task]
    names = list(dict.fromkeys(k for m in rows.values() for k, v in m.items() if _is_number(v) or isinstance(v, str)))
    header = ["row", *(f"{n} %" if n in rates else n for n in names)]
    cells = [[row, *(_cell(n, m[n], rates) if n in m else "" for n in names)] for row, m in rows.items()]
    return render_table(header, cells, markdown=True)


def eval_card_sections(sections: dict[str, dict], eval_sets: dict, card_data: HardPosModelCardData) -> dict[str, Any]:
    """What the template's Evaluation part shows: one Table-1-style table of the hard-positive sets, and
    every other set's own table, each with the tie rule and aggregation its numbers follow.

    `sections` are `trainer.eval_sections` of the sets in `eval_sets` (the trainer's resolved sets)."""
    typed = {n: Section.from_dict(s) for n, s in sections.items()}
    hard_positive = {n: s for n, s in typed.items() if s.task == HARD_POSITIVE}
    table_rows = {}
    for set_name, section in hard_positive.items():
        unnamed = section.unnamed_row()
        table_rows.update({_row_label(set_name, r, unnamed): m for r, m in section.rows().items()})
    others = []
    for set_name, section in typed.items():
        if section.task == HARD_POSITIVE:
            continue
        others.append({
            "name": set_name,
            "task": CARD_TASKS[section.task][1],
            "source": _eval_set_description(set_name, eval_sets[set_name], card_data),
            "step": section.step,
            "table": section_table(section),
            "tie_rule": section.tie_rule,
            "aggregation": section.aggregation,
        })  # fmt: skip
    return {
        "hard_positive_table": metrics_table(table_rows, label="eval set", markdown=True) if table_rows else "",
        "hard_positive_steps": sorted({s.step for s in hard_positive.values()}),
        "hard_positive_tie_rule": next((s.tie_rule for s in hard_positive.values()), ""),
        "hard_positive_aggregation": sorted({s.aggregation for s in hard_positive.values()}),
        "benchmark_sections": others,
        "measures_retention": any(s.task in (ZEROSHOT_CLASSIFICATION, ZEROSHOT_RETRIEVAL) for s in typed.values()),
    }


def training_log_table(log_history: list[dict]) -> str:
    """The training-loss log as a markdown table (at most `MAX_LOG_ROWS` rows, always keeping the last)."""
    rows = [e for e in log_history if "loss" in e and "train_runtime" not in e]
    if not rows:
        return ""
    if len(rows) > MAX_LOG_ROWS:
        stride = math.ceil(len(rows) / MAX_LOG_ROWS)
        rows = rows[::stride] + ([rows[-1]] if (len(rows) - 1) % stride else [])
    keys: list[str] = []
    for entry in rows:
        for key, value in entry.items():
            if key not in ("step", "epoch") and key not in keys and isinstance(value, (int, float)):
                keys.append(key)
    cells = [
        [str(entry.get("step", "")), _fmt(entry.get("epoch", "")), *(_fmt(e) for e in (entry.get(k, "") for k in keys))]
        for entry in rows
    ]
    return render_table(["step", "epoch", *keys], cells, markdown=True)


def _dataset_description(
    dataset, dataset_id: str | None, description: str | None, columns_to_count: list[str], identity: str = ""
) -> str:
    if dataset_id:  # a Hub id or local path, with what else is known (e.g. a local folder's content hash)
        name = f"`{dataset_id}`{identity}" + (f" ({description})" if description else "")
    else:
        name = description or "an in-memory dataset"
    parts = [name, f"{len(dataset):,} rows"]
    table = getattr(dataset, "data", None)
    # Null counts straight from Arrow: O(1), valid when the dataset has no index mapping.
    if table is not None and getattr(table, "num_rows", None) == len(dataset):
        for column in columns_to_count:
            if column in dataset.column_names:
                present = len(dataset) - table.column(column).null_count
                parts.append(f"`{column}` present in {present:,}")
    return "; ".join(parts)


def _eval_set_description(name: str, eval_set, card_data: HardPosModelCardData) -> str:
    """Where a set's rows come from (rows counted for an in-memory table), and any row cap."""
    if eval_set.in_memory:
        text = _dataset_description(
            eval_set.source, card_data.eval_dataset_ids.get(name), card_data.eval_dataset_descriptions.get(name), []
        )
    else:
        text = card_data.eval_dataset_descriptions.get(name) or eval_set.describe()
    if eval_set.max_rows is not None:
        text += f"; only its first {eval_set.max_rows:,} rows (per config) were evaluated"
    return text


def _train_identity(card_data: HardPosModelCardData) -> str:
    """", config `c`, split `s`, revision `r`" for whichever of the three is known."""
    parts = [
        f"{label} `{value}`"
        for label, value in (
            ("config", card_data.train_dataset_config),
            ("split", card_data.train_dataset_split),
            ("revision", card_data.train_dataset_revision),
        )
        if value
    ]
    return "".join(f", {p}" for p in parts)


def global_batch(args, rows: int | None = None) -> dict[str, int]:
    """The batch one optimiser step sees: per-device batch x processes x gradient-accumulation steps,
    and (given the training set's `rows`) how many rows each epoch trains twice (`padded_rows`).

    Why on every card: the per-device batch alone makes a 2-process run's card read like a 1-process
    run's, while the contrastive losses and the learning rate depend on the global batch.
    """
    per_device, processes, accumulation = batch_layout(args)
    gathered = bool(getattr(args, "gather_across_processes", False)) and processes > 1
    return {
        "size": per_device * processes * accumulation,
        "per_device": per_device,
        "processes": processes,
        "accumulation": accumulation,
        # captions each image is contrasted with: one micro-batch, of every process when gathered
        "contrasted": per_device * (processes if gathered else 1),
        "padded_rows": padded_rows_per_epoch(rows, per_device, processes, args.dataloader_drop_last),
    }


def padded_rows_per_epoch(rows: int | None, per_device: int, processes: int, drop_last: bool) -> int:
    """Rows that each epoch trains a second time under data parallelism without `dataloader_drop_last`.

    accelerate gives every process the same number of full batches (`BatchSamplerShard`, even_batches):
    when the epoch's rows do not fill the last round of `per_device x processes`, it completes that round
    with rows from the epoch's start, which are then trained on twice. One process only gets a smaller
    last batch; with `drop_last` the incomplete round is dropped instead.
    """
    if rows is None or processes <= 1 or drop_last:
        return 0
    per_round = per_device * processes
    return -rows % per_round


def _best_model(trainer) -> dict[str, Any] | None:
    """Which checkpoint `load_best_model_at_end` loaded (the card's weights and evaluation are its), or None."""
    loaded = getattr(trainer, "best_model_loaded", None)
    if not loaded:
        return None
    return {**loaded, "value": _fmt(loaded["value"])}


def _citations(objective) -> list[str]:
    """Both papers, plus every other paper the objective cites, each entry once."""
    entries = cite(*PAPER_CITATIONS).split("\n\n")
    for entry in (getattr(objective, "citation", None) or "").split("\n\n"):
        if entry and entry not in entries:
            entries.append(entry)
    return entries


def _training_signal(terms: list[dict]) -> str:
    """What the objective trained on, in words, from what its active terms read (`losses.registry`)."""
    reads = {name for term in terms for name in term["reads"]}
    negatives, positives = registry.HARD_NEGATIVES in reads, registry.HARD_POSITIVES in reads
    if negatives and positives:
        return "hard positives and hard negatives"
    if negatives:
        return "hard negatives only (hard-positive weight 0)"
    if positives:
        return "hard positives only (hard-negative weights 0)"
    return "the plain contrastive loss only (all hard-example weights 0)"


def _loss_formula(terms: list[dict]) -> str:
    """`L_clip + w * L_x + ...` over the active terms, each weighted as it was trained."""
    return "`" + " + ".join(t["symbol"] if t["key"] == "clip" else f"{_fmt(t['weight'])} * {t['symbol']}"
                            for t in terms) + "`"


def _identity(args, card_data: HardPosModelCardData, model, model_name: str | None) -> dict[str, Any]:
    """The card's names: the model's (a checkpoint folder is a snapshot of the run: it carries the run's
    name, not "checkpoint-N"), its Hub repository's, and its base model's (a Hub id or a local path)."""
    name = model_name or card_data.model_name or Path(args.output_dir).name
    base_model = card_data.base_model or getattr(model.config, "_name_or_path", None) or None
    return {
        "model_name": name,
        "repo_id": args.hub_model_id or name,
        "base_model": base_model,
        "base_model_is_hub_id": looks_like_hub_id(base_model),
    }


def base_license(base_model: str | None) -> str | None:
    """The licence a local base model's own card declares (a fine-tune inherits its terms); None if unknown.
    A Hub base model's card is not fetched: the card is written offline too."""
    if not base_model or not (Path(base_model) / "README.md").is_file():
        return None
    try:
        return ModelCard.load(Path(base_model) / "README.md").data.license
    except (OSError, ValueError):
        return None


def generate_model_card(
    trainer,
    card_data: HardPosModelCardData | None = None,
    *,
    model_name: str | None = None,
    is_adapter: bool | None = None,
) -> ModelCard:
    """Render the card of `trainer`'s current model (a `HardPosTrainer`, read duck-typed)."""
    data, variables = card_contents(trainer, card_data, model_name=model_name, is_adapter=is_adapter)
    template = template_path(getattr(trainer.args, "model_card_template", None))
    return ModelCard.from_template(data, template_path=str(template), **variables)


def card_contents(
    trainer,
    card_data: HardPosModelCardData | None = None,
    *,
    model_name: str | None = None,
    is_adapter: bool | None = None,
) -> tuple[ModelCardData, dict[str, Any]]:
    """What the card of `trainer`'s current model says, as data: its YAML metadata, and the template's
    variables (hyperparameters, loss configuration and formula, dataset facts, eval tables, training log,
    versions, citations). `generate_model_card` renders them."""
    from peft import PeftModel

    from .logit_scale import unwrap_model

    card_data = card_data or HardPosModelCardData()
    args = trainer.args
    wrapped = extract_model_from_parallel(trainer.model, keep_torch_compile=False)
    if is_adapter is None:
        is_adapter = isinstance(wrapped, PeftModel)
    identity = _identity(args, card_data, unwrap_model(wrapped), model_name)

    eval_sets = getattr(trainer, "eval_datasets", {}) or {}
    sections = {n: s for n, s in (getattr(trainer, "eval_sections", {}) or {}).items() if n in eval_sets}
    eval_results = model_index_results(sections, eval_sets, card_data.eval_dataset_ids)

    candidates = [card_data.train_dataset_id, *card_data.eval_dataset_ids.values()]
    dataset_ids = [d for d in candidates if looks_like_hub_id(d)]
    tags = list(card_data.tags) + (["lora", "peft"] if is_adapter else ["lora"] if isinstance(wrapped, PeftModel) else [])
    data = ModelCardData(
        model_name=identity["model_name"],
        language=card_data.language,
        license=card_data.license or base_license(identity["base_model"]) or "unknown",
        library_name="peft" if is_adapter else "transformers",
        pipeline_tag="zero-shot-image-classification",
        tags=list(dict.fromkeys(tags)),
        base_model=identity["base_model"] if identity["base_model_is_hub_id"] else None,
        datasets=list(dict.fromkeys(dataset_ids)) or None,
        eval_results=eval_results or None,
    )

    objective = trainer.objective
    objective_config = objective.get_config_dict() if hasattr(objective, "get_config_dict") else {}
    terms = registry.describe(objective_config)  # L_clip and every active term, as trained
    count_columns = [args.caption_column, *args.positive_columns, *args.negative_columns]
    train_datasets = []
    if trainer.train_dataset is not None and hasattr(trainer.train_dataset, "__len__"):
        train_datasets.append(
            {
                "description": _dataset_description(
                    trainer.train_dataset,
                    card_data.train_dataset_id,
                    card_data.train_dataset_description,
                    count_columns,
                    _train_identity(card_data),
                )
            }
        )
    eval_dataset_facts = [
        {
            "name": n,
            "description": f"{_eval_set_description(n, eval_set, card_data)} ({CARD_TASKS[eval_set.task][1].lower()})",
        }
        for n, eval_set in eval_sets.items()
    ]
    lora = None
    if isinstance(wrapped, PeftModel):  # also for a merged export: how its weights were trained
        peft_config = wrapped.peft_config[wrapped.active_adapter]
        modules = peft_config.target_modules
        modules = sorted(modules) if isinstance(modules, (set, list, tuple)) else modules
        trainable, total = wrapped.get_nb_trainable_parameters()
        lora = {
            "summary": f"rank {peft_config.r}, alpha {peft_config.lora_alpha}, dropout "
            f"{peft_config.lora_dropout}, target modules {modules}",
            "trainable_parameters": f"{trainable:,}",
            "total_parameters": f"{total:,}",
        }

    comparison, base_step = base_vs_tuned(trainer.state.log_history, sections)
    return data, dict(
        **identity,
        base_vs_tuned=comparison,
        base_step=base_step,
        compute=compute_facts(args, trainer.state.log_history),
        license_given=bool(card_data.license),
        license_id=data.license,
        lora=lora,
        is_adapter=is_adapter,
        has_eval=bool(sections),
        best_model=_best_model(trainer),
        global_batch=global_batch(args, len(trainer.train_dataset) if train_datasets else None),
        **eval_card_sections(sections, eval_sets, card_data),
        recipe=card_data.recipe,
        train_datasets=train_datasets,
        hard_example_draw=getattr(trainer.data_collator, "describe_sampling", lambda: None)(),
        eval_dataset_facts=eval_dataset_facts,
        objective_class=type(objective).__name__,
        objective_config=json.dumps(objective_config, indent=2, sort_keys=True, default=str),
        loss_formula=_loss_formula(terms),
        training_signal=_training_signal(terms),
        hyperparameters={k: _fmt(v) for k, v in non_default_hyperparameters(args).items()},
        training_log=training_log_table(trainer.state.log_history),
        versions=versions("peft", "accelerate", "huggingface_hub"),
        citations=_citations(objective),
    )
