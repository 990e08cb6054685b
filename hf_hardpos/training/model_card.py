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
from enum import Enum
from pathlib import Path
from typing import Any

from accelerate.utils import extract_model_from_parallel
from huggingface_hub import ModelCard, ModelCardData

from ..citations import CE_CLIP, HARD_POSITIVES, cite
from ..evaluation.tasks import get_task
from ..provenance import looks_like_hub_id, versions
from ..tables import render_table
from ..text_escaping import markdown_text
from .card_data import HardPosModelCardData
from .card_evaluation import (
    card_value,
    dataset_description,
    eval_card_sections,
    eval_set_description,
    model_index_results,
)
from .losses import registry
from .run_facts import base_vs_tuned, compute_facts, global_batch

TEMPLATE_NAME = "model_card.md"
MODEL_CARD_NAME = "README.md"  # the card's file in every saved folder
MAX_LOG_ROWS = 25
# Arguments that describe where a run wrote things, not how it trained.
_UNINFORMATIVE_ARGS = {
    "output_dir",
    "logging_dir",
    "run_name",
    "hub_token",
    "push_to_hub_token",
    "hub_model_id",
    "resume_from_checkpoint",
    "overwrite_output_dir",
    "model_card_template",
    # derived by TrainingArguments.__post_init__ from the environment, or forced by ours
    "accelerator_config",
    "report_to",
    "disable_tqdm",
    "remove_unused_columns",
}

# The two papers this package implements (keys of `hf_hardpos.citations`), cited on every card.
PAPER_CITATIONS = (HARD_POSITIVES, CE_CLIP)


def template_path(override: str | None = None) -> Path:
    """The Jinja template: `override` if given, else the packaged one."""
    if override:
        path = Path(override)
        if not path.is_file():
            raise FileNotFoundError(f"model card template {override!r} does not exist")
        return path
    # Package data beside the modules (pyproject: hf_hardpos/templates/*.md), installed or editable.
    return Path(__file__).resolve().parent.parent / "templates" / TEMPLATE_NAME


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
        if key in defaults
        and key not in _UNINFORMATIVE_ARGS
        and _normalise(defaults[key]) != _normalise(value)
    }


# The arguments that shape what is trained, listed on every card whatever their value (sentence-transformers'
# cards list them all too): a reader should not need transformers' defaults to know the learning rate.
SHAPING_ARGS = (
    "learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps", "num_train_epochs", "max_steps",
    "optim", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "max_grad_norm", "lr_scheduler_type",
    "warmup_steps", "seed", "bf16", "fp16", "hard_example_sampling", "train_crop_scale", "use_lora",
)  # fmt: skip


def shaping_hyperparameters(args) -> dict[str, dict[str, Any]]:
    """Every argument that shapes the run (`SHAPING_ARGS`, then every other one that differs from its default,
    loss weights included): {name: {"value": ..., "default": bool}}."""
    changed = non_default_hyperparameters(args)
    current = args.to_dict()
    names = [n for n in SHAPING_ARGS if n in current] + [n for n in changed if n not in SHAPING_ARGS]
    return {name: {"value": card_value(current[name]), "changed": name in changed} for name in names}


def sample_rows(dataset, args, count: int = 3) -> list[dict[str, str]]:
    """The caption columns of the first `count` training rows (what a reader checks the schema against)."""
    if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "select"):
        return []
    wanted = [c for c in (args.caption_column, *args.positive_columns, *args.negative_columns)
              if c in getattr(dataset, "column_names", [])]  # fmt: skip
    rows = dataset.select_columns(wanted).select(range(min(count, len(dataset))))
    return [
        {column: str(row[column]) if row[column] is not None else "" for column in wanted} for row in rows
    ]


def _normalise(value: Any) -> Any:
    if value in (None, False, "", [], (), {}):
        return None  # unset, whichever empty form __post_init__ chose
    if isinstance(value, (tuple, list)):
        return [_normalise(v) for v in value]
    return value.value if isinstance(value, Enum) else value


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
        [
            str(entry.get("step", "")),
            card_value(entry.get("epoch", "")),
            *(card_value(e) for e in (entry.get(k, "") for k in keys)),
        ]
        for entry in rows
    ]
    return render_table(["step", "epoch", *keys], cells, markdown=True)


def _train_identity(card_data: HardPosModelCardData) -> str:
    """ ", config `c`, split `s`, revision `r`" for whichever of the three is known."""
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


