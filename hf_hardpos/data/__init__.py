"""Builders of the Hub datasets: REPLACE, SWAP and the COCO HP+HN fine-tuning set.

Each builder reads the upstream sources (downloaded and cached, or a local copy) and writes the exact
Hub repository folder (parquet shards + README with YAML ``configs`` and a dataset card generated from
the build), which ``dataset_scripts/`` can push. ``load_dataset(folder, config)`` and
``load_dataset("org/name", config)`` then read the same data.
"""

from .finetune import attach_coco_images, export_finetune
from .replace import export_replace
from .swap import export_swap

__all__ = ["attach_coco_images", "export_finetune", "export_replace", "export_swap"]
