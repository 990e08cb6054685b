"""Every figure the README and the docs pages quote between `<!--fig:...-->` markers equals
`benchmarks/results.json`.

The results file is written by the benchmark scripts themselves (`benchmarks/results.py`), so a quoted
figure can only come from a command that regenerates it.
"""

from __future__ import annotations

from tests.support.paths import REPO as ROOT


def test_readme_and_docs_figures_equal_the_results_file(results_module):
    pages = results_module.documents()
    assert ROOT / "README.md" in pages and ROOT / "docs" / "benchmarks.md" in pages
    readme = (ROOT / "README.md").read_text()
    assert results_module.MARKER.search(readme), "the README quotes no benchmark figure through a marker"
    results = results_module.load()
    problems = {page.name: results_module.mismatches(page.read_text(), results) for page in pages}
    assert {name: found for name, found in problems.items() if found} == {}


def test_a_drifted_figure_is_caught(results_module):
    results = {
        "bench": {
            "figures": {"ratio": "7.21"},
            "command": "python x.py",
            "date": "2026-11-24",
            "machine": {"cpu": "cpu", "cores": "2", "torch": "2.13.0", "hf_hardpos": "0.1"},
        }
    }
    assert results_module.mismatches("<!--fig:bench.ratio-->7.21<!--/fig-->", results) == []
    assert len(results_module.mismatches("<!--fig:bench.ratio-->8.4<!--/fig-->", results)) == 1
    assert len(results_module.mismatches("<!--fig:bench.other-->1<!--/fig-->", results)) == 1
    rendered = results_module.render(
        "x <!--fig:bench.ratio-->8.4<!--/fig--> <!--fig:bench.@machine-->?<!--/fig-->", results
    )
    assert rendered == (
        "x <!--fig:bench.ratio-->7.21<!--/fig--> "
        "<!--fig:bench.@machine-->cpu, 2 cores, torch 2.13.0, hf_hardpos 0.1<!--/fig-->"
    )


def test_a_recorded_command_runs_from_the_repository_root_wherever_it_ran(
    results_module, tmp_path, monkeypatch
):
    """A script run from `benchmarks/` and one run from the root record the same command, so the command
    a stale mark names (`site_text`) can be run as written, and a GPU entry's equals its CPU twin's."""
    target = tmp_path / "results.json"
    monkeypatch.setattr(results_module, "machine", lambda: {})
    monkeypatch.setattr(results_module, "code_digest", lambda: "digest")
    launches = {ROOT: "benchmarks/demo_time.py", ROOT / "benchmarks": "demo_time.py"}
    for cwd, script in launches.items():
        monkeypatch.chdir(cwd)
        monkeypatch.setattr("sys.argv", [script, "--seeds", "7", "8"])
        results_module.record("demo_time", {"wall_s": "1"}, target)
        assert (
            results_module.load(target)["demo_time"]["command"]
            == "python benchmarks/demo_time.py --seeds 7 8"
        )