def _best_model(trainer) -> dict[str, Any] | None:
    """Which checkpoint `load_best_model_at_end` loaded (the card's weights and evaluation are its), or None."""
    loaded = getattr(trainer, "best_model_loaded", None)
    if not loaded:
        return None
    return {**loaded, "value": card_value(loaded["value"])}


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
    return (
        "`"
        + " + ".join(
            t["symbol"] if t["key"] == "clip" else f"{card_value(t['weight'])} * {t['symbol']}" for t in terms
        )
        + "`"
    )


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
    data = _metadata(card_data, identity, is_adapter, isinstance(wrapped, PeftModel), eval_results)

    objective = trainer.objective
    objective_config = objective.get_config_dict() if hasattr(objective, "get_config_dict") else {}
    terms = registry.describe(objective_config)  # L_clip and every active term, as trained
    train_datasets = _train_dataset_facts(trainer, card_data)
    comparison, base_step = base_vs_tuned(trainer.state.log_history, sections)
    return data, dict(
        **identity,
        card_model_name=markdown_text(identity["model_name"]),  # the name as the card's text shows it
        base_vs_tuned=comparison,
        base_step=base_step,
        compute=compute_facts(args, trainer.state.log_history),
        license_given=bool(card_data.license),
        license_id=data.license,
        # also for a merged export: how its weights were trained
        lora=_lora_facts(wrapped) if isinstance(wrapped, PeftModel) else None,
        is_adapter=is_adapter,
        has_eval=bool(sections),
        best_model=_best_model(trainer),
        global_batch=global_batch(args, len(trainer.train_dataset) if train_datasets else None),
        **eval_card_sections(sections, eval_sets, card_data),
        recipe=card_data.recipe,
        train_datasets=train_datasets,
        hard_example_draw=getattr(trainer.data_collator, "describe_sampling", lambda: None)(),
        eval_dataset_facts=[
            {
                "name": markdown_text(n),
                "description": f"{eval_set_description(n, eval_set, card_data)} ({get_task(eval_set.task).card_task[1].lower()})",
            }
            for n, eval_set in eval_sets.items()
        ],
        objective_class=type(objective).__name__,
        objective_config=json.dumps(objective_config, indent=2, sort_keys=True, default=str),
        loss_formula=_loss_formula(terms),
        training_signal=_training_signal(terms),
        hyperparameters=shaping_hyperparameters(args),
        sample_rows=sample_rows(trainer.train_dataset, args),
        local_inputs_hint=_local_inputs_hint(card_data, identity),
        training_log=training_log_table(trainer.state.log_history),
        versions=versions("peft", "accelerate", "huggingface_hub"),
        citations=_citations(objective),
    )


def _local_inputs_hint(card_data: HardPosModelCardData, identity: dict[str, Any]) -> str | None:
    """One line when the base model or the training set is not a Hub id: the YAML then cannot name them."""
    local = [what for what, value, hub in (
        ("base model", identity["base_model"], identity["base_model_is_hub_id"]),
        ("training set", card_data.train_dataset_id, looks_like_hub_id(card_data.train_dataset_id)),
    ) if value and not hub]  # fmt: skip
    if not local:
        return None
    return (
        f"The {' and the '.join(local)} of this run are local folders, so the metadata above cannot name them; "
        "publish them to the Hub and pass their ids to name them here."
    )


def _metadata(
    card_data: HardPosModelCardData,
    identity: dict[str, Any],
    is_adapter: bool,
    has_lora: bool,
    eval_results: list,
) -> ModelCardData:
    """The card's YAML: names, licence (given, else the base model's), library, tags, datasets, model-index."""
    candidates = [card_data.train_dataset_id, *card_data.eval_dataset_ids.values()]
    dataset_ids = [d for d in candidates if looks_like_hub_id(d)]
    tags = list(card_data.tags) + (["lora", "peft"] if is_adapter else ["lora"] if has_lora else [])
    return ModelCardData(
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


def _train_dataset_facts(trainer, card_data: HardPosModelCardData) -> list[dict[str, str]]:
    """The training set as the card describes it (rows, and how many rows hold each caption column); none
    when the trainer's set has no length (a streamed one)."""
    if trainer.train_dataset is None or not hasattr(trainer.train_dataset, "__len__"):
        return []
    args = trainer.args
    count_columns = [args.caption_column, *args.positive_columns, *args.negative_columns]
    description = dataset_description(
        trainer.train_dataset,
        card_data.train_dataset_id,
        card_data.train_dataset_description,
        count_columns,
        _train_identity(card_data),
    )
    return [{"description": description}]


def _lora_facts(wrapped) -> dict[str, str]:
    """A peft model's LoRA settings and its trainable parameters, as the card states them."""
    peft_config = wrapped.peft_config[wrapped.active_adapter]
    modules = peft_config.target_modules
    modules = sorted(modules) if isinstance(modules, (set, list, tuple)) else modules
    trainable, total = wrapped.get_nb_trainable_parameters()
    return {
        "summary": f"rank {peft_config.r}, alpha {peft_config.lora_alpha}, dropout "
        f"{peft_config.lora_dropout}, target modules {modules}",
        "trainable_parameters": f"{trainable:,}",
        "total_parameters": f"{total:,}",
    }
