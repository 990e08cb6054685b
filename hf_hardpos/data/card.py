"""Dataset cards rendered from what a build measured (counts, flags, sources), not hand-written prose.

One Jinja template serves the three datasets; each builder supplies its facts (column meanings, the
measured defect counts, where every input came from) so a card can never claim more than the build saw.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from .hub_export import ExportedConfig, card_data, write_card
from .validation import BuildReport

HARD_POSITIVE_CITATION = """@inproceedings{kamath2024hardpositive,
  title     = {The Hard Positive Truth about Vision-Language Compositionality},
  author    = {Kamath, Amita and Hsieh, Cheng-Yu and Chang, Kai-Wei and Krishna, Ranjay},
  booktitle = {European Conference on Computer Vision (ECCV)},
  year      = {2024}
}"""

TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

{{ summary }}

Built with `hf_hardpos` ({{ builder }}) on {{ built_on }}. No loading script: the data are parquet
shards and the configs are declared in this card's YAML header, so the same call works on a local copy
of this folder and on the Hub.

## Configs and row counts

| config | split | rows | paper | shards |
|---|---|---:|---:|---:|
{% for row in config_rows -%}
| `{{ row.name }}` | `{{ row.split }}` | {{ row.rows }} | {{ row.paper }} | {{ row.shards }} |
{% endfor %}

## Usage

```python
{{ usage }}
```

## Columns

| column | type | meaning |
|---|---|---|
{% for name, dtype, meaning in column_rows -%}
| `{{ name }}` | {{ dtype }} | {{ meaning }} |
{% endfor %}

## Known defects of the upstream data

{{ defects }}

## Provenance

{% for name, origin in sources -%}
- {{ name }}: {{ origin }}
{% endfor %}
{% if skipped -%}
Rows skipped at build time because their image was missing: {{ skipped }} (see `build_report.json`).
{% else -%}
No row was skipped: every upstream row is here.
{% endif %}

## License

{{ license_text }}

## Citation

```bibtex
{{ citation }}
```
"""


@dataclass
class CardFacts:
    """Everything a card states, gathered by the builder from the build itself."""

    title: str
    pretty_name: str
    summary: str
    builder: str
    usage: str
    column_meanings: Mapping[str, str]
    defects: str
    license_id: str
    license_text: str
    citation: str
    expected_counts: Mapping[str, int] = field(default_factory=dict)
    tags: Sequence[str] = ()
    task_categories: Sequence[str] = ()


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hf_hardpos")
    except PackageNotFoundError:
        return "unknown version"


def _dtype(feature) -> str:
    if isinstance(feature, datasets.Value):
        return feature.dtype
    return type(feature).__name__


def _size_category(num_rows: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if num_rows < limit:
            return label
    return "1M<n<10M"


def render_card(
    output_dir: str | Path, configs: Sequence[ExportedConfig], facts: CardFacts, report: BuildReport
) -> Path:
    """Write README.md: YAML (configs, dataset_info, license, ...) and the card body."""
    largest = max(config.num_rows for config in configs)
    metadata = card_data(
        configs,
        license=facts.license_id,
        pretty_name=facts.pretty_name,
        language=["en"],
        size_categories=[_size_category(largest)],
        task_categories=list(facts.task_categories) or None,
        tags=list(facts.tags) or None,
    )
    features = configs[0].features
    skipped = sum(len(ids) for ids in report.skipped_missing_images.values())
    return write_card(
        output_dir,
        metadata,
        TEMPLATE,
        title=facts.title,
        summary=facts.summary,
        builder=f"{facts.builder}, hf_hardpos {_package_version()}",
        built_on=datetime.date.today().isoformat(),
        config_rows=[
            {
                "name": config.name,
                "split": config.split,
                "rows": f"{config.num_rows:,}",
                "paper": f"{facts.expected_counts[config.name]:,}" if config.name in facts.expected_counts else "-",
                "shards": len(config.files),
            }
            for config in configs
        ],
        usage=facts.usage,
        column_rows=[
            (name, _dtype(feature), facts.column_meanings.get(name, "")) for name, feature in features.items()
        ],
        defects=facts.defects,
        sources=sorted(report.sources.items()),
        skipped=f"{skipped:,} image(s), {sum(report.skipped_rows.values()):,} row(s)" if skipped else "",
        license_text=facts.license_text,
        citation=facts.citation,
    )
