"""Brittleness (Kamath et al., 2024) as a Hugging Face `evaluate` module.

The formula lives in `hf_hardpos.metrics`, shared with the package's evaluator, so this module and
`hardpos eval` give identical numbers.
"""

import datasets
import evaluate

from hf_hardpos.metrics import brittle
from hf_hardpos.metrics import check_scores
from hf_hardpos.metrics import metric_with_interval

_DESCRIPTION = """
Brittleness is the fraction of examples where the hard negative's score falls strictly between the
original caption's and the hard positive's: s_c > s_n > s_p or s_p > s_n > s_c. A brittle model flips
its decision under a meaning-preserving edit. Lower is better; chance is 1/3. Ties are never brittle.
"""

_KWARGS_DESCRIPTION = """
Args:
    original_scores (`list` of `float`): s(c|i), the image's score with its original caption.
    negative_scores (`list` of `float`): s(c_n|i), with the hard negative (meaning changed).
    positive_scores (`list` of `float`): s(c_p|i), with the hard positive (meaning kept).
    bootstrap_samples (`int`, defaults to 0): if > 0, add a percentile bootstrap interval.
    confidence_level (`float`, defaults to 0.95): the interval's coverage.
    seed (`int`, defaults to 0): the bootstrap's random seed.
Returns:
    brittleness (`float`): in [0, 1]; with bootstrap, also `brittleness_ci_low` and `brittleness_ci_high`.
Examples:
    >>> brittleness = evaluate.load("hardpos/brittleness")
    >>> brittleness.compute(original_scores=[0.3, 0.3, 0.2], negative_scores=[0.2, 0.25, 0.25],
    ...                     positive_scores=[0.1, 0.4, 0.3])
    {'brittleness': 0.6666666666666666}
"""

_CITATION = """
@inproceedings{kamath2024hardpositive,
  title     = {The Hard Positive Truth about Vision-Language Compositionality},
  author    = {Kamath, Amita and Hsieh, Cheng-Yu and Chang, Kai-Wei and Krishna, Ranjay},
  booktitle = {European Conference on Computer Vision (ECCV)},
  year      = {2024},
  url       = {https://arxiv.org/abs/2409.17958}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Brittleness(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "original_scores": datasets.Value("float64"),
                    "negative_scores": datasets.Value("float64"),
                    "positive_scores": datasets.Value("float64"),
                }
            ),
            reference_urls=["https://arxiv.org/abs/2409.17958"],
        )

    def _compute(
        self,
        original_scores,
        negative_scores,
        positive_scores,
        bootstrap_samples=0,
        confidence_level=0.95,
        seed=0,
    ):
        original, negative, positive = check_scores(
            original_scores=original_scores, negative_scores=negative_scores, positive_scores=positive_scores
        )
        per_row = brittle(original, negative, positive)
        return metric_with_interval("brittleness", per_row, bootstrap_samples, confidence_level, seed)
