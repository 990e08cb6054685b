"""What differs between the `evaluate` modules: one `Spec` per module.

`generate.py` renders each spec through the templates in `_template/` into `hf_hardpos/evaluate_modules/<name>/`;
what the modules share (input checks, bootstrap, `evaluate` plumbing, the Space files) is written once there.
Prose fields are filled to the line width by the templates, so they may be written unwrapped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hf_hardpos.published import lookup
from hf_hardpos.published.hard_positive import CLIP_B32, HP_HN


def _table1(model_row: str, metric: str) -> str:
    """`REPLACE / SWAP` of one Table 1 row, in percent as the paper prints it."""
    return " / ".join(
        f"{lookup(model_row, benchmark, metric).value:.1f}" for benchmark in ("replace", "swap")
    )


@dataclass(frozen=True)
class Input:
    """One score list a module takes."""

    name: str  # the keyword argument and feature name
    variable: str  # its name inside the formula
    symbol: str  # the variable the README's usage line passes
    doc: str  # the `Args:` entry of the module docstring
    card: str  # the README's `Inputs` bullet


@dataclass(frozen=True)
class Spec:
    name: str  # folder, file and result key
    class_name: str
    title: str  # the metric card's title
    headline: str  # the module docstring's subject
    proof: str  # which test compares the module with which package function
    summary: str  # the card's front-matter description
    description: str  # `_DESCRIPTION`; `tie_rule` is appended
    tie_rule: str  # appended to the description and to the formula's docstring
    inputs: tuple[Input, ...]  # the score lists the formula reads, in `_compute`'s order
    formula_doc: str
    formula: str  # the per-row boolean over the inputs' variables: an independent restatement
    example: str  # doctest lines; they run in the tests with `hardpos/<name>` resolved to the folder
    citation: str  # a key of `hf_hardpos.citations.BIBTEX`
    reference_urls: tuple[str, ...]
    card_description: str
    card_usage: str  # the paragraph after the usage snippet
    card_papers: str
    card_limitations: str  # markdown as written (may be a list)
    example_note: str = ""  # prose before the doctest
    ignored: tuple[Input, ...] = ()  # accepted and ignored, so related metrics take the same inputs


ORIGINAL = Input(
    "original_scores", "original", "s_c", "s(c|i), the image's score with its original caption.", "s(c|i)."
)
NEGATIVE = Input(
    "negative_scores", "negative", "s_n", "s(c_n|i), with the hard negative (meaning changed).", "s(c_n|i)."
)
POSITIVE = Input(
    "positive_scores", "positive", "s_p", "s(c_p|i), with the hard positive (meaning kept).", "s(c_p|i)."
)


def hard_positive(
    *,
    name: str,
    class_name: str,
    title: str,
    headline: str,
    description: str,
    counts_when: str,
    chance: str,
    better: str,
    tie_rule: str,
    formula_doc: str,
    formula: str,
    example: str,
    intro: str,
    ignores_positive: bool = False,
) -> Spec:
    """A metric of Kamath et al. (2024): three image-text scores per example, one card and one
    citation shared with its two siblings; the card quotes the paper's Table 1 (CLIP ViT-B/32 and their
    HP+HN model, REPLACE / SWAP) from `hf_hardpos.published`, where the package keeps published figures."""
    clip, finetuned = (_table1(row, name) for row in (CLIP_B32, HP_HN))
    return Spec(
        name=name,
        class_name=class_name,
        title=title,
        headline=headline,
        proof=(
            "`tests/repository/test_metric_modules.py` proves it bit-identical to `hf_hardpos.metrics` on tie-heavy data "
            "and checks that the input errors read the same"
        ),
        summary=(
            f"{title} of an image-text matching model on hard negatives and hard positives "
            f"(Kamath et al., ECCV 2024): {counts_when}."
        ),
        description=description,
        tie_rule=tie_rule,
        inputs=(ORIGINAL, NEGATIVE) if ignores_positive else (ORIGINAL, NEGATIVE, POSITIVE),
        ignored=(replace(POSITIVE, doc="s(c_p|i); not used by this metric."),) if ignores_positive else (),
        formula_doc=formula_doc,
        formula=formula,
        example=example,
        citation="kamath2024hard",
        reference_urls=("https://arxiv.org/abs/2409.17958",),
        card_description=f"""{intro}

Per example there are three image-text scores: `s_c` (original caption), `s_n` (hard negative) and `s_p`
(hard positive), each the cosine similarity of the L2-normalised image and text embeddings. An example
counts when **{counts_when}**. {tie_rule} Chance level: {chance}; {better} is better.""",
        card_usage="""This module is self-contained (it runs as a Space without `hf_hardpos`); `hardpos eval` and
