"""The dataset card (README.md) of a built folder: its YAML (``configs``, ``dataset_info``, license)
written from plain dicts through ``DatasetCardData``, and its body rendered by the Jinja template
``cards/dataset_card.md`` from two things only: what the builder states (:class:`CardFacts`, the texts
kept as data in ``cards/<dataset>.yaml``) and what the build measured (:class:`~.build_report.BuildReport`:
counts, flags, skipped rows, sources with sha256), so a card can never claim more than the build saw.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import datasets
import yaml
from huggingface_hub import DatasetCard, DatasetCardData

from ..citations import cite
from ..provenance import versions
from .build_report import BuildReport
from .shards import ExportedConfig


@dataclass
class CardFacts:
    """Everything a card states besides what the build measured, supplied by the builder."""

    title: str
    pretty_name: str
    summary: str
    builder: str
    usage: str
    column_meanings: Mapping[str, str]
    defects: str | Callable[[BuildReport], str]  # a callable gets the report once the rows are counted
    license_id: str
    license_text: str
    citation: str
    tags: Sequence[str] = ()
    task_categories: Sequence[str] = ("zero-shot-image-classification",)


def card_facts(
    dataset: str | Path,
    *,
    repo: str,
    defects: str | Callable[[BuildReport], str] | None = None,
    **fields: object,
) -> CardFacts:
    """The card text of a benchmark, kept as data in ``cards/<dataset>.yaml`` or, for a benchmark with a
    folder of its own, in the ``card.yaml`` path its builder passes (the card's prose is edited there, not
    in code): ``repo`` (the repository its usage example loads) and ``fields`` fill
    the ``{{ ... }}`` of its summary and usage (Jinja, an unknown name is an error); ``defects`` is the
    builder's measured text unless the file states it."""
    import jinja2

    source = dataset if isinstance(dataset, Path) else files(__package__).joinpath("cards", f"{dataset}.yaml")
    text = yaml.safe_load(source.read_text(encoding="utf-8"))
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return CardFacts(
        **{
            name: value
            for name, value in text.items()
            if name not in ("summary", "usage", "citations", "defects")
        },
        summary=environment.from_string(text["summary"]).render(**fields),
        usage=environment.from_string(text["usage"]).render(repo=repo, **fields),
        defects=defects if defects is not None else text["defects"],
        citation=cite(*text["citations"]),
    )


def flag_table(report: BuildReport, labels: Mapping[str, str], *, with_rows: bool = False) -> list[str]:
    """The card's table of the flags measured per config: one column per flag (``labels``: flag ->
    column header), after the config's row count when ``with_rows``."""
    header = ["config", *(["rows"] if with_rows else []), *labels.values()]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for name, flags in report.flags.items():
        counts = [report.counts.get(name, 0)] if with_rows else []
        cells = [name, *(f"{count:,}" for count in [*counts, *(flags[flag] for flag in labels)])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _dtype(feature) -> str:
    if isinstance(feature, datasets.Value):
        return feature.dtype
    if isinstance(feature, datasets.List) and isinstance(feature.feature, datasets.Value):
        return f"list of {feature.feature.dtype}"
    return type(feature).__name__


def _size_category(num_rows: int) -> str:
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if num_rows < limit:
            return label
    return "1M<n<10M"


def _all_columns(configs: Sequence[ExportedConfig]) -> dict:
    """Every column of every config once, in first-seen order (configs may differ in schema)."""
    found: dict = {}
    for config in configs:
        for name, feature in config.features.items():
            found.setdefault(name, feature)
    return found


def completeness_text(report: BuildReport) -> str:
    """Whether these are the upstream rows, and all of them; if not, which inputs were the user's own
    and how many rows and distinct images are missing."""
    return " ".join(part for part in (_sources_text(report), _dropped_text(report)) if part)


def _sources_text(report: BuildReport) -> str:
    if report.local_variants is None:
        return ""
    if not report.local_variants:
        return (
            "Every annotation file is the pinned upstream file (digest checked), so the counts were required "
            "to equal the paper's."
        )
    return (
        f"**Built from local input files that are not the pinned upstream files** ({', '.join(report.local_variants)}): "
        "these rows are the builder's, not necessarily the paper's, and the counts were not required to match it."
    )


def _dropped_text(report: BuildReport) -> str:
    dropped = sum(report.skipped_rows.values())
    if not dropped:
        rows = "Every row of the input files" if report.local_variants else "Every upstream row"
        return f"{rows} is here: no row was dropped."
    per_config = ", ".join(
        f"{name}: {report.skipped_rows.get(name, 0):,} row(s), {len(ids):,} image(s)"
        for name, ids in report.skipped_missing_images.items()
    )
    return (
        f"**Not the complete benchmark: {dropped:,} upstream row(s) were dropped** because their image was "
        f"missing or unreadable at build time (`--skip-missing`): {report.distinct_missing_images:,} distinct image(s) "
        f"in all ({per_config}). They are listed in `build_report.json`; results on this build are not "
        "comparable with the paper's."
    )


def shown_source(origin: str) -> str:
    """A source as the card names it: a URL or Hub id as is, a local path by its name only (a card is pushed
    to the Hub; the builder's folders mean nothing there and may say more than the user wants)."""
    if "://" in origin or not Path(origin).is_absolute():
        return origin
    return f"`{Path(origin).name}` (a local file or folder)"


def render_card(
    output_dir: Path, configs: Sequence[ExportedConfig], facts: CardFacts, report: BuildReport
) -> Path:
    """Write README.md: YAML (configs, dataset_info, license, ...) and the card body."""
    largest = max(config.num_rows for config in configs)
    metadata = DatasetCardData(
        license=facts.license_id,
        pretty_name=facts.pretty_name,
        language=["en"],
        size_categories=[_size_category(largest)],
        task_categories=list(facts.task_categories) or None,
        tags=list(facts.tags) or None,
        configs=[config.config_entry() for config in configs],
        dataset_info=[config.info_entry() for config in configs],
    )
    card = DatasetCard.from_template(
        metadata,
        template_str=files(__package__).joinpath("cards", "dataset_card.md").read_text(encoding="utf-8"),
        title=facts.title,
        summary=facts.summary,
        builder=f"{facts.builder}, hf_hardpos {versions().get('hf_hardpos', 'unknown version')}",
        built_on=datetime.date.today().isoformat(),
        with_paper=any(config.name in report.expected_counts for config in configs),
        config_rows=[
            {
                "name": config.name,
                "split": config.split,
                "rows": f"{config.num_rows:,}",
                "paper": f"{report.expected_counts[config.name]:,}"
                if config.name in report.expected_counts
                else "-",
                "shards": len(config.files),
            }
            for config in configs
        ],
        completeness=completeness_text(report),
        usage=facts.usage,
        column_rows=[
            (name, _dtype(feature), facts.column_meanings.get(name, ""))
            for name, feature in _all_columns(configs).items()
        ],
        defects=facts.defects(report) if callable(facts.defects) else facts.defects,
        sources=[(name, shown_source(origin)) for name, origin in sorted(report.sources.items())],
        license_text=facts.license_text,
        citation=facts.citation,
    )
    path = output_dir / "README.md"
    card.save(path)
    return path
