"""The paper's Table 10 (zero-shot retention) laid out from a suite's sections: our row, the paper's, and ours
minus it where our column was measured on the paper's data.

Why its own module: the layout, the columns it reads (matched by the data a section read, not by the suite
entry's name) and the rules for when a difference is shown are one concept, separate from running a suite
(`suite.SuiteReport.table` appends it).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..published import lookup, slip_note
from ..tables import render_table
from .paper_data import CLIP_BENCHMARK_HUB, data_differs, zero_shot_differs
from .section import Section
from .tasks.webdataset import retention_benchmark

# clip_benchmark's VTAB webdatasets (its benchmark/webdatasets.txt), the paper's Table 10 VTAB mean.
VTAB_TASKS = (
    "caltech101", "cifar10", "cifar100", "clevr_count_all", "clevr_closest_object_distance",
    "diabetic_retinopathy", "dmlab", "dsprites_label_orientation", "dsprites_label_x_position",
    "dsprites_label_y_position", "dtd", "eurosat", "kitti_closest_vehicle_distance", "flowers", "pets",
    "pcam", "resisc45", "smallnorb_label_azimuth", "smallnorb_label_elevation", "svhn",
)  # fmt: skip


# The paper's Table 10 (Kamath et al., ECCV 2024): zero-shot retention, one column per (dataset or
# group, metric), named as clip_benchmark names them (`suite.RETENTION`), in the printed table's column order.
RETENTION_COLUMNS = (
    ("ImageNet acc@1", "imagenet1k", "acc1"),
    ("ImageNet acc@5", "imagenet1k", "acc5"),
    ("COCO image R@1", "mscoco_captions", "image_retrieval_recall@1"),
    ("COCO text R@1", "mscoco_captions", "text_retrieval_recall@1"),
    ("Flickr image R@1", "flickr30k", "image_retrieval_recall@1"),
    ("Flickr text R@1", "flickr30k", "text_retrieval_recall@1"),
    ("VTAB acc@1", "vtab", "acc1"),
    ("VTAB acc@5", "vtab", "acc5"),
)


def retention_sections(sections: Mapping[str, Section]) -> dict[str, Section]:
    """Table 10's dataset -> the section that measured it, matched by the data the section read (its source,
    as `hardpos compare` matches it: `tasks.webdataset.retention_benchmark`), never by the suite entry's name."""
    found: dict[str, Section] = {}
    for section in sections.values():
        benchmark = retention_benchmark(section.source, "all") if section.source else None
        if benchmark is not None:
            found.setdefault(benchmark, section)
    return found


def retention_values(
    sections: Mapping[str, Section], group_means: Mapping[str, Mapping]
) -> dict[tuple[str, str], float]:
    """(dataset or group, metric) -> our fraction, for every `RETENTION_COLUMNS` cell that was measured."""
    values: dict[tuple[str, str], float] = {}
    measured = retention_sections(sections)
    for _, source, metric in RETENTION_COLUMNS:
        if source in group_means:
            value = group_means[source].get("values", {}).get(metric)
        else:
            section = measured.get(source)
            value = section.results.get("all", {}).get(metric) if section is not None else None
        if isinstance(value, float):
            values[(source, metric)] = value
    return values


def retention_differs(
    source: str,
    sections: Mapping[str, Section],
    group_means: Mapping[str, Mapping],
    max_rows: int | None = None,
) -> str | None:
    """Why our `source` column (a Table 10 dataset, or `vtab`) is not measured on the paper's data (None: it is):
    clip_benchmark's own Hub webdataset, every row, and for VTAB every one of its tasks (`paper_data`)."""
    if source != "vtab":
        section = retention_sections(sections).get(source)
        if section is None:
            return "not run"
        return data_differs(source, ["all"], section.results, section.provenance, max_rows)
    mean = group_means.get("vtab", {})
    if mean.get("missing") or mean.get("num_datasets") != len(VTAB_TASKS):
        return f"{mean.get('num_datasets', 0)} of the {len(VTAB_TASKS)} VTAB tasks"
    identities = {
        unit.get("dataset", {}).get("hub_id"): unit.get("dataset")
        for section in sections.values()
        for unit in section.provenance.values()
        if isinstance(unit, dict) and "dataset" in unit
    }
    for task in VTAB_TASKS:
        wanted = CLIP_BENCHMARK_HUB.format(f"vtab-{task}")
        if (why := zero_shot_differs(wanted, identities.get(wanted), max_rows)) is not None:
            return why
    return None


def retention_table(
    sections: Mapping[str, Section],
    group_means: Mapping[str, Mapping],
    paper_row: str | None,
    *,
    markdown: bool = False,
    max_rows: int | None = None,
) -> str:
    """Table 10's layout: our row, and the paper's row and ours minus it when `paper_row` has figures.

    Empty when no retention dataset was run. Cells are percent; VTAB is the unweighted mean over the
    VTAB tasks run (the line above the table names how many). A difference is shown only for a column
    measured on the paper's data (`retention_differs`); the note says why any other has none, and flags
    a printed figure the paper's own cells contradict (`published.slip_note`).
    """
    ours = retention_values(sections, group_means)
    if not ours:
        return ""
    header = ["zero-shot retention", *(name for name, _, _ in RETENTION_COLUMNS)]
    cells = {key: f"{100 * value:.2f}" for key, value in ours.items()}
    rows = [["ours", *(cells.get((s, m), "") for _, s, m in RETENTION_COLUMNS)]]
    sources, notes = set(), []
    if paper_row is not None:
        figures = {(s, m): lookup(paper_row, s, m) for _, s, m in RETENTION_COLUMNS}
        figures = {key: f for key, f in figures.items() if f is not None}
        if figures:
            differs = {
                s: retention_differs(s, sections, group_means, max_rows)
                for s in dict.fromkeys(s for _, s, _ in RETENTION_COLUMNS)
            }
            rows.append([f"paper: {paper_row}", *(f"{figures[(s, m)].value:.2f}" if (s, m) in figures else ""
                                                   for _, s, m in RETENTION_COLUMNS)])  # fmt: skip
            rows.append(["ours - paper (pp)", *(f"{100 * ours[(s, m)] - figures[(s, m)].value:+.2f}"
                                                if (s, m) in figures and (s, m) in ours and differs[s] is None else ""
                                                for _, s, m in RETENTION_COLUMNS)])  # fmt: skip
            sources = {f.source for f in figures.values()}
            notes = [
                f"no difference for {s}: {why}"
                for s, why in differs.items()
                if why is not None and any(key[0] == s for key in ours)
            ]
            notes.extend(f"slip: {n}" for f in figures.values() if (n := slip_note(f)) is not None)
    table = render_table(header, rows, markdown=markdown)
    note = "layout of Kamath et al. 2024 Table 10; percent; empty cells: not run" + (
        f"; paper row: {'; '.join(sorted(sources))}" if sources else ""
    )
    return "\n".join([table, note, *notes])
