"""`evaluate_model`: one model on one dataset of any registered task, resumable per config (`hardpos eval
--dataset`), through the one runner (`evaluation.runner`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from datasets import Dataset, DatasetDict

from ..errors import UserInputError
from ..model_source import ModelSource
from ..output_folder import check_output_writable
from ..run_memo import sharing
from .options import RunOptions, split_keywords
from .report import EvaluationReport
from .runner import ModelRun, run_dataset
from .tasks import TaskData, detect_task, task_of_columns


def evaluate_model(
    model: str | ModelSource,
    dataset: str | Dataset | DatasetDict,
    configs: Sequence[str] | None = None,
    split: str = "test",
    *,
    task: str | None = None,
    output_dir: str | Path | None = None,
    options: RunOptions | None = None,
    **keywords,
) -> EvaluationReport:
    """Evaluate a Hub/local model, or a checkpoint file, on every config of a dataset (a Hub id, a local
    folder, or an in-memory hard-positive `Dataset`).

    `task` is one of `evaluation.tasks.TASKS`; None recognises it from the data (`tasks.detect_task`; an
    in-memory table is a hard-positive one). The result is one `Section` (`report.section`), with the run
    it came from.

    Settings are `RunOptions`' fields (`batch_size`, `num_workers`, `device`, `precision`, `allow_tf32`,
    `image_backend`, `protocol`, `max_rows`, `bootstrap_samples`, `cache_dir`, `resume`, `progress`,
    `preset`, `make_scorer`, `log`), given as keywords or as one `options` object, and the fields of
    `backends.ModelOptions` (the options that change which model `model` names).

    `model` may be a checkpoint file (a CLIP training checkpoint, an OpenAI TorchScript archive, a
    TSVLC-LoRA file): it is converted once into the conversion cache (`conversion.resolve_model`, with
    the `ModelOptions` its backend takes: docs/models.md) and scored like any HF model;
    `run["model_identity"]["converted_from"]` then names the checkpoint's sha256 and the activation.
    Options that cannot apply to a model are refused by its backend (`ModelBackend.check_options`).

    `configs=None` evaluates all configs the dataset declares. With `output_dir`, each config's
    `scores-<config>.parquet` and the running `metrics.json` are written as soon as that config is
    done; rerunning (`resume=True`) reuses a saved config only if the model's and the dataset's
    content, the task and every score-changing setting are unchanged, and keeps the configs of earlier runs
    of the same model and settings, so one folder collects them all. With `cache_dir`, embeddings
    persist on disk by content (see `EmbeddingCache`), shared by every dataset this model scores.
    `protocol="paper"` scores as the paper's code did (`hf_hardpos.protocol`: its preprocessing, and float16
    weights for OpenAI's on CUDA), setting `precision` and `image_backend` itself.
    `image_backend` picks the image processor's backend (`image_processing`: pil by default); its
    description is recorded in `metrics.json` and part of every resume and embedding-cache key.
    `preset` (a `hardpos zoo` name) or a Hub id the paper scored (`hf_hardpos.published`) adds the
    paper's figures and our difference to the report (`report.published`, table and `metrics.json`).
    `make_scorer` (called as `ITMScorer` is, after the resolved model: `make_scorer(source, model,
    processor, ...)`) builds the scorer otherwise: `evaluation.multi_model` passes one that shares decoded pixels
    between models, or shards the work across processes.
    """
    given, conversion = split_keywords(keywords)
    options = (options or given).resolved()
    if output_dir is not None:
        check_output_writable(output_dir)
    source = ModelSource.resolve(model, conversion, progress=options.progress)
    data = TaskData(dataset, list(configs) if configs else None, split)
    with sharing():  # the eval sets read to recognise the task are those scored (`run_memo`): loaded once
        if task is None:
            task = (
                detect_task(dataset, split, configs) if isinstance(dataset, str) else task_of_table(dataset)
            )
        return run_dataset(ModelRun.start(source, options), task, data, output_dir, label=str(dataset))


def task_of_table(dataset: Dataset | DatasetDict) -> str:
    """The task an in-memory dataset's columns call for (its first config's, for a `DatasetDict`), as
    `detect_task` recognises a folder; refused in one line when no task's columns match."""
    table = next(iter(dataset.values())) if isinstance(dataset, DatasetDict) else dataset
    task = task_of_columns(table.column_names)
    if task is None:
        raise UserInputError(f"the dataset's columns {table.column_names} match no task; name one with task=")
    return task
