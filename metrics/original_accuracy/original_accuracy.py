"""Original Accuracy (the usual compositionality-benchmark score) as a Hugging Face `evaluate` module.

The formula lives in `hf_hardpos.metrics`, shared with the package's evaluator, so this module and
`hardpos eval` give identical numbers.
"""

import datasets
import evaluate

from hf_hardpos.metrics import check_scores
from hf_hardpos.metrics import metric_with_interval
from hf_hardpos.metrics import original_correct

_DESCRIPTION = """
Original accuracy is the fraction of examples where the original caption scores strictly above the
hard negative: s_c > s_n. It is what compositionality benchmarks report; chance is 1/2. Ties are never
correct. `positive_scores` may be passed (and is ignored) so that the three hard-positive metrics
take the same inputs.
"""

_KWARGS_DESCRIPTION = """
Args:
    original_scores (`list` of `float`): s(c|i), the image's score with its original caption.
    negative_scores (`list` of `float`): s(c_n|i), with the hard negative (meaning changed).
    positive_scores (`list` of `float`, optional): s(c_p|i); not used by this metric.
    bootstrap_samples (`int`, defaults to 0): if > 0, add a percentile bootstrap interval.
    confidence_level (`float`, defaults to 0.95): the interval's coverage.
    seed (`int`, defaults to 0): the bootstrap's random seed.
Returns:
    original_accuracy (`float`): in [0, 1]; with bootstrap, also `original_accuracy_ci_low` / `_ci_high`.
Examples:
    >>> original_accuracy = evaluate.load("hardpos/original_accuracy")
    >>> original_accuracy.compute(original_scores=[0.3, 0.3, 0.2], negative_scores=[0.2, 0.25, 0.25])
    {'original_accuracy': 0.6666666666666666}
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

_PAIR = {"original_scores": datasets.Value("float64"), "negative_scores": datasets.Value("float64")}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class OriginalAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(_PAIR),
                datasets.Features({**_PAIR, "positive_scores": datasets.Value("float64")}),
            ],
            reference_urls=["https://arxiv.org/abs/2409.17958"],
        )

    def _compute(
        self,
        original_scores,
        negative_scores,
        positive_scores=None,
        bootstrap_samples=0,
        confidence_level=0.95,
        seed=0,
    ):
        original, negative = check_scores(original_scores=original_scores, negative_scores=negative_scores)
        per_row = original_correct(original, negative)
        return metric_with_interval("original_accuracy", per_row, bootstrap_samples, confidence_level, seed)
