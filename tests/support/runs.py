"""Finished runs for `hardpos compare` / `hardpos report` tests: tiny models scored on REPLACE- and SWAP-layout folders."""

from pathlib import Path

from datasets import Dataset

from hf_hardpos.data.replace import phrase_diff
from tests.support.eval_data import make_eval_set


def _readme(configs) -> str:
    return (
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {c}\n  data_files:\n  - split: test\n    path: data/{c}/test-*.parquet\n"
            for c in configs
        )
        + "---\n"
    )


def _with_replacement(dataset: Dataset) -> Dataset:
    """The REPLACE builder's `replaced_phrase` / `replacement` columns (its word-level diff of c and c_p)."""
    diffs = [phrase_diff(c, p) for c, p in zip(dataset["caption"], dataset["hard_positive"])]
    return dataset.add_column("replaced_phrase", [d[0] for d in diffs]).add_column(
        "replacement", [d[1] for d in diffs]
    )


def write_replace_folder(root: Path) -> Path:
    """REPLACE's layout: configs `attributes` (with the builder's replacement columns) and `relations`."""
    for seed, config in enumerate(("attributes", "relations")):
        data = make_eval_set(num_images=5 + seed, rows_per_image=3, seed=seed)
        if config == "attributes":
            data = _with_replacement(data)
        data.to_parquet(str(root / "data" / config / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(_readme(("attributes", "relations")) + "# tiny replace\n")
    return root


def write_swap_folder(root: Path) -> Path:
    """SWAP's layout: one config, `default`, rows with their `attributes` pair; the folder is named `swap`."""
    data = make_eval_set(num_images=6, rows_per_image=2, seed=7)
    pairs = [["red", "blue"], ["small", "large"], ["red", "large"]]
    data = data.add_column("attributes", [pairs[i % 3] for i in range(len(data))])
    data.to_parquet(str(root / "data" / "default" / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(_readme(("default",)) + "# tiny swap\n")
    return root


def write_selection_folder(root: Path) -> Path:
    """A caption-selection set (image, caption, hard_negative; no hard positive), like SugarCrepe's layout."""
    make_eval_set(num_images=5, rows_per_image=2, seed=3).remove_columns(["hard_positive"]).to_parquet(
        str(root / "data" / "default" / "test-00000-of-00001.parquet")
    )
    (root / "README.md").write_text(_readme(("default",)) + "# tiny caption selection\n")
    return root
