"""Hard-positive (and rule-based hard-negative) generation.

- `rules`: no-model generators (`replace_hard_positive`, `swap_hard_positive`,
  `replace_hard_negative`, `swap_hard_negative`) built on the tables in `lexicon`.
- `llm.LLMGenerator`: any causal LM with the paper's prompts (`prompts`), outputs checked by
  `validation`, written to a resumable JSONL (`resumable`). Imported lazily: it needs torch.
"""

from hf_hardpos.generation.rules import (
    replace_hard_negative,
    replace_hard_positive,
    swap_hard_negative,
    swap_hard_positive,
)
from hf_hardpos.generation.validation import clean_output, validate_replace, validate_swap

__all__ = [
    "clean_output",
    "replace_hard_negative",
    "replace_hard_positive",
    "swap_hard_negative",
    "swap_hard_positive",
    "validate_replace",
    "validate_swap",
]
