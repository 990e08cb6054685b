"""Builders of the Hub datasets: REPLACE, SWAP, the COCO HP+HN fine-tuning set, SugarCrepe,
SugarCrepe++ and ARO.

Each builder reads the upstream sources (downloaded and cached, or a local copy) and writes the exact
Hub repository folder (parquet shards + README with YAML ``configs`` and a dataset card generated from
the build) through the one export sequence of :mod:`.hub_folder`; ``hardpos build <dataset>`` (and
``dataset_scripts/``) run them and can push the folder. ``load_dataset(folder, config)`` and
``load_dataset("org/name", config)`` then read the same data.
"""

from .aro import export_aro
from .coco_finetune import attach_coco_images, export_finetune
from .replace import export_replace
from .sugarcrepe import export_sugarcrepe, export_sugarcrepe_pp
from .swap import export_swap

__all__ = [
    "attach_coco_images",
    "export_aro",
    "export_finetune",
    "export_replace",
    "export_sugarcrepe",
    "export_sugarcrepe_pp",
    "export_swap",
]
