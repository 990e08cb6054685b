"""open_clip model configs (a model name or a config JSON) and their `CLIPConfig` equivalent.

Why the config is an input: attention heads cannot be read from a state dict's shapes (open_clip
uses width // head_width, and configs may set `head_width` or `heads`), and the activation
(`quick_gelu`) is not stored anywhere in the weights. Options that `CLIPModel` has no equivalent
for (docs/checkpoints.md) are refused by name, so a conversion never silently drops a computation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import UserInputError

ACTIVATIONS = ("quick_gelu", "gelu")
OPEN_CLIP_DISTRIBUTION = "open_clip_torch"  # the name open_clip is installed under (its version is recorded)
LAYER_NORM_EPS = 1e-5

# open_clip's own JSONs (src/open_clip/model_configs) for the ViT CLIPs people fine-tune, kept as the
# data file they are upstream; other names are looked up in an importable open_clip.
_BASE_CONFIGS: dict[str, dict] = json.loads(
    Path(__file__).with_name("open_clip_model_configs.json").read_text(encoding="utf-8")
)
KNOWN_CONFIGS: dict[str, dict] = {
    **_BASE_CONFIGS,
    **{f"{name}-quickgelu": {**cfg, "quick_gelu": True} for name, cfg in _BASE_CONFIGS.items()},
}

# Option -> the value that means "off" (anything else is refused: CLIPModel cannot compute it).
_REFUSED_COMMON = {
    "ls_init_value": None,  # LayerScale
    "final_ln_after_pool": False,
    "qk_norm": False,
    "scaled_cosine_attn": False,
    "scale_heads": False,
    "scale_attn_inner": False,
    "scale_attn": False,
    "scale_fc": False,
    "act_kwargs": None,
}
_REFUSED_VISION = {
    **_REFUSED_COMMON,
    "attentional_pool": False,
    "no_ln_pre": False,
    "timm_model_name": None,  # a timm tower, not a CLIP ViT
    "global_average_pool": False,  # open_clip 2.x spelling of pool_type="avg"
    "input_patchnorm": False,
}
_REFUSED_TEXT = {
    **_REFUSED_COMMON,
    "embed_cls": False,
    "no_causal_mask": False,
    "proj_bias": False,
    "hf_model_name": None,  # a Hugging Face text tower (e.g. RoBERTa), not CLIP's
    "hf_tokenizer_name": None,  # a non-CLIP tokenizer
}
# Options that must hold one value CLIPModel computes.
_REQUIRED_VALUES_VISION = {
    "pool_type": ("tok",),
    "pos_embed_type": ("learnable",),
    "block_type": (None, "default"),
}
_REQUIRED_VALUES_TEXT = {"pool_type": ("argmax",), "proj_type": ("linear",), "block_type": (None, "default")}
# Options with no effect on an inference forward pass of a supported model.
_IGNORED_VISION = {
    "patch_dropout",
    "output_tokens",
    "attn_pooler_queries",
    "attn_pooler_heads",
    "timm_model_pretrained",
    "timm_pool",
    "timm_proj",
    "timm_proj_bias",
    "timm_drop",
    "timm_drop_path",
}
_IGNORED_TEXT = {
    "output_tokens",
    "pad_id",
    "eos_id",
    "tokenizer_mode",
    "tokenizer_kwargs",
    "hf_model_pretrained",
    "hf_proj_type",
    "hf_pooler_type",
}
_SHAPE_VISION = {"layers", "width", "head_width", "mlp_ratio", "patch_size", "image_size", "norm_kwargs"}
_SHAPE_TEXT = {"context_length", "vocab_size", "width", "heads", "layers", "mlp_ratio", "norm_kwargs"}
_TOP_LEVEL = {
    "embed_dim",
    "quick_gelu",
    "vision_cfg",
    "text_cfg",
    "init_logit_scale",
    "custom_text",
    "cast_dtype",
}


@dataclass(frozen=True)
class VisionTower:
    width: int
    layers: int
    patch_size: int
    image_size: int
    heads: int
    mlp_width: int


@dataclass(frozen=True)
class TextTower:
    width: int
    layers: int
    heads: int
    mlp_width: int
    context_length: int
    vocab_size: int


@dataclass(frozen=True)
class OpenClipConfig:
    """The architecture of an open_clip ViT CLIP, in the terms both libraries share."""

    source: str  # the model name or JSON it came from, for the model card
    embed_dim: int
    quick_gelu: bool  # the activation the config declares (what the model was built with)
    vision: VisionTower
    text: TextTower

    @property
    def activation(self) -> str:
        return "quick_gelu" if self.quick_gelu else "gelu"

    def to_dict(self) -> dict:
        return asdict(self)

    def to_open_clip_dict(self, quick_gelu: bool | None = None) -> dict:
        """An open_clip model-config dict of this architecture (for building it in open_clip)."""
        return {
            "embed_dim": self.embed_dim,
            "quick_gelu": self.quick_gelu if quick_gelu is None else quick_gelu,
            "vision_cfg": {
                "image_size": self.vision.image_size,
                "layers": self.vision.layers,
                "width": self.vision.width,
                "head_width": self.vision.width // self.vision.heads,
                "mlp_ratio": self.vision.mlp_width / self.vision.width,
                "patch_size": self.vision.patch_size,
            },
            "text_cfg": {
                "context_length": self.text.context_length,
                "vocab_size": self.text.vocab_size,
                "width": self.text.width,
                "heads": self.text.heads,
                "layers": self.text.layers,
                "mlp_ratio": self.text.mlp_width / self.text.width,
            },
        }

    def to_clip_config(self, activation: str, bos_token_id: int, eos_token_id: int, pad_token_id: int):
        """The `CLIPConfig` computing the same function with `activation` ("quick_gelu" or "gelu")."""
        from transformers import CLIPConfig

        if activation not in ACTIVATIONS:
            raise UserInputError(f"--activation must be one of {ACTIVATIONS}, got {activation!r}")
        return CLIPConfig(
            projection_dim=self.embed_dim,
            text_config={
                "vocab_size": self.text.vocab_size,
                "hidden_size": self.text.width,
                "intermediate_size": self.text.mlp_width,
                "num_hidden_layers": self.text.layers,
                "num_attention_heads": self.text.heads,
                "max_position_embeddings": self.text.context_length,
                "hidden_act": activation,
                "layer_norm_eps": LAYER_NORM_EPS,
                "projection_dim": self.embed_dim,
                "bos_token_id": bos_token_id,
                "eos_token_id": eos_token_id,
                "pad_token_id": pad_token_id,
            },
            vision_config={
                "hidden_size": self.vision.width,
                "intermediate_size": self.vision.mlp_width,
                "num_hidden_layers": self.vision.layers,
                "num_attention_heads": self.vision.heads,
                "image_size": self.vision.image_size,
                "patch_size": self.vision.patch_size,
                "num_channels": 3,
                "hidden_act": activation,
                "layer_norm_eps": LAYER_NORM_EPS,
                "projection_dim": self.embed_dim,
            },
        )


def _check_options(section: str, cfg: dict, refused: dict, required: dict, ignored: set, shape: set) -> None:
    for key, value in cfg.items():
        where = f"{section}.{key}" if section else key
        if key in refused:
            if value != refused[key] and not (refused[key] is None and value in ({}, False)):
                raise UserInputError(
                    f"open_clip option {where}={value!r} has no CLIPModel equivalent: this model cannot be "
                    "converted to a CLIPModel without changing what it computes (docs/checkpoints.md)"
                )
        elif key in required:
            if value not in required[key]:
                raise UserInputError(
                    f"open_clip option {where}={value!r} is not supported: CLIPModel computes only "
                    f"{' or '.join(repr(v) for v in required[key])}"
                )
        elif key not in ignored and key not in shape:
            raise UserInputError(
                f"unknown open_clip option {where!r} in the model config: refusing to guess what it does; "
                "remove it if it has no effect at inference"
            )


def _norm_eps(section: str, cfg: dict) -> None:
    norm = cfg.get("norm_kwargs") or {}
    eps = norm.get("eps", LAYER_NORM_EPS)
    if set(norm) - {"eps"} or abs(eps - LAYER_NORM_EPS) > 0:
        raise UserInputError(
            f"open_clip option {section}.norm_kwargs={norm!r} is not supported (CLIPModel: eps 1e-5)"
        )


def _int(section: str, cfg: dict, key: str, default=None) -> int:
    value = cfg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UserInputError(f"open_clip config {section}.{key} must be a positive integer, got {value!r}")
    return value


def parse_open_clip_config(cfg: dict, source: str) -> OpenClipConfig:
    """Validate an open_clip model-config dict and return its architecture, refusing what CLIPModel lacks."""
    if not isinstance(cfg, dict):
        raise UserInputError(f"{source}: an open_clip model config must be a JSON object")
    if "multimodal_cfg" in cfg:
        raise UserInputError(
            f"{source}: a CoCa config (multimodal_cfg) is not a CLIPModel; cannot convert it"
        )
    for key in cfg:
        if key not in _TOP_LEVEL:
            if key == "init_logit_bias":
                if cfg[key] is None:
                    continue
                raise UserInputError(
                    f"{source}: open_clip option init_logit_bias (a SigLIP-style logit bias) has no CLIPModel "
                    "equivalent"
                )
            raise UserInputError(
                f"{source}: unknown top-level open_clip option {key!r}; refusing to guess what it does"
            )
    if cfg.get("custom_text"):
        raise UserInputError(
            f"{source}: open_clip option custom_text=True (a separate text tower) is not supported"
        )
    missing = [k for k in ("embed_dim", "vision_cfg", "text_cfg") if k not in cfg]
    if missing:
        raise UserInputError(f"{source}: the open_clip model config lacks {missing}")
    vision_cfg, text_cfg = dict(cfg["vision_cfg"]), dict(cfg["text_cfg"])
    if isinstance(vision_cfg.get("layers"), (list, tuple)):
        raise UserInputError(
            f"{source}: vision_cfg.layers={vision_cfg['layers']!r} is a ResNet tower; only ViT towers convert to "
            "CLIPModel"
        )
    _check_options(
        "vision_cfg", vision_cfg, _REFUSED_VISION, _REQUIRED_VALUES_VISION, _IGNORED_VISION, _SHAPE_VISION
    )
    _check_options("text_cfg", text_cfg, _REFUSED_TEXT, _REQUIRED_VALUES_TEXT, _IGNORED_TEXT, _SHAPE_TEXT)
    _norm_eps("vision_cfg", vision_cfg)
    _norm_eps("text_cfg", text_cfg)

    image_size = vision_cfg.get("image_size", 224)
    if isinstance(image_size, (list, tuple)):
        if len(set(image_size)) != 1:
            raise UserInputError(
                f"{source}: vision_cfg.image_size={image_size!r} is not square; CLIPModel needs square images"
            )
        image_size = image_size[0]
    vision_width = _int("vision_cfg", vision_cfg, "width", 768)
    head_width = _int("vision_cfg", vision_cfg, "head_width", 64)
    if vision_width % head_width:
        raise UserInputError(
            f"{source}: vision_cfg.width {vision_width} is not a multiple of head_width {head_width}"
        )
    text_width = _int("text_cfg", text_cfg, "width", 512)
    text_heads = _int("text_cfg", text_cfg, "heads", 8)
    if text_width % text_heads:
        raise UserInputError(f"{source}: text_cfg.width {text_width} is not a multiple of heads {text_heads}")
    patch_size = _int("vision_cfg", vision_cfg, "patch_size", 16)
    if image_size % patch_size:
        raise UserInputError(
            f"{source}: vision_cfg.image_size {image_size} is not a multiple of patch_size {patch_size}"
        )
    return OpenClipConfig(
        source=source,
        embed_dim=_int("", cfg, "embed_dim"),
        quick_gelu=bool(cfg.get("quick_gelu", False)),
        vision=VisionTower(
            width=vision_width,
            layers=_int("vision_cfg", vision_cfg, "layers", 12),
            patch_size=patch_size,
            image_size=int(image_size),
            heads=vision_width // head_width,
            mlp_width=int(vision_width * float(vision_cfg.get("mlp_ratio", 4.0))),
        ),
        text=TextTower(
            width=text_width,
            layers=_int("text_cfg", text_cfg, "layers", 12),
            heads=text_heads,
            mlp_width=int(text_width * float(text_cfg.get("mlp_ratio", 4.0))),
            context_length=_int("text_cfg", text_cfg, "context_length", 77),
            vocab_size=_int("text_cfg", text_cfg, "vocab_size", 49408),
        ),
    )


def load_open_clip_config(name_or_json: str | Path | dict) -> OpenClipConfig:
    """An open_clip model name (`ViT-B-32`, `ViT-B-32-quickgelu`, ...), a JSON file, inline JSON, or a dict."""
    if isinstance(name_or_json, dict):
        return parse_open_clip_config(name_or_json, "the given config dict")
    text = str(name_or_json).strip()
    if text.startswith("{"):
        try:
            return parse_open_clip_config(json.loads(text), "the inline --config JSON")
        except json.JSONDecodeError as err:
            raise UserInputError(f"--config is not valid JSON: {err}") from err
    path = Path(text)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise UserInputError(f"--config {text}: no such file")
        try:
            return parse_open_clip_config(json.loads(path.read_text()), str(path))
        except json.JSONDecodeError as err:
            raise UserInputError(f"--config {path}: not valid JSON: {err}") from err
    if text in KNOWN_CONFIGS:
        return parse_open_clip_config(KNOWN_CONFIGS[text], text)
    if text.startswith(("RN", "coca_")):
        raise UserInputError(
            f"--config {text}: ResNet and CoCa models are not CLIPModel; cannot convert them"
        )
    try:
        import open_clip  # optional: knows every name it ships
    except Exception:  # ImportError, or torchvision failing to load beside a CPU torch
        open_clip = None
    if open_clip is not None and open_clip.get_model_config(text) is not None:
        return parse_open_clip_config(open_clip.get_model_config(text), text)
    raise UserInputError(
        f"--config {text!r} is not a known open_clip model name (known here: {', '.join(sorted(KNOWN_CONFIGS))}) "
        "nor a JSON file; pass the model config JSON from open_clip's model_configs/"
    )


def config_from_openai_state_dict(state: dict, quick_gelu: bool = True) -> OpenClipConfig:
    """OpenAI's archives carry no config: infer it from shapes, heads at OpenAI's width // 64."""
    try:
        conv = state["visual.conv1.weight"]
        vision_width, patch = conv.shape[0], conv.shape[-1]
        grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
        vision_layers = sum(
            1 for k in state if k.startswith("visual.") and k.endswith(".attn.in_proj_weight")
        )
        text_width = state["ln_final.weight"].shape[0]
        text_layers = sum(
            1 for k in state if k.startswith("transformer.") and k.endswith(".attn.in_proj_weight")
        )
        cfg = {
            "embed_dim": int(state["text_projection"].shape[1]),
            "quick_gelu": quick_gelu,
            "vision_cfg": {
                "image_size": int(patch * grid),
                "layers": vision_layers,
                "width": int(vision_width),
                "patch_size": int(patch),
                "mlp_ratio": state["visual.transformer.resblocks.0.mlp.c_fc.weight"].shape[0] / vision_width,
            },
            "text_cfg": {
                "context_length": int(state["positional_embedding"].shape[0]),
                "vocab_size": int(state["token_embedding.weight"].shape[0]),
                "width": int(text_width),
                "heads": max(1, int(text_width) // 64),
                "layers": text_layers,
                "mlp_ratio": state["transformer.resblocks.0.mlp.c_fc.weight"].shape[0] / text_width,
            },
        }
    except KeyError as err:
        raise UserInputError(
            f"cannot infer the architecture of this OpenAI-format checkpoint: key {err.args[0]!r} is missing "
            "(ResNet OpenAI models are not CLIPModel; for others pass --config)"
        ) from err
    return parse_open_clip_config(cfg, "inferred from the OpenAI checkpoint's shapes (heads = width // 64)")
