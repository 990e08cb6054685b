"""CE-CLIP (Zhang, Awal, Agrawal, CVPR 2024): the systems of its printed figures (Tables 1, 2, 3 and 5, in
``figures.yaml``). Which of our caption-selection rows stands beside which figure is the caption-selection
profiles' to say (`evaluation.tasks.caption_selection.published_key`).

Benchmarks, in the vocabulary of our results:

- ARO (Table 1, Table 5): `aro/vg_relation`, `aro/vg_attribution`, metric `macro_accuracy` (ARO's
  macro accuracies, `evaluation.tasks.aro`);
- VALSE (Table 1): `valse/<column>` for its nine columns (`evaluation.tasks.valse.COLUMNS`) and
  `valse/avg` (mean over the 11 pieces), metric `accuracy`;
- VL-CheckList (Table 2): `vl_checklist/<aspect>_<type>` for the nine leaves, `vl_checklist/<aspect>`
  and `vl_checklist/overall`, metric `accuracy`, beside our `official` protocol (first 1,000 rows per
  file, the one published numbers use);
- SugarCrepe (Table 3): `sugarcrepe/<subset>`, `sugarcrepe/<replace|swap|add>` (group means) and
  `sugarcrepe/mean` (Table 5: the mean of the 7 subsets), metric `accuracy`.
"""

from __future__ import annotations

CE_CLIP = "CE-CLIP"
NEGCLIP = "NegCLIP"
