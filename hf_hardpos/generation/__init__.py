"""Hard-positive and hard-negative generation, all written to one resumable JSONL format.

- `lexicon`: the word tables (the paper's synonym table, antonyms, closed word classes).
- `rules`: no-model perturbations (`replace_hard_positive`, `swap_hard_positive`,
  `replace_hard_negative`, `swap_hard_negative`); `rule_generator.RuleGenerator` runs them as a
  generator.
- `llm.LLMGenerator`: any causal LM with the paper's prompts (hard positives), by default as the
  paper's released `generate_hard_positives.py` runs them (its 2024 pipeline's token ids and text);
  `sampling`: row-seeded sampling and the decoding values `generate` applies.
- `swap_rule`: which captions get a SWAP hard positive (the paper's rule, shared with the COCO builder).
- `ce_clip.CEClipNegativeGenerator`: CE-CLIP's typed hard negatives (relation / attribute / action /
  object) as its released `TextAugment` makes them (the default);
  `mlm.MLMNegativeGenerator`: our filtered variant, and the tagger and input checks both share.
- `validation`: output cleaning and checks (the paper's acceptance, or "strict"), every rejection
  reason, the hard-positive kinds.
- `resumable`: the one driver every generator runs under (`CaptionGenerator.generate_to_jsonl`),
  per-caption seeding (`caption_rng`); `run_output`: the output it resumes (manifest, lock, records).
- `report`: the quality report of an output file.
- `models`: loading a generator's model with a one-line error; the model's identity (file digests
  cached by path, size and mtime).

`llm`, `sampling`, `mlm`, `ce_clip` and `models` import torch and transformers; they are not imported here.
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
