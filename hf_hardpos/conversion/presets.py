"""`hardpos zoo`: the systems of the paper's Table 1 (plus CE-CLIP and CLIP-COCO) and how to convert each.

Facts from docs/checkpoints.md (read from each project's public code; the files themselves were not
inspected). The column that matters most is the activation: the open_clip baselines were trained
with QuickGELU, but the paper loaded them with open_clip's plain `ViT-B-32` config, i.e. GELU, so
its numbers for those rows are those of the GELU model. A preset converts with the paper's
activation (to reproduce Table 1); `--activation quick_gelu` gives the model as trained.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import citations
from ..backends.open_clip import OpenClipBackend
from ..errors import UserInputError
from .lora import TSVLC_ALPHA, TSVLC_RANK

NO_PUBLIC_RELEASE = "no public release"


@dataclass(frozen=True)
class Preset:
    name: str
    row: str  # the system as the paper's Table 1 names it
    weights: str  # where the weights are published, or NO_PUBLIC_RELEASE
    file_format: str
    open_clip_config: str
    trained_activation: str  # "quick_gelu", "gelu" or "unknown"
    paper_activation: str  # what the paper's evaluation code built (docs/checkpoints.md)
    lora: tuple[int, float] | None  # (rank, alpha) of unmerged LoRA, TSVLC's layout
    citation: str  # a key of hf_hardpos.citations.BIBTEX
    license: str
    note: str = ""


_OPENAI_TRAINED = "quick_gelu"
_UNLICENSED = "no license file in the code repository; ask the authors"
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "clip",
            "CLIP ViT-B/32",
            "Hub openai/clip-vit-base-patch32 (already HF format; OpenAI's ViT-B-32.pt converts too)",
            "HF",
            "ViT-B-32-quickgelu",
            _OPENAI_TRAINED,
            "quick_gelu",
            None,
            citations.CLIP,
            "MIT (OpenAI CLIP)",
            "use the Hub id directly; no conversion needed",
        ),
        Preset(
            "negclip",
            "NegCLIP",
            "Google Drive id 1ooVVPxB-tvptgmHlIMMFGV3Cg-IrhbRZ (negclip.pth)",
            "open_clip training checkpoint",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            None,
            citations.ARO,
            "MIT (ARO code repository)",
            "fine-tuned from OpenAI ViT-B/32",
        ),
        Preset(
            "crepe-swap",
            "CREPE-Swap",
            "probably SugarCrepe's Drive folder 1n2ZNldxBteltuqx__id43sQCyzq0of09 "
            "(ft5-swap; mapping unverified)",
            "open_clip state dict",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            None,
            citations.CREPE,
            "MIT (SugarCrepe code repository)",
        ),
        Preset(
            "crepe-replace",
            "CREPE-Replace",
            "probably SugarCrepe's Drive folder 1n2ZNldxBteltuqx__id43sQCyzq0of09 "
            "(ft5-replace; mapping unverified)",
            "open_clip state dict",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            None,
            citations.CREPE,
            "MIT (SugarCrepe code repository)",
        ),
        Preset(
            "svlc",
            "SVLC",
            "TSVLC README (one SVLC model)",
            "TSVLC checkpoint, unmerged LoRA",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            (TSVLC_RANK, TSVLC_ALPHA),
            citations.SVLC,
            _UNLICENSED,
        ),
        Preset(
            "svlc-pos",
            "SVLC+Pos",
            NO_PUBLIC_RELEASE,
            "TSVLC checkpoint, unmerged LoRA",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            (TSVLC_RANK, TSVLC_ALPHA),
            citations.SVLC,
            _UNLICENSED,
        ),
        Preset(
            "dac-llm",
            "DAC-LLM",
            "DAC README (DAC_LLM)",
            "TSVLC checkpoint, unmerged LoRA",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            (TSVLC_RANK, TSVLC_ALPHA),
            citations.DAC,
            _UNLICENSED,
        ),
        Preset(
            "dac-sam",
            "DAC-SAM",
            "DAC README (DAC_SAM)",
            "TSVLC checkpoint, unmerged LoRA",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            (TSVLC_RANK, TSVLC_ALPHA),
            citations.DAC,
            _UNLICENSED,
        ),
        Preset(
            "hn",
            "HN (the paper's)",
            NO_PUBLIC_RELEASE,
            "open_clip state dict",
            "ViT-B-32",
            "unknown",
            "gelu",
            None,
            citations.HARD_POSITIVES,
            "not released",
        ),
        Preset(
            "hp-hn",
            "HP+HN (the paper's; also the ratio models)",
            NO_PUBLIC_RELEASE,
            "open_clip state dict",
            "ViT-B-32",
            "unknown",
            "gelu",
            None,
            citations.HARD_POSITIVES,
            "not released",
        ),
        Preset(
            "clip-coco",
            "CLIP-COCO (CLIP fine-tuned on COCO)",
            NO_PUBLIC_RELEASE + " found (the paper loads a local replace/models/<name>.pt)",
            "open_clip state dict",
            "ViT-B-32",
            "unknown",
            "gelu",
            None,
            citations.HARD_POSITIVES,
            "not released",
        ),
        Preset(
            "ce-clip",
            "CE-CLIP (not a Table 1 row)",
            "Hub le723z/CE_CLIP (CE_CLIP.pt, unverified) or Google Drive id "
            "1DWPw3CtGh5cHz9bW_-iXRSG7BBUVl13K",
            "open_clip training checkpoint (DDP, module. prefix)",
            "ViT-B-32",
            _OPENAI_TRAINED,
            "gelu",
            None,
            citations.CE_CLIP,
            _UNLICENSED,
            "its README loads ViT-B-32 + path (GELU)",
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UserInputError(
            f"unknown --preset {name!r}; `hardpos zoo` lists: {', '.join(PRESETS)}"
        ) from None


ZOO_HEADER = (
    "preset",
    "Table 1 row",
    "weights",
    "format",
    "config",
    "trained act.",
    "paper evaluated",
    "LoRA",
    "cite",
    "license",
)


def zoo_rows() -> list[list[str]]:
    return [
        [
            p.name,
            p.row,
            p.weights,
            p.file_format,
            p.open_clip_config,
            p.trained_activation,
            p.paper_activation,
            f"r={p.lora[0]}, alpha={p.lora[1]:g}" if p.lora else "none",
            p.citation,
            p.license,
        ]
        for p in PRESETS.values()
    ]


# -- The paper's Table 8: more pretrained models, scored as published (no conversion needed) --------

# A route is the model backend that scores the row (`hf_hardpos.backends`: `hardpos eval --backend`), or none.
ROUTE_HF = "hf"  # --model HUB_ID: an HF-format copy of the weights exists
ROUTE_OPEN_CLIP = "open_clip"  # --model open_clip:NAME/TAG: only open_clip can build it ([openclip] extra)
ROUTE_NONE = "not supported"
_OPENAI_URL = "https://openaipublic.azureedge.net/clip/models/{}/{}.pt"  # the hex is the file's sha256
_OPENAI_LOADER = "OpenAI clip.load (QuickGELU; fp16 weights on CUDA)"
_MIT_OPENAI = "MIT (OpenAI CLIP)"
_MIT_LAION = "MIT (LAION model card)"


@dataclass(frozen=True)
class PretrainedPreset:
    """A row of the paper's Table 8 (Kamath et al., ECCV 2024, appendix): what to pass as `--model`.

    `model` is the `hardpos eval --model` value of `route`; `other_route` the other route's, where
    both exist (an HF copy of LAION weights can be checked against open_clip's own loading). `row`
    is the paper's row name, the key of its figures in `hf_hardpos.published.hard_positive`.
    Loaders and precisions are those of the paper's code (hard_positives@33addaa `model_zoo/__init__.py`).
    """

    name: str
    row: str
    route: str
    model: str
    weights: str
    paper_loader: str
    citation: str
    license: str
    other_route: str = ""
    note: str = ""


def _openai(
    name: str, row: str, digest: str, file: str, model: str, route: str, note: str = ""
) -> PretrainedPreset:
    return PretrainedPreset(
        name,
        row,
        route,
        model,
        _OPENAI_URL.format(digest, file),
        _OPENAI_LOADER,
        citations.CLIP,
        _MIT_OPENAI,
        note=note,
    )


def _laion(
    name: str, row: str, hub_id: str, open_clip_name: str, tag: str, note: str = ""
) -> PretrainedPreset:
    return PretrainedPreset(
        name,
        row,
        ROUTE_HF,
        hub_id,
        f"Hub {hub_id}",
        f'open_clip.create_model_and_transforms("{open_clip_name}", "{tag}") (fp32)',
        OpenClipBackend.citation,
        _MIT_LAION,
        other_route=f"open_clip:{open_clip_name}/{tag}",
        note="the HF copy is preprocessed by transformers, not torchvision; the open_clip route uses open_clip's "
        "own transforms" + note,
    )


# The DataComp repositories are the ones open_clip loads these tags from; their HF-format files were
# not checked here (no network): if one lacks config.json, its open_clip route is the one to use.
_DATACOMP = "; HF-format files of this repository not verified offline"


_RESNET = "ResNet image tower: CLIPModel cannot hold it; built QuickGELU, as OpenAI trained it"
PRETRAINED_PRESETS: dict[str, PretrainedPreset] = {
    p.name: p
    for p in (
        _openai(
            "clip-vit-b-16",
            "CLIP ViT-B/16",
            "5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f",
            "ViT-B-16",
            "openai/clip-vit-base-patch16",
            ROUTE_HF,
            "Hub copy by OpenAI (HF format)",
        ),
        _openai(
            "clip-vit-l-14",
            "CLIP ViT-L/14",
            "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836",
            "ViT-L-14",
            "openai/clip-vit-large-patch14",
            ROUTE_HF,
            "Hub copy by OpenAI (HF format)",
        ),
        _openai(
            "clip-rn50x16",
            "CLIP RN50x16",
            "52378b407f34354e150460fe41077663dd5b39c54cd0bfd2b27167a4a06ec9aa",
            "RN50x16",
            "open_clip:RN50x16/openai",
            ROUTE_OPEN_CLIP,
            _RESNET,
        ),
        _openai(
            "clip-rn50x64",
            "CLIP RN50x64",
            "be1cfb55d75a9666199fb2206c106743da0f6468c9d327f3e0d0a543a9919d9c",
            "RN50x64",
            "open_clip:RN50x64/openai",
            ROUTE_OPEN_CLIP,
            _RESNET,
        ),
        _openai(
            "clip-rn101",
            "CLIP RN101",
            "8fa8567bab74a42d41c5915025a8e4538c3bdbe8804a470a72f30b0d94fab599",
            "RN101",
            "open_clip:RN101/openai",
            ROUTE_OPEN_CLIP,
            _RESNET,
        ),
        _laion(
            "openclip-vit-h-14",
            "OpenCLIP ViT-H/14",
            "laion/CLIP-ViT-H-14-laion2B-s32B-b79K",
            "ViT-H-14",
            "laion2b_s32b_b79k",
        ),
        _laion(
            "openclip-vit-g-14",
            "OpenCLIP ViT-g/14",
            "laion/CLIP-ViT-g-14-laion2B-s34B-b88K",
            "ViT-g-14",
            "laion2b_s34b_b88k",
        ),
        _laion(
            "openclip-vit-bigg-14",
            "OpenCLIP ViT-bigG/14",
            "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k",
            "ViT-bigG-14",
            "laion2b_s39b_b160k",
        ),
        PretrainedPreset(
            "openclip-roberta-vit-b-32",
            "OpenCLIP RoBERTa-ViT-B/32",
            ROUTE_OPEN_CLIP,
            "open_clip:roberta-ViT-B-32/laion2b_s12b_b32k",
            "Hub laion/CLIP-ViT-B-32-roberta-base-laion2B-s12B-b32k (open_clip format)",
            'open_clip.create_model_and_transforms("roberta-ViT-B-32", "laion2b_s12b_b32k") (fp32)',
            OpenClipBackend.citation,
            _MIT_LAION,
            note="RoBERTa text tower: CLIPModel cannot hold it. The paper's code tokenized every model with "
            "clip.tokenize, feeding CLIP BPE ids to this RoBERTa tower (hard_positives@33addaa run_eval.py); scored "
            "here with the model's own RoBERTa tokenizer; --tokenizer clip reproduces the paper's tokenization",
        ),
        _laion(
            "datacomp-vit-b-32",
            "DataComp ViT-B/32",
            "laion/CLIP-ViT-B-32-DataComp.XL-s13B-b90K",
            "ViT-B-32",
            "datacomp_xl_s13b_b90k",
            _DATACOMP,
        ),
        _laion(
            "datacomp-vit-b-16",
            "DataComp ViT-B/16",
            "laion/CLIP-ViT-B-16-DataComp.XL-s13B-b90K",
            "ViT-B-16",
            "datacomp_xl_s13b_b90k",
            _DATACOMP,
        ),
        _laion(
            "datacomp-vit-l-14",
            "DataComp ViT-L/14",
            "laion/CLIP-ViT-L-14-DataComp.XL-s13B-b90K",
            "ViT-L-14",
            "datacomp_xl_s13b_b90k",
            _DATACOMP,
        ),
        PretrainedPreset(
            "xvlm-16m",
            "XVLM",
            ROUTE_NONE,
            "",
            "X-VLM's own release (github.com/zengyan-97/X-VLM, xvlm-pretrained-16m)",
            "X-VLM's own model code and checkpoint",
            citations.HARD_POSITIVES,
            "see the X-VLM repository",
            note="what it would take: X-VLM is a fusion model, not a dual encoder. The paper scored it as the ITM "
            "head's logit[:, 1] plus the ITC cosine, on images resized to 224x224 (bicubic, no centre crop). That "
            "needs X-VLM's code (Swin image encoder, BERT text encoder, cross-attention fusion) and a pairwise "
            "scorer: every (image, caption) pair through the fusion layers, so no per-input embedding cache",
        ),
    )
}
