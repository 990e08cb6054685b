"""Image-caption selection: which of k captions fits the image (SugarCrepe, ARO) and Winoground.

Why one module: SugarCrepe (c vs c_n), ARO's VG-Relation / VG-Attribution (true vs false caption)
and COCO/Flickr30k-Order (one true caption among 5) are the same task with a different number of
candidates, and the compositionality papers (CE-CLIP, Kamath et al.) report them side by side.
Winoground (Thrush et al. 2022) crosses two images with two captions, so it has its own scores.

Tie rule: a row is correct only when the true caption scores strictly higher than every other
candidate, as SugarCrepe's `>`. ARO takes `np.argmax`, which returns the first maximum, so a tie
is wrong on VG-Relation / VG-Attribution (the true caption is listed second: the strict rule is
ARO's) but right on COCO/Flickr-Order (listed first): there `accuracy` follows ARO's code, to
compare with the paper, and `accuracy_strict` stands beside it (`true_caption_first`).

Schema read (hf_hardpos.columns): `image`, the true caption `caption`, and the other candidates in
`hard_negative`, `hard_negative_<i>` (i = 0, 1, ...) columns and/or a list-of-strings column
`hard_negatives`; a missing candidate is null. `negative_columns=` names other columns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset, load_dataset

from ... import columns
from ...errors import UserInputError
from ...scoring import ITMScorer

CAPTION_SELECTION = "caption_selection"
WINOGROUND = "winoground"

NEGATIVES_LIST_COLUMN = "hard_negatives"
_NUMBERED_NEGATIVE = re.compile(rf"^{columns.HARD_NEGATIVE}_(\d+)$")

SELECTION_TIE_RULE = (
    "strict: a row is correct only when the true caption's score is greater than every other candidate's "
    "(a tie is wrong)"
)
WINOGROUND_TIE_RULE = "strict inequalities (Thrush et al. 2022): a tie is wrong"

# SugarCrepe's categories (Hsieh et al. 2023, Table 2), each the unweighted mean of its subsets.
SUGARCREPE_CATEGORIES = {
    "add": ("add_att", "add_obj"),
    "replace": ("replace_att", "replace_obj", "replace_rel"),
    "swap": ("swap_att", "swap_obj"),
}

# facebook/winoground's published columns (the dataset's own features).
WINOGROUND_IMAGES = ("image_0", "image_1")
WINOGROUND_CAPTIONS = ("caption_0", "caption_1")
WINOGROUND_TAG = "collapsed_tag"


def negative_columns_of(dataset: Dataset) -> list[str]:
    """The candidate columns besides the true caption, in the order the schema defines."""
    numbered = sorted(
        (int(m.group(1)), name) for name in dataset.column_names if (m := _NUMBERED_NEGATIVE.match(name))
    )
    found = [columns.HARD_NEGATIVE] if columns.HARD_NEGATIVE in dataset.column_names else []
    found += [name for _, name in numbered]
    if NEGATIVES_LIST_COLUMN in dataset.column_names:
        found.append(NEGATIVES_LIST_COLUMN)
    return found


def _candidates(dataset: Dataset, caption_column: str, negative_columns: Sequence[str], what: str) -> list[list]:
    """Per row: [true caption, other candidates...]; list columns are expanded, nulls kept as None."""
    rows: list[list] = [[text] for text in list(dataset[caption_column])]
    for column in negative_columns:
        for row, cell in enumerate(dataset[column]):
            rows[row].extend(cell if isinstance(cell, list) else [cell])
    for row, candidates in enumerate(rows):
        if not isinstance(candidates[0], str):
            raise UserInputError(f"{what}, row {row}: the true caption ({caption_column!r}) is missing")
        bad = next((c for c in candidates[1:] if c is not None and not isinstance(c, str)), None)
        if bad is not None:
            raise UserInputError(f"{what}, row {row}: a candidate caption is a {type(bad).__name__}, not text")
        if all(c is None for c in candidates[1:]):
            raise UserInputError(
                f"{what}, row {row}: no other candidate caption (columns {list(negative_columns)} are all null)"
            )
    return rows


def selection_scores(
    scorer: ITMScorer,
    dataset: Dataset,
    caption_column: str = columns.CAPTION,
    negative_columns: Sequence[str] | None = None,
    image_column: str = columns.IMAGE,
    what: str = "the dataset",
) -> np.ndarray:
    """[rows, 1 + max candidates] cosine scores; column 0 is the true caption, NaN where a row has
    fewer candidates. Each distinct image and each distinct caption is encoded once."""
    negative_columns = list(negative_columns) if negative_columns is not None else negative_columns_of(dataset)
    if not negative_columns:
        raise UserInputError(
            f"{what} has no candidate caption columns besides {caption_column!r} (expected "
            f"{columns.HARD_NEGATIVE!r}, {columns.HARD_NEGATIVE}_<i> or {NEGATIVES_LIST_COLUMN!r}); "
            f"found {dataset.column_names}"
        )
    columns.require_columns(dataset, [image_column, caption_column, *negative_columns], what)
    if len(dataset) == 0:
        raise UserInputError(f"{what} has no rows")
    candidates = _candidates(dataset, caption_column, negative_columns, what)
    slot = {t: i for i, t in enumerate(dict.fromkeys(t for row in candidates for t in row if t is not None))}
    text_embeddings = scorer.encode_texts(list(slot))
    image_embeddings, image_slot = scorer.embed_images(dataset, image_column)
    width = max(len(row) for row in candidates)
    index = torch.full((len(candidates), width), -1, dtype=torch.long)
    for row, texts in enumerate(candidates):
        index[row, : len(texts)] = torch.tensor([slot[t] if t is not None else -1 for t in texts])
    rows_image = torch.from_numpy(image_slot)
    scores = torch.empty(index.shape, dtype=torch.float64)
    for start in range(0, len(candidates), 4096):  # blocks: COCO-Order has 25k rows x 5 captions
        block = slice(start, start + 4096)
        texts = text_embeddings[index[block].clamp(min=0)]
        scores[block] = torch.einsum("rd,rkd->rk", image_embeddings[rows_image[block]], texts).double()
    scores[index < 0] = float("nan")
    return scores.numpy()


def selection_correct(scores: np.ndarray, ties_count_as_correct: bool = False) -> np.ndarray:
    """Per row: the true caption (column 0) beats every present candidate strictly, or, with
    `ties_count_as_correct`, is at least as high (`np.argmax` over a list with the true caption
    first, ARO's rule on COCO/Flickr30k-Order)."""
    others = np.where(np.isnan(scores[:, 1:]), -np.inf, scores[:, 1:])
    best_other = others.max(axis=1)
    return scores[:, 0] >= best_other if ties_count_as_correct else scores[:, 0] > best_other


@dataclass(frozen=True)
class MacroProtocol:
    """How a benchmark macro-averages a subset: accuracy per value of `column`, then the unweighted
    mean over the values with at least `min_group_size` rows that are not in `exclude` (see `aro.py`)."""

    column: str
    min_group_size: int = 1
    exclude: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"unweighted mean over {self.column!r} groups of their accuracy"]
        if self.min_group_size > 1:
            parts.append(f"groups with >= {self.min_group_size} rows")
        if self.exclude:
            parts.append(f"{len(self.exclude)} groups excluded")
        return ", ".join(parts)


