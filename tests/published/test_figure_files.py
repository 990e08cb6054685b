"""The published figures come from several files: the package's `figures.yaml` and each registered
benchmark's (`Benchmark.figures`), checked alike; a benchmark's column of a table printed in another
file is inserted where it says, and anything that does not fit that table is refused, naming the file."""

from __future__ import annotations

import pytest

from hf_hardpos import published
from hf_hardpos.benchmark_registry import BENCHMARKS, Benchmark, Buildable, register

COLUMN = """
columns:
  - paper: ce_clip
    table: {table}
    after: {after}
    column: ["Toy", toy/overall, accuracy]
    rows: {rows}
    gain: 1.0
"""
TABLE_5_ROWS = '{"CLIP": 1.0, "CLIP-FT": 2.0, "CE-CLIP": 3.0, "CE-CLIP+": 4.0}'


@pytest.fixture
def toy_figures(tmp_path):
    """Register a benchmark whose figures file the test writes; taken out of the table after the test."""
    path = tmp_path / "figures.yaml"
    register(Benchmark(name="toy", build=Buildable("toy", "toy.builder:export", ()), task="caption_selection",
                       figures=path))  # fmt: skip
    yield path
    del BENCHMARKS["toy"]


def test_a_column_of_a_table_printed_elsewhere_is_inserted_after_the_column_it_names(toy_figures):
    toy_figures.write_text(COLUMN.format(table="Table 5", after="SugarCrepe", rows=TABLE_5_ROWS))
    table = published.table_rows("Zhang", "Table 5")
    assert list(table["CLIP"])[:6] == ["ARO-R", "ARO-A", "VALSE", "VLChecklist", "SugarCrepe", "Toy"]
    assert [table[row]["Toy"] for row in ("CLIP", "CLIP-FT", "CE-CLIP", "CE-CLIP+")] == [1.0, 2.0, 3.0, 4.0]
    assert table["CE-CLIP+"]["Toy gain"] == 1.0
    assert published.lookup("CLIP ViT-B/32", "toy/overall", "accuracy").source.endswith("Table 5")


@pytest.mark.parametrize(
    "text, message",
    [
        (COLUMN.format(table="Table 9", after="VALSE", rows=TABLE_5_ROWS), "no such table"),
        (COLUMN.format(table="Table 5", after="Nothing", rows=TABLE_5_ROWS), "the table has no column 'Nothing'"),
        (COLUMN.format(table="Table 5", after="VALSE", rows='{"CLIP": 1.0}'), r"rows \['CLIP'\] are not the table's"),
        ('papers:\n  ce_clip: "Someone else"\n', "paper 'ce_clip' is cited otherwise in another figures file"),
        ("tables:\n  - {paper: nobody, table: Table 1, columns: [], rows: []}\n", "unknown paper 'nobody'"),
        ("slips:\n  - {paper: nobody, table: Table 1}\n", "unknown paper 'nobody'"),
    ],
)  # fmt: skip
def test_a_figures_file_that_does_not_fit_is_refused_naming_it(toy_figures, text, message):
    toy_figures.write_text(text)
    with pytest.raises(ValueError, match=rf"^{toy_figures}.*{message}"):
        published.all_figures()
