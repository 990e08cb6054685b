"""VL-CheckList (Zhao et al., 2022): objects, attributes and relations, one config per corpus file.

Its builder (`builder`), card text (`card.yaml`), scoring profile (`task`: both protocols and CE-CLIP's
Table 2 columns), CE-CLIP's printed figures of it (`figures.yaml`: Table 2 and its column of Table 5)
and its BibTeX (`references.bib`) live here; this declaration registers them with `hardpos build`, the
caption-selection task, the `compositional` and `ce_clip` suites, the published figures and the
bibliography. Light: nothing heavy is imported. It declares no `paper_source`: the builder finds the
annotation files through the yaml corpus, so no digest is pinned and no run is shown as measured on the
paper's data (`evaluation.paper_data`).
"""

from ...benchmark_registry import Benchmark, Buildable, images_dir_option, register, subsets_option

BENCHMARK = register(
    Benchmark(
        name="vl_checklist",
        build=Buildable(
            "VL-CheckList (Zhao et al. 2022): one config per corpus file, POS[0]/NEG[0]; non-commercial licence",
            f"{__name__}.builder:export_vl_checklist",
            (
                images_dir_option(
                    "folder holding the images under each corpus file's IMG_ROOT (e.g. vg/, hake/, swig/)",
                    required=True,
                ),
                subsets_option("corpus files to build, by config name (default: all present)", dest="files"),
            ),
            "github.com/om-ai-lab/VL-CheckList (corpus/v1/ and the data/ files it names)",
            upstream_required=True,
        ),
        task="caption_selection",
        profile=f"{__name__}.task:PROFILE",
        suites=("compositional", "ce_clip"),
        figures=f"{__name__}:figures.yaml",
        references=f"{__name__}:references.bib",
    )
)
