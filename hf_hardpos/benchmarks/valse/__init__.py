"""VALSE (Parcalabescu et al., ACL 2022): 11 pieces of caption/foil pairs, annotators' votes kept.

Its builder (`builder`), card text (`card.yaml`) and scoring profile (`task`: valid rows only and
CE-CLIP's Table 1 columns) live here; this declaration registers them with `hardpos build`, the
caption-selection task and the `compositional` and `ce_clip` suites. Light: nothing heavy is imported.
"""

from ...benchmark_registry import Benchmark, Buildable, images_dir_option, register, subsets_option

BENCHMARK = register(
    Benchmark(
        name="valse",
        build=Buildable(
            "VALSE (Parcalabescu et al. 2022): 11 pieces of caption/foil pairs, annotators' votes kept",
            f"{__name__}.builder:export_valse",
            (
                images_dir_option("one folder holding every VALSE image by file name", required=True),
                subsets_option("pieces to build (default: all 11)", dest="pieces"),
            ),
            "github.com/Heidelberg-NLP/VALSE (data/<piece>.json)",
            upstream_required=True,
        ),
        task="caption_selection",
        profile=f"{__name__}.task:PROFILE",
        suites=("compositional", "ce_clip"),
        paper_source=f"{__name__}.builder:PAPER_SOURCE",
    )
)
