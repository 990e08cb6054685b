"""BibTeX of every paper the package implements, evaluates on or converts from, kept once
(`references.bib` beside this module: the bibliography is data, in the format it is cited in).

Cards (dataset, model, metric) and loss modules pick entries by key with `cite`, so one paper is
always cited under one key with one text. The `evaluate_modules/<name>/` folders must build as Hub Spaces
without this package, so `metrics/generate.py` writes the entries they cite into them from here
(`tests/repository/test_metric_modules.py` regenerates them and checks the committed files are equal).
"""

from __future__ import annotations

from importlib.resources import files


def _entries(bibtex: str) -> dict[str, str]:
    """Each entry of a .bib text (entries separated by a blank line) under its key."""
    return {entry[entry.index("{") + 1 : entry.index(",")]: entry for entry in bibtex.strip().split("\n\n")}


BIBTEX: dict[str, str] = _entries((files("hf_hardpos") / "references.bib").read_text(encoding="utf-8"))

# Named keys, so a typo is an ImportError rather than a KeyError at card-rendering time.
HARD_POSITIVES = "kamath2024hard"
CLIP = "radford2021learning"
SVLC = "doveh2023teaching"
DAC = "doveh2023dense"
CE_CLIP = "zhang2024contrasting"
ARO = "yuksekgonul2023when"
CREPE = "ma2023crepe"
COCO = "lin2014microsoft"
SUGARCREPE = "hsieh2023sugarcrepe"
SUGARCREPE_PP = "dumpala2024sugarcrepepp"
WINOGROUND = "thrush2022winoground"
OPEN_CLIP = "ilharco2021openclip"
CLIP_BENCHMARK = "cherti2023reproducible"  # clip_benchmark asks to be cited with this paper


def cite(*keys: str) -> str:
    """The BibTeX entries for `keys`, in order, without repeats, separated by blank lines."""
    unknown = [k for k in keys if k not in BIBTEX]
    if unknown:
        raise KeyError(f"no BibTeX entry for {unknown}; known keys: {sorted(BIBTEX)}")
    return "\n\n".join(BIBTEX[k] for k in dict.fromkeys(keys))
