"""`hardpos report` states its result in one sentence, and a demo page shows every variant's spread over seeds."""

import re
from html.parser import HTMLParser

import pytest

from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.reporting.compare import Cell
from hf_hardpos.reporting.headline import BaselineDelta, headline_clause
from hf_hardpos.reporting.html import build_report
from hf_hardpos.reporting.runs import load_run
from tests.support.runs import write_replace_folder


def test_the_clause_names_the_rate_and_the_paired_difference_to_the_baseline():
    metrics = {"brittleness": 0.247, "augmented_accuracy": 0.591}
    alone = headline_clause("REPLACE", metrics, [])
    assert re.findall(r"[\d.]+ %", alone) == [
        "24.7 %",
        "33.3 %",
        "59.1 %",
        "33.3 %",
    ]  # rates, each with its chance
    lower = BaselineDelta(
        "hn",
        {"brittleness": 0.422},
        None,
        "pooled",
        {"brittleness": Cell(-0.175, -0.217, -0.134, None, True)},
    )
    assert headline_clause("REPLACE", metrics, [lower]) == (
        "REPLACE brittleness 24.7 %, 17.5 points lower than hn's 42.2 % (paired 95% interval [-21.7, -13.4])"
    )
    unclear = BaselineDelta(
        "hn", {"brittleness": 0.23}, None, "pooled", {"brittleness": Cell(0.017, -0.01, 0.04, None, False)}
    )
    assert headline_clause("SWAP", metrics, [unclear]).endswith(
        "1.7 points higher than hn's 23.0 % (paired 95% interval [-1.0, 4.0], an interval that includes 0)"
    )


class _Page(HTMLParser):
    """The sentence under the title and the rows of the seed-spread table."""

    def __init__(self):
        super().__init__()
        self.sentence, self.rows, self._where, self._in_spread = "", [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "p" and ("class", "sentence") in attrs:
            self._where = "sentence"
        elif tag == "h2":
            self._in_spread = ("id", "seed-spread") in attrs
        elif tag == "tr" and self._in_spread:
            self.rows.append([])
        elif tag in ("td", "th") and self._in_spread:
            self.rows[-1].append("")
            self._where = "cell"

    def handle_endtag(self, tag):
        if tag in ("p", "td", "th"):
            self._where = None

    def handle_data(self, data):
        if self._where == "sentence":
            self.sentence += data
        elif self._where == "cell":
            self.rows[-1][-1] += data


@pytest.fixture(scope="module")
def run(tiny_clip_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("headline")
    data = write_replace_folder(root / "replace")
    evaluate_model(
        str(tiny_clip_dir), str(data), output_dir=root / "eval", progress=False, log=lambda m: None
    )
    return load_run(root / "eval")


def test_the_page_opens_with_one_sentence_and_shows_every_variant_over_seeds(run):
    spread = {variant: {"replace": {"orig_acc": o, "orig_acc_std": 0.006, "aug_acc": 0.5, "aug_acc_std": 0.001,
                                    "brittleness": b, "brittleness_std": 0.005, "num_seeds": seeds},
                        "replace_attributes[colour]": {"orig_acc": 0.1}}  # a subgroup: not a row
              for variant, o, b, seeds in (("pretrained", 0.653, 0.193, 1), ("hn", 0.871, 0.422, 2),
                                           ("hp+hn", 0.834, 0.247, 2))}  # fmt: skip
    page = _Page()
    page.feed(build_report(run, resamples=50, seed_spread=spread, seed_spread_note="seed 0's models"))
    (figure,) = run.benchmarks["replace"].figures()  # REPLACE's paper column: both subsets pooled
    assert page.sentence.endswith(".") and not re.search(r"\.\s", page.sentence)  # one sentence
    assert f"brittleness {100 * figure.metrics['brittleness']:.1f} %" in page.sentence
    assert page.rows[0] == ["variant", "set", "seeds", "orig acc", "aug acc", "brittleness"]
    assert page.rows[1:] == [["pretrained", "replace", "1", "65.3", "50.0", "19.3"],
                             ["hn", "replace", "2", "87.1 ± 0.6", "50.0 ± 0.1", "42.2 ± 0.5"],
                             ["hp+hn", "replace", "2", "83.4 ± 0.6", "50.0 ± 0.1", "24.7 ± 0.5"]]  # fmt: skip
