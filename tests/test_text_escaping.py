"""`text_escaping`: each format's specials made literal (a chart label with `$` no longer crashes matplotlib)."""

import numpy as np
import pytest

from hf_hardpos.reporting import charts
from hf_hardpos.text_escaping import (
    csv_cell,
    latex_text,
    markdown_cell,
    mathtext_literal,
    terminal_text,
)


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_formula_starts_are_quoted(start):
    assert csv_cell(f"{start}1+1") == f"'{start}1+1"
    assert csv_cell("model") == "model" and csv_cell(-0.5) == -0.5


def test_markdown_and_latex_escapes():
    assert markdown_cell("a|b\nc") == r"a\|b c"
    assert markdown_cell("<script>x</script> & \x1b[2J") == r"&lt;script&gt;x&lt;/script&gt; &amp; \x1b[2J"
    assert terminal_text("a\x1b[31mb\rc\x9bd\te") == r"a\x1b[31mb\rc\x9bd" + "\te"
    assert latex_text("50% & a_b\n{x}") == r"50\% \& a\_b \{x\}"


def test_a_config_named_like_mathtext_draws(tmp_path):
    name = "a$x^$"
    rates = {"original_accuracy": 0.5, "augmented_accuracy": 0.25, "brittleness": 0.25, "num_examples": 4}
    assert charts.rate_bars({name: rates}).startswith("data:image/png;base64,")
    values = np.linspace(0, 1, 8)
    assert charts.score_distributions(values, values[::-1], values, f"replace [{name}]").startswith(
        "data:image/png"
    )
    uri, keys = charts.loss_curves([{"step": 1, "loss$^$": 1.0}, {"step": 2, "loss$^$": 0.5}])
    assert keys == ["loss$^$"] and uri.startswith("data:image/png")
    history = [{"step": s, f"eval_{name}_brittleness": v} for s, v in ((1, 0.4), (2, 0.3))]
    uri, panels = charts.eval_curves(history)
    assert list(panels) == [f"eval_{name}"] and uri.startswith("data:image/png")
    assert mathtext_literal(name) == r"a\$x^\$"
