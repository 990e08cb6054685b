"""Original Accuracy (the usual compositionality-benchmark score) as a Hugging Face `evaluate` module.

Self-contained on purpose: the folder must run as a Hub Space on its own, where `hf_hardpos` (not on
PyPI) cannot be installed. The formula is one line; `tests/test_metric_modules.py` proves it
bit-identical to `hf_hardpos.metrics` on tie-heavy data and checks that the input errors read the same.
"""

import datasets
import evaluate
import numpy as np

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
@inproceedings{kamath2024hard,
    title = {The Hard Positive Truth about Vision-Language Compositionality},
    author = {Kamath, Amita and Hsieh, Cheng-Yu and Chang, Kai-Wei and Krishna, Ranjay},
    booktitle = {European Conference on Computer Vision (ECCV)},
    year = {2024},
    eprint = {2409.17958},
    archivePrefix = {arXiv}
}
"""

_PAIR = {"original_scores": datasets.Value("float64"), "negative_scores": datasets.Value("float64")}


def _scores(values, name):
    """`values` as a 1-D float64 array; the same checks and wording as `hf_hardpos.metrics.as_scores`."""
    if values is None:
        raise ValueError(f"`{name}` is missing: pass one score per example")
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        shown = next((v for v in np.ravel(array)[:1000] if not _is_number(v)), None)
        raise ValueError(
            f"`{name}` must hold numbers, got {array.dtype.name} values"
            + (f" such as {getattr(shown, 'item', lambda: shown)()!r}" if shown is not None else "")
        )
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


def _is_number(value):
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _check(**named):
    arrays = [_scores(values, name) for name, values in named.items()]
    lengths = {name: len(a) for name, a in zip(named, arrays)}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}={n}" for name, n in lengths.items())
        raise ValueError(f"score lists differ in length ({described}); they must align row by row")
    return arrays


def _with_interval(name, per_row, bootstrap_samples, confidence_level, seed):
    """The rate and, if asked, a percentile bootstrap interval over rows (this module has no image ids;
    `hardpos eval --bootstrap` resamples images instead)."""
    result = {name: float(np.mean(per_row))}
    if bootstrap_samples:
        if not 0 < confidence_level < 1:
            raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, per_row.size, size=(int(bootstrap_samples), per_row.size))
        stats = per_row.astype(np.float64)[idx].mean(axis=1)
        alpha = (1 - confidence_level) / 2
        low, high = np.quantile(stats, [alpha, 1 - alpha])
        result[f"{name}_ci_low"] = float(low)
        result[f"{name}_ci_high"] = float(high)
    return result


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

    def compute(
        self,
        *,
        original_scores=None,
        negative_scores=None,
        positive_scores=None,
        bootstrap_samples=0,
        confidence_level=0.95,
        seed=0,
    ):
        """Check the inputs first: `evaluate` would coerce "0.3" to a float and fail on a missing list
        with a bare TypeError. Without any score list, the rows given to `add`/`add_batch` are scored
        (`evaluate`'s incremental API); `_compute` checks them the same way."""
        if all(v is None for v in (original_scores, negative_scores, positive_scores)):
            return super().compute(bootstrap_samples=bootstrap_samples, confidence_level=confidence_level, seed=seed)
        _check(original_scores=original_scores, negative_scores=negative_scores)
        inputs = dict(original_scores=original_scores, negative_scores=negative_scores)
        if positive_scores is not None:  # accepted so the three metrics take the same inputs
            _check(original_scores=original_scores, positive_scores=positive_scores)
            inputs["positive_scores"] = positive_scores
        return super().compute(
            **inputs, bootstrap_samples=bootstrap_samples, confidence_level=confidence_level, seed=seed
        )

    def add_batch(self, *, original_scores=None, negative_scores=None, positive_scores=None):
        """`positive_scores` is accepted and ignored here too, so the three metrics take the same inputs."""
        return super().add_batch(original_scores=original_scores, negative_scores=negative_scores)

    def add(self, *, original_scores=None, negative_scores=None, positive_scores=None):
        """`positive_scores` is accepted and ignored here too, so the three metrics take the same inputs."""
        return super().add(original_scores=original_scores, negative_scores=negative_scores)

    def _compute(
        self,
        original_scores,
        negative_scores,
        positive_scores=None,
        bootstrap_samples=0,
        confidence_level=0.95,
        seed=0,
    ):
        original, negative = _check(original_scores=original_scores, negative_scores=negative_scores)
        per_row = original > negative
        return _with_interval("original_accuracy", per_row, bootstrap_samples, confidence_level, seed)
