"""SugarCrepe++'s text-only task (TOT) accuracy as a Hugging Face `evaluate` module.

Self-contained on purpose: the folder must run as a Hub Space on its own, where `hf_hardpos` (not on
PyPI) cannot be installed. The formula is one line; `tests/test_tot_metric.py` proves it equal to
`hf_hardpos.tasks.text_only.text_only_correct` and checks the input errors.
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
Text-only accuracy (TOT, SugarCrepe++): per example there are two captions with the same meaning, p1
and p2, and a hard negative n. The example is correct when the text encoder puts the two positives
strictly closer to each other than either is to the negative:
cos(p1, p2) > cos(p1, n) and cos(p1, p2) > cos(p2, n). No image is involved. Higher is better.
Ties are never correct.
"""

_KWARGS_DESCRIPTION = """
Args:
    positive_pair_scores (`list` of `float`): cos(p1, p2), the two positive captions.
    caption_negative_scores (`list` of `float`): cos(p1, n), the first positive and the hard negative.
    positive_negative_scores (`list` of `float`): cos(p2, n), the second positive and the hard negative.
    bootstrap_samples (`int`, defaults to 0): if > 0, add a percentile bootstrap interval over rows.
    confidence_level (`float`, defaults to 0.95): the interval's coverage.
    seed (`int`, defaults to 0): the bootstrap's random seed.
Returns:
    text_only_accuracy (`float`): in [0, 1]; with bootstrap, also `text_only_accuracy_ci_low` and
    `text_only_accuracy_ci_high`.
Examples:
    Row 1 is correct, row 2 ties (cos(p1,p2) = cos(p1,n)) and row 3 has cos(p1,n) above cos(p1,p2):

    >>> text_only_accuracy = evaluate.load("hardpos/text_only_accuracy")
    >>> text_only_accuracy.compute(positive_pair_scores=[0.9, 0.8, 0.7],
    ...                            caption_negative_scores=[0.5, 0.8, 0.75],
    ...                            positive_negative_scores=[0.6, 0.1, 0.2])
    {'text_only_accuracy': 0.3333333333333333}
"""

_CITATION = """
@inproceedings{dumpala2024sugarcrepepp,
    title = {SUGARCREPE++ Dataset: Vision-Language Model Sensitivity to Semantic and Lexical Alterations},
    author = {Dumpala, Sri Harsha and Jaiswal, Aman and Sastry, Chandramouli and Milios, Evangelos and Oore, Sageev and Sajjad, Hassan},
    booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
    year = {2024}
}
"""

_INPUTS = ("positive_pair_scores", "caption_negative_scores", "positive_negative_scores")


def _scores(values, name):
    """`values` as a 1-D float64 array, refusing what would give a silently wrong number."""
    if values is None:
        raise ValueError(f"`{name}` is missing: pass one score per example")
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        raise ValueError(f"`{name}` must hold numbers, got {array.dtype.name} values")
    array = array.astype(np.float64)
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"`{name}` is empty: there is nothing to score")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        shown = ", ".join(str(i) for i in bad[:5])
        raise ValueError(f"`{name}` holds {bad.size} non-finite value(s) (NaN or inf), first at index {shown}")
    return array


def _check(**named):
    arrays = [_scores(values, name) for name, values in named.items()]
    lengths = {name: len(a) for name, a in zip(named, arrays)}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}={n}" for name, n in lengths.items())
        raise ValueError(f"score lists differ in length ({described}); they must align row by row")
    return arrays


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class TextOnlyAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({name: datasets.Value("float64") for name in _INPUTS}),
            reference_urls=["https://github.com/Sri-Harsha/scpp", "https://arxiv.org/abs/2406.11171"],
        )

    def compute(
        self,
        *,
        positive_pair_scores=None,
        caption_negative_scores=None,
        positive_negative_scores=None,
        bootstrap_samples=0,
        confidence_level=0.95,
        seed=0,
    ):
        """Check the inputs first: `evaluate` would coerce "0.3" to a float and fail on a missing list
        with a bare TypeError. Without any score list, the rows given to `add`/`add_batch` are scored
        (`evaluate`'s incremental API); `_compute` checks them the same way."""
        if all(v is None for v in (positive_pair_scores, caption_negative_scores, positive_negative_scores)):
            return super().compute(bootstrap_samples=bootstrap_samples, confidence_level=confidence_level, seed=seed)
        inputs = dict(
            positive_pair_scores=positive_pair_scores,
            caption_negative_scores=caption_negative_scores,
            positive_negative_scores=positive_negative_scores,
        )
        _check(**inputs)
        return super().compute(
            **inputs, bootstrap_samples=bootstrap_samples, confidence_level=confidence_level, seed=seed
        )

    def _compute(
        self,
        positive_pair_scores,
        caption_negative_scores,
        positive_negative_scores,
        bootstrap_samples=0,
        confidence_level=0.95,
        seed=0,
    ):
        pair, caption_negative, positive_negative = _check(
            positive_pair_scores=positive_pair_scores,
            caption_negative_scores=caption_negative_scores,
            positive_negative_scores=positive_negative_scores,
        )
        correct = (pair > caption_negative) & (pair > positive_negative)
        result = {"text_only_accuracy": float(np.mean(correct))}
        if bootstrap_samples:
            if not 0 < confidence_level < 1:
                raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
            rng = np.random.default_rng(seed)
            idx = rng.integers(0, correct.size, size=(int(bootstrap_samples), correct.size))
            stats = correct.astype(np.float64)[idx].mean(axis=1)
            low, high = np.quantile(stats, [(1 - confidence_level) / 2, (1 + confidence_level) / 2])
            result["text_only_accuracy_ci_low"] = float(low)
            result["text_only_accuracy_ci_high"] = float(high)
        return result
