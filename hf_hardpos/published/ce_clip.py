"""CE-CLIP (Zhang, Awal, Agrawal, CVPR 2024): the systems of its printed figures (Tables 1, 2, 3 and 5, in
``figures.yaml`` and, for a benchmark with a folder of its own, in that folder's ``figures.yaml``). Which
of our caption-selection rows stands beside which figure is the caption-selection profiles' to say
(`evaluation.tasks.caption_selection.published_key`).

Benchmarks, in the vocabulary of our results:

- ARO (Table 1, Table 5): `aro/vg_relation`, `aro/vg_attribution`, metric `macro_accuracy` (ARO's
  macro accuracies, `evaluation.tasks.aro`);
- VALSE (Table 1): `valse/<column>` for its nine columns (`evaluation.tasks.valse.COLUMNS`) and
  `valse/avg` (mean over the 11 pieces), metric `accuracy`;
- Table 2 is one benchmark's own table: its folder's ``figures.yaml`` and ``task.py`` say its columns
  and which of our rows stand beside them;
- SugarCrepe (Table 3): `sugarcrepe/<subset>`, `sugarcrepe/<replace|swap|add>` (group means) and
  `sugarcrepe/mean` (Table 5: the mean of the 7 subsets), metric `accuracy`.
"""

from __future__ import annotations

CE_CLIP = "CE-CLIP"
NEGCLIP = "NegCLIP"
