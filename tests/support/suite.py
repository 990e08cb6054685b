"""One tiny local folder per task `hardpos eval --suite` recognises from its layout: hard positives
(REPLACE's configs), caption selection (SugarCrepe's), Winoground, two zero-shot classification webdatasets
and one retrieval webdataset."""

from pathlib import Path

import numpy as np

from tests.support.caption_selection import make_selection_set, make_winoground
from tests.support.eval_data import write_attributes_relations_folder, write_hub_folder
from tests.support.webdataset import (
    CLASSNAMES,
    TEMPLATES,
    WORDS,
    image_bytes,
    write_webdataset,
)


def write_suite_folders(root: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    cls = [{"png": image_bytes(rng, "PNG"), "cls": str(i % len(CLASSNAMES)).encode()} for i in range(8)]
    ret = [
        {"jpg": image_bytes(rng, "JPEG"), "txt": "\n".join(rng.choice(WORDS, 3)).encode()} for i in range(6)
    ]
    return {
        "replace": write_attributes_relations_folder(root / "replace"),
        "sugarcrepe": write_hub_folder(
            root / "sugarcrepe",
            {"replace_att": make_selection_set(6, 1, seed=1), "swap_obj": make_selection_set(4, 1, seed=2)},
        ),
        "winoground": write_hub_folder(root / "winoground", {"default": make_winoground(4)}),
        "cifar_a": write_webdataset(
            root / "cifar_a",
            cls,
            nshards=2,
            classnames="\n".join(CLASSNAMES),
            zeroshot_classification_templates="\n".join(TEMPLATES),
        ),
        "cifar_b": write_webdataset(
            root / "cifar_b",
            cls[:5],
            nshards=1,
            classnames="\n".join(CLASSNAMES),
            zeroshot_classification_templates="\n".join(TEMPLATES),
        ),
        "coco": write_webdataset(root / "coco", ret, nshards=2, dataset_type="retrieval"),
    }