`hf_hardpos.evaluate_model` use the same one-line formula from `hf_hardpos.metrics`, and the package's tests
prove the two bit-identical on tie-heavy data. The optional bootstrap here resamples rows (the module sees
no image ids); `hardpos eval --bootstrap` resamples images.""",
        card_papers=f"""Kamath et al. (2024), Table 1, percent, REPLACE / SWAP: CLIP ViT-B/32 {clip}; their model
fine-tuned with hard positives and hard negatives {finetuned}. The REPLACE figure is the fraction over all
27,443 rows of the Attributes and Relations subsets pooled (each row once): compute the metric on the
concatenated score lists of both subsets, not the mean of the two subsets' figures.""",
        card_limitations="""The metric is only as good as its hard positives: the upstream REPLACE data has a handful of
hard positives made by substring replacement (e.g. "white whiteboard" -> "ivory ivoryboard"); the
`hardpos/replace` dataset flags them so they can be filtered. Scores must come from the same model
and scale for all three captions.""",
    )


SPECS = (
    hard_positive(
        name="original_accuracy",
        class_name="OriginalAccuracy",
        title="Original Accuracy",
        headline="Original Accuracy (the usual compositionality-benchmark score)",
        description="""Original accuracy is the fraction of examples where the original caption scores strictly
above the hard negative: s_c > s_n. It is what compositionality benchmarks report; chance is 1/2.
`positive_scores` may be passed (and is ignored) so that the three hard-positive metrics take the same
inputs.""",
        counts_when="s_c > s_n",
        chance="1/2 (50%)",
        better="higher",
        tie_rule="Comparisons are strict: a tie is never correct.",
        formula_doc="Per row: the original caption beats the hard negative.",
        formula="original > negative",
        example="""\
>>> original_accuracy = evaluate.load("hardpos/original_accuracy")
>>> original_accuracy.compute(original_scores=[0.3, 0.3, 0.2], negative_scores=[0.2, 0.25, 0.25])
{'original_accuracy': 0.6666666666666666}""",
        intro="""The score compositionality benchmarks report. Alone it rewards a model that rejects every edited
caption, including meaning-preserving ones: read it together with augmented accuracy and brittleness.""",
        ignores_positive=True,
    ),
    hard_positive(
        name="augmented_accuracy",
        class_name="AugmentedAccuracy",
        title="Augmented Accuracy",
        headline="Augmented Accuracy (Kamath et al., 2024)",
        description="""Augmented accuracy is the fraction of examples where both the original caption and the hard
positive score strictly above the hard negative: s_c > s_n and s_p > s_n. Unlike original accuracy, a
model cannot earn it by rejecting every edited caption. Chance is 1/3.""",
        counts_when="s_c > s_n and s_p > s_n",
        chance="1/3 (33.3%)",
        better="higher",
        tie_rule="Comparisons are strict: a tie is never correct.",
        formula_doc="Per row: both the original caption and the hard positive beat the hard negative.",
        formula="(original > negative) & (positive > negative)",
        example="""\
>>> augmented_accuracy = evaluate.load("hardpos/augmented_accuracy")
>>> augmented_accuracy.compute(original_scores=[0.3, 0.3, 0.2], negative_scores=[0.2, 0.25, 0.25],
...                            positive_scores=[0.1, 0.4, 0.3])
{'augmented_accuracy': 0.3333333333333333}""",
        intro="""Adds a hard positive c_p (a minimal edit that keeps the meaning): the model must rank both the
original and the hard positive above the hard negative.""",
    ),
    hard_positive(
        name="brittleness",
        class_name="Brittleness",
        title="Brittleness",
        headline="Brittleness (Kamath et al., 2024)",
        description="""Brittleness is the fraction of examples where the hard negative's score falls strictly between
the original caption's and the hard positive's: s_c > s_n > s_p or s_p > s_n > s_c. A brittle model
flips its decision under a meaning-preserving edit. Lower is better; chance is 1/3.""",
        counts_when="s_c > s_n > s_p or s_p > s_n > s_c",
        chance="1/3 (33.3%)",
        better="lower",
        tie_rule="Comparisons are strict: a tie is never brittle.",
        formula_doc="Per row: the hard negative falls strictly between the original and the hard positive.",
        formula="((original > negative) & (negative > positive)) | ((positive > negative) & (negative > original))",
        example="""\
>>> brittleness = evaluate.load("hardpos/brittleness")
>>> brittleness.compute(original_scores=[0.3, 0.3, 0.2], negative_scores=[0.2, 0.25, 0.25],
...                     positive_scores=[0.1, 0.4, 0.3])
{'brittleness': 0.6666666666666666}""",
        intro="""The fraction of examples where a meaning-preserving edit flips the model's decision against the
hard negative: the hard negative lands strictly between the original and the hard positive.""",
    ),
    Spec(
        name="text_only_accuracy",
        class_name="TextOnlyAccuracy",
        title="Text-Only Accuracy (SugarCrepe++ TOT)",
        headline="SugarCrepe++'s text-only task (TOT) accuracy",
        proof=(
            "`tests/evaluation/tasks/test_tot_metric.py` proves it equal to "
            "`hf_hardpos.evaluation.tasks.text_only.text_only_correct` and checks the input errors"
        ),
        summary="""SugarCrepe++'s text-only task (Dumpala et al., NeurIPS 2024): the two positive captions must be
strictly closer to each other than either is to the hard negative, cos(p1,p2) > cos(p1,n) and
cos(p1,p2) > cos(p2,n).""",
        description="""Text-only accuracy (TOT, SugarCrepe++): per example there are two captions with the same
meaning, p1 and p2, and a hard negative n. The example is correct when the text encoder puts the two
positives strictly closer to each other than either is to the negative: cos(p1,p2) > cos(p1,n) and
cos(p1,p2) > cos(p2,n). No image is involved. Higher is better.""",
        tie_rule="Both comparisons are strict, as in the authors' evaluation code: a tie is never correct.",
        inputs=(
            Input(
                "positive_pair_scores",
                "pair",
                "cos_p1_p2",
                "cos(p1, p2), the two positive captions.",
                "cos(p1, p2).",
            ),
            Input(
                "caption_negative_scores",
                "caption_negative",
                "cos_p1_n",
                "cos(p1, n), the first positive and the hard negative.",
                "cos(p1, n).",
            ),
            Input(
                "positive_negative_scores",
                "positive_negative",
                "cos_p2_n",
                "cos(p2, n), the second positive and the hard negative.",
                "cos(p2, n).",
            ),
        ),
        formula_doc="Per row: the two positives are strictly closer to each other than either is to the negative.",
        formula="(pair > caption_negative) & (pair > positive_negative)",
        example_note="""Row 1 is correct, row 2 ties (cos(p1,p2) = cos(p1,n)) and row 3 has cos(p1,n) above
cos(p1,p2):""",
        example="""\
>>> text_only_accuracy = evaluate.load("hardpos/text_only_accuracy")
>>> text_only_accuracy.compute(positive_pair_scores=[0.9, 0.8, 0.7],
...                            caption_negative_scores=[0.5, 0.8, 0.75],
...                            positive_negative_scores=[0.6, 0.1, 0.2])
{'text_only_accuracy': 0.3333333333333333}""",
        citation="dumpala2024sugarcrepepp",
        reference_urls=("https://github.com/Sri-Harsha/scpp", "https://arxiv.org/abs/2406.11171"),
        card_description="""SugarCrepe++ gives, per COCO image, a caption p1, a second caption p2 with the same meaning (a
human-validated paraphrase) and a hard negative n (a small edit that changes the meaning). Its text-only
task (TOT) asks whether a model's **text encoder alone** tells meaning apart from wording: an example
counts as correct when **cos(p1, p2) > cos(p1, n) and cos(p1, p2) > cos(p2, n)**, where cos is the cosine
similarity of the L2-normalised text embeddings. Both comparisons are strict, as in the authors'
evaluation code: **a tie is never correct**. The value is the fraction of correct examples; higher is
better. With three arbitrary captions, chance is 1/3.

The image-text counterpart (SugarCrepe++'s ITT: s(i,p1) > s(i,n) and s(i,p2) > s(i,n)) is the
`augmented_accuracy` module of the same collection.""",
        card_usage="""With the `hf_hardpos` package, `hf_hardpos.evaluation.tasks.text_only.text_only_scores(scorer,
dataset)` computes the three cosines of a SugarCrepe++ subset (columns `caption` = p1, `hard_positive` =
p2, `hard_negative` = n) from text embeddings only, each distinct caption encoded once.""",
        card_papers="""Dumpala et al. (2024) report TOT per SugarCrepe++ subset (replace_att, replace_obj, replace_rel,
swap_att, swap_obj) for many vision-language and text-only models; see the paper's result tables. The
subsets are reported separately; say which aggregation you use if you combine them.""",
        card_limitations="""\
- A few upstream SugarCrepe++ rows are defective: where p2 equals p1, cos(p1,p2) = 1 and the row is
  correct for any model that does not embed n exactly like p1; where n equals p1, cos(p1,n) = 1,
  which cos(p1,p2) can at best tie, so the row is never correct. The `hardpos/sugarcrepe_pp` dataset
  flags these rows so they can be filtered.
- All three scores must come from the same text encoder; the metric says nothing about images.""",
    ),
)