def macro_accuracy(correct: np.ndarray, groups: Sequence, protocol: MacroProtocol) -> dict:
    """`macro_accuracy` and `num_groups` of per-row outcomes under `protocol` (empty if no group qualifies)."""
    labels = np.asarray([str(g) for g in groups])
    excluded = set(protocol.exclude)
    kept = [
        g for g in np.unique(labels) if g not in excluded and (labels == g).sum() >= protocol.min_group_size
    ]
    if not kept:
        return {}
    return {
        "macro_accuracy": float(np.mean([correct[labels == g].mean() for g in kept])),
        "num_groups": len(kept),
        "macro_protocol": protocol.describe(),
    }


def evaluate_caption_selection(
    scorer: ITMScorer,
    subsets: Mapping[str, Dataset] | Dataset,
    *,
    caption_column: str = columns.CAPTION,
    negative_columns: Sequence[str] | None = None,
    image_column: str = columns.IMAGE,
    categories: Mapping[str, Sequence[str]] | None = None,
    macro: Mapping[str, MacroProtocol] | None = None,
    true_caption_first: Sequence[str] = (),
    max_rows: int | None = None,
) -> dict:
    """Accuracy of picking the true caption among each row's candidates, per subset and aggregated.

    `subsets` maps a subset name (a dataset config such as `replace_att`) to its rows; a single
    `Dataset` is evaluated as `default`. `categories` adds named unweighted means over subsets (e.g.
    `SUGARCREPE_CATEGORIES`). `macro` maps a subset name to a `MacroProtocol`; a subset that has the
    protocol's column also gets `macro_accuracy` (ARO reports VG-Relation / VG-Attribution this way:
    pass `aro.ARO_MACRO`). `true_caption_first` names subsets whose benchmark code takes `np.argmax`
    over a candidate list with the true caption first (ARO's COCO/Flickr30k-Order,
    `aro.ARO_TRUE_CAPTION_FIRST`): there `accuracy` follows that code (a tie is right, so the figure
    compares with the paper's) and `accuracy_strict` (a tie is wrong) stands beside it.

    Returns {"task", "results": {subset: {accuracy, num_examples, num_candidates[, macro_accuracy,
    num_groups, macro_protocol]}}, "aggregates": {"mean(a,b,...)": ..., "pooled(a,b,...)": ..., category means},
    "tie_rule", "aggregation"}.
    """
    if isinstance(subsets, Dataset):
        subsets = {"default": subsets}
    results: dict[str, dict] = {}
    outcomes: dict[str, np.ndarray] = {}
    for name, dataset in subsets.items():
        if max_rows is not None:
            dataset = dataset.select(range(min(max_rows, len(dataset))))
        scores = selection_scores(scorer, dataset, caption_column, negative_columns, image_column, f"subset {name!r}")
        correct = selection_correct(scores, ties_count_as_correct=name in true_caption_first)
        outcomes[name] = correct
        counts = (~np.isnan(scores)).sum(axis=1)
        results[name] = {
            "accuracy": float(correct.mean()),
            "num_examples": int(correct.size),
            "num_candidates": int(counts.max()) if counts.min() == counts.max() else f"{counts.min()}-{counts.max()}",
        }
        if name in true_caption_first:
            results[name]["accuracy_strict"] = float(selection_correct(scores).mean())
        protocol = (macro or {}).get(name)
        if protocol is not None and protocol.column in dataset.column_names:
            results[name].update(macro_accuracy(correct, list(dataset[protocol.column]), protocol))

    aggregates: dict[str, dict] = {}
    names = list(results)
    if len(names) > 1:
        aggregates[f"mean({','.join(names)})"] = {
            "accuracy": float(np.mean([results[n]["accuracy"] for n in names])),
            "num_examples": int(sum(results[n]["num_examples"] for n in names)),
        }
        pooled = np.concatenate([outcomes[n] for n in names])
        aggregates[f"pooled({','.join(names)})"] = {"accuracy": float(pooled.mean()), "num_examples": int(pooled.size)}
    for category, members in (categories or {}).items():
        present = [m for m in members if m in results]
        if present:
            aggregates[f"{category}=mean({','.join(present)})"] = {
                "accuracy": float(np.mean([results[m]["accuracy"] for m in present])),
                "num_examples": int(sum(results[m]["num_examples"] for m in present)),
            }
    aggregation = (
        "accuracy per subset = fraction of its rows; mean(...) = unweighted mean of subset accuracies; "
        "pooled(...) = fraction over all rows of the subsets"
    )
    if any("macro_accuracy" in r for r in results.values()):
        aggregation += "; macro_accuracy: see each subset's macro_protocol"
    tie_rule = SELECTION_TIE_RULE
    argmax_subsets = [n for n in results if n in true_caption_first]
    if argmax_subsets:
        tie_rule += (
            f"; except `accuracy` of {', '.join(argmax_subsets)}: the benchmark code's np.argmax over candidates "
            "listed true caption first, so a tie is right (comparable with the paper); `accuracy_strict` beside it"
        )
    return {
        "task": CAPTION_SELECTION,
        "results": results,
        "aggregates": aggregates,
        "tie_rule": tie_rule,
        "aggregation": aggregation,
    }


