"""ARO's macro-accuracy protocol for VG-Relation and VG-Attribution (Yuksekgonul et al. 2023).

Why a module of facts: ARO's published VG numbers are not the fraction of correct rows but macro
accuracies, and the recipe lives only in the authors' notebook ("Replicate ARO! VG-Relation,
VG-Attribution.ipynb", github.com/mertyg/vision-language-models-are-bows) and `evaluate_scores`:

- VG-Relation: accuracy per `relation_name`, averaged over relations, leaving out the 157 relations
  the notebook lists as `symmetric` (copied below in its order);
- VG-Attribution: accuracy per attribute pair (`attributes`, two adjectives), averaged over the pairs
  with at least 25 rows.

`evaluate_caption_selection(..., macro=ARO_MACRO)` adds that `macro_accuracy` next to the plain
accuracy when a subset has the column; `PROFILE` passes it (and the Order subsets' argmax rule) for
every ARO subset a dataset has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from datasets import Dataset

from .caption_profile import CaptionSelectionProfile
from .selection import MacroProtocol

ARO_VG_RELATION_EXCLUDED = (
    "adjusting",
    "attached to",
    "between",
    "bigger than",
    "biting",
    "boarding",
    "brushing",
    "chewing",
    "cleaning",
    "climbing",
    "close to",
    "coming from",
    "coming out of",
    "contain",
    "crossing",
    "dragging",
    "draped over",
    "drinking",
    "drinking from",
    "driving",
    "driving down",
    "driving on",
    "eating from",
    "eating in",
    "enclosing",
    "exiting",
    "facing",
    "filled with",
    "floating in",
    "floating on",
    "flying",
    "flying above",
    "flying in",
    "flying over",
    "flying through",
    "full of",
    "going down",
    "going into",
    "going through",
    "grazing in",
    "growing in",
    "growing on",
    "guiding",
    "hanging from",
    "hanging in",
    "hanging off",
    "hanging over",
    "higher than",
    "holding onto",
    "hugging",
    "in between",
    "jumping off",
    "jumping on",
    "jumping over",
    "kept in",
    "larger than",
    "leading",
    "leaning over",
    "leaving",
    "licking",
    "longer than",
    "looking in",
    "looking into",
    "looking out",
    "looking over",
    "looking through",
    "lying next to",
    "lying on top of",
    "making",
    "mixed with",
    "mounted on",
    "moving",
    "on the back of",
    "on the edge of",
    "on the front of",
    "on the other side of",
    "opening",
    "painted on",
    "parked at",
    "parked beside",
    "parked by",
    "parked in",
    "parked in front of",
    "parked near",
    "parked next to",
    "perched on",
    "petting",
    "piled on",
    "playing",
    "playing in",
    "playing on",
    "playing with",
    "pouring",
    "reaching for",
    "reading",
    "reflected on",
    "riding on",
    "running in",
    "running on",
    "running through",
    "seen through",
    "sitting behind",
    "sitting beside",
    "sitting by",
    "sitting in front of",
    "sitting near",
    "sitting next to",
    "sitting under",
    "skiing down",
    "skiing on",
    "sleeping in",
    "sleeping on",
    "smiling at",
    "sniffing",
    "splashing",
    "sprinkled on",
    "stacked on",
    "standing against",
    "standing around",
    "standing behind",
    "standing beside",
    "standing in front of",
    "standing near",
    "standing next to",
    "staring at",
    "stuck in",
    "surrounding",
    "swimming in",
    "swinging",
    "talking to",
    "topped with",
    "touching",
    "traveling down",
    "traveling on",
    "tying",
    "typing on",
    "underneath",
    "wading in",
    "waiting for",
    "walking across",
    "walking by",
    "walking down",
    "walking next to",
    "walking through",
    "working in",
    "working on",
    "worn on",
    "wrapped around",
    "wrapped in",
    "by",
    "of",
    "near",
    "next to",
    "with",
    "beside",
    "on the side of",
    "around",
)

# COCO-Order and Flickr30k-Order: ARO's `evaluate_scores` (dataset_zoo/aro_datasets.py, commit 09e1fcf)
# counts `np.argmax(scores) == 0` with the true caption listed first among its perturbations, so a
# perturbation that ties the caption counts as right (`evaluate_caption_selection(..., true_caption_first=...)`).
ARO_TRUE_CAPTION_FIRST = ("coco_order", "flickr30k_order")

ARO_MACRO = {
    "vg_relation": MacroProtocol(column="relation_name", exclude=ARO_VG_RELATION_EXCLUDED),
    "vg_attribution": MacroProtocol(column="attributes", min_group_size=25),
}


def _recognises(subsets: Mapping[str, Dataset]) -> bool:
    return any(name in ARO_MACRO or name in ARO_TRUE_CAPTION_FIRST for name in subsets)


def _selection_options(subsets: Mapping[str, Dataset]) -> dict[str, Any]:
    return {
        "macro": {name: protocol for name, protocol in ARO_MACRO.items() if name in subsets} or None,
        "true_caption_first": [name for name in subsets if name in ARO_TRUE_CAPTION_FIRST],
    }


# CE-CLIP (Zhang et al., CVPR 2024) Tables 1 and 5 print ARO's VG-Relation and VG-Attribution macro accuracies.
PROFILE = CaptionSelectionProfile(
    name="aro",
    citation="Yuksekgonul et al. (ICLR 2023), github.com/mertyg/vision-language-models-are-bows @09e1fcf; "
    "CE-CLIP (CVPR 2024) Tables 1 and 5",
    recognises=_recognises,
    columns=tuple(ARO_MACRO),
    published_column=lambda row, metrics: row if row in ARO_MACRO else None,
    selection_options=_selection_options,
)