def winoground_outcomes(
    c0_i0: np.ndarray, c1_i0: np.ndarray, c0_i1: np.ndarray, c1_i1: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-example text, image and group correctness (Thrush et al. 2022), strict inequalities.

    text: each image prefers its own caption; image: each caption prefers its own image.
    """
    text = (c0_i0 > c1_i0) & (c1_i1 > c0_i1)
    image = (c0_i0 > c0_i1) & (c1_i1 > c1_i0)
    return {"text_score": text, "image_score": image, "group_score": text & image}


def _winoground_rates(outcomes: Mapping[str, np.ndarray], mask: np.ndarray | None = None) -> dict:
    rates = {name: float(v[mask].mean() if mask is not None else v.mean()) for name, v in outcomes.items()}
    rates["num_examples"] = int(mask.sum() if mask is not None else next(iter(outcomes.values())).size)
    return rates


def evaluate_winoground(
    scorer: ITMScorer,
    dataset: str | Dataset = "facebook/winoground",
    split: str = "test",
    *,
    revision: str | None = None,
    max_rows: int | None = None,
) -> dict:
    """Winoground's text, image and group scores, overall and per `collapsed_tag` (Object, Relation, Both).

    `dataset` is a loaded `Dataset` in facebook/winoground's schema (`id, image_0, image_1,
    caption_0, caption_1, tag, secondary_tag, num_main_preds, collapsed_tag`) or a Hub id / folder.
    """
    name = dataset if isinstance(dataset, str) else "dataset"
    if isinstance(dataset, str) and Path(dataset).expanduser().is_dir():
        from ..eval_data import load_local_split

        dataset, _ = load_local_split(dataset, None, split)  # by content: a rebuilt copy is never stale
    if isinstance(dataset, str):
        try:
            dataset = load_dataset(dataset, split=split, revision=revision)
        except Exception as err:  # gated repo, no network, scripts: the user has to act either way
            raise UserInputError(
                f"cannot load {name!r} split {split!r} ({type(err).__name__}: {err}); facebook/winoground is "
                "gated: accept its terms on the Hub and log in (`hf auth login`), or pass a local copy"
            ) from err
    columns.require_columns(dataset, [*WINOGROUND_IMAGES, *WINOGROUND_CAPTIONS], f"Winoground ({name})")
    if max_rows is not None:
        dataset = dataset.select(range(min(max_rows, len(dataset))))
    if len(dataset) == 0:
        raise UserInputError(f"Winoground ({name}) has no rows")
    captions = [list(dataset[c]) for c in WINOGROUND_CAPTIONS]
    slot = {t: i for i, t in enumerate(dict.fromkeys(captions[0] + captions[1]))}
    text_embeddings = scorer.encode_texts(list(slot))
    caption_embeddings = [text_embeddings[torch.tensor([slot[t] for t in c])] for c in captions]
    image_embeddings = []
    for column in WINOGROUND_IMAGES:
        embeddings, image_slot = scorer.embed_images(dataset, column)
        image_embeddings.append(embeddings[torch.from_numpy(image_slot)])

    def cosine(c: int, i: int) -> np.ndarray:
        return (caption_embeddings[c] * image_embeddings[i]).sum(-1).double().numpy()

    outcomes = winoground_outcomes(cosine(0, 0), cosine(1, 0), cosine(0, 1), cosine(1, 1))
    result = {"task": WINOGROUND, "dataset": name, "split": split, **_winoground_rates(outcomes)}
    if WINOGROUND_TAG in dataset.column_names:
        tags = [str(t) for t in dataset[WINOGROUND_TAG]]
        labels = np.asarray(tags)
        result[f"by_{WINOGROUND_TAG}"] = {t: _winoground_rates(outcomes, labels == t) for t in sorted(set(tags))}
    result["tie_rule"] = WINOGROUND_TIE_RULE
    result["aggregation"] = "fraction of examples (pooled), overall and within each collapsed_tag"
    return result
