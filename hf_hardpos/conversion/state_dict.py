"""Reading open_clip checkpoints and mapping their weights onto `CLIPModel` keys (docs/checkpoints.md).

Every key and shape is checked against what the config implies before anything is mapped: a
missing, unexpected or misshapen tensor is an error naming the open_clip key, never a model that
loads with part of its weights left at random initialisation.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path

import torch

from ..errors import UserInputError
from .archive import check_zip_sizes
from .open_clip_config import OpenClipConfig
from .record import DDP_PREFIX_REMOVED, OPENAI_ARCHIVE, PLAIN_STATE_DICT, TRAINING_CHECKPOINT

# Entries of a checkpoint that are not weights: the causal mask buffer (older open_clip saved it)
# and the scalars of OpenAI's TorchScript archives.
NON_WEIGHT_KEYS = ("attn_mask", "input_resolution", "context_length", "vocab_size")


def is_torchscript(path: str | Path) -> bool:
    """True for a TorchScript archive (OpenAI's `ViT-B-32.pt`): a zip holding compiled `code/`."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.split("/", 1)[-1].startswith("code/") for name in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def load_state_dict(path: str | Path) -> tuple[dict[str, torch.Tensor], str]:
    """The weights of a checkpoint file, float32, and what kind of file it was.

    Reads OpenAI's TorchScript archives, plain state dicts and open_clip training checkpoints
    (`{"epoch", "name", "state_dict", "optimizer"}`, `module.` prefixes from DDP). Loaded with
    `weights_only=True`: a checkpoint is data, and unpickling arbitrary objects would run code.
    """
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"checkpoint {path}: no such file")
    if is_torchscript(path):
        from .openai import load_torchscript_state_dict

        return load_torchscript_state_dict(path), OPENAI_ARCHIVE
    check_zip_sizes(path)  # what torch.load would decompress, bounded before it reads
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise UserInputError(
            f"checkpoint {path}: holds Python objects other than tensors and plain containers, which are not "
            f"loaded (unpickling could run code). Re-save its state dict with torch.save(state_dict). ({err})"
        ) from err
    except Exception as err:  # a truncated or foreign file
        raise UserInputError(f"checkpoint {path}: cannot be read by torch.load: {err}") from err
    return unwrap(obj, str(path))


def unwrap(obj, where: str) -> tuple[dict[str, torch.Tensor], str]:
    """Take the state dict out of a training checkpoint and drop DDP's `module.` prefix."""
    kind = PLAIN_STATE_DICT
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj, kind = obj["state_dict"], TRAINING_CHECKPOINT
    if not isinstance(obj, dict) or not obj:
        raise UserInputError(
            f"checkpoint {where}: expected a state dict (a dict of tensors), got {type(obj).__name__}"
        )
    not_tensors = [k for k, v in obj.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise UserInputError(
            f"checkpoint {where}: entries {not_tensors[:5]} are not tensors; expected a state dict or a training "
            "checkpoint with a 'state_dict' entry"
        )
    if all(k.startswith("module.") for k in obj):
        obj, kind = {k[len("module.") :]: v for k, v in obj.items()}, kind + DDP_PREFIX_REMOVED
    state = {
        k: v.float() if v.is_floating_point() else v
        for k, v in obj.items()
        if k.split(".")[-1] not in NON_WEIGHT_KEYS
    }
    return state, kind


def _block_shapes(prefix: str, width: int, mlp_width: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}ln_1.weight": (width,),
        f"{prefix}ln_1.bias": (width,),
        f"{prefix}attn.in_proj_weight": (3 * width, width),
        f"{prefix}attn.in_proj_bias": (3 * width,),
        f"{prefix}attn.out_proj.weight": (width, width),
        f"{prefix}attn.out_proj.bias": (width,),
        f"{prefix}ln_2.weight": (width,),
        f"{prefix}ln_2.bias": (width,),
        f"{prefix}mlp.c_fc.weight": (mlp_width, width),
        f"{prefix}mlp.c_fc.bias": (mlp_width,),
        f"{prefix}mlp.c_proj.weight": (width, mlp_width),
        f"{prefix}mlp.c_proj.bias": (width,),
    }


def expected_shapes(config: OpenClipConfig) -> dict[str, tuple[int, ...]]:
    """Every open_clip key the config implies, with its shape."""
    v, t = config.vision, config.text
    grid = v.image_size // v.patch_size
    shapes: dict[str, tuple[int, ...]] = {
        "visual.conv1.weight": (v.width, 3, v.patch_size, v.patch_size),
        "visual.class_embedding": (v.width,),
        "visual.positional_embedding": (grid * grid + 1, v.width),
        "visual.ln_pre.weight": (v.width,),
        "visual.ln_pre.bias": (v.width,),
        "visual.ln_post.weight": (v.width,),
        "visual.ln_post.bias": (v.width,),
        "visual.proj": (v.width, config.embed_dim),
        "token_embedding.weight": (t.vocab_size, t.width),
        "positional_embedding": (t.context_length, t.width),
        "ln_final.weight": (t.width,),
        "ln_final.bias": (t.width,),
        "text_projection": (t.width, config.embed_dim),
        "logit_scale": (),
    }
    for n in range(v.layers):
        shapes.update(_block_shapes(f"visual.transformer.resblocks.{n}.", v.width, v.mlp_width))
    for n in range(t.layers):
        shapes.update(_block_shapes(f"transformer.resblocks.{n}.", t.width, t.mlp_width))
    return shapes


def check_state_dict(state: dict[str, torch.Tensor], config: OpenClipConfig, where: str) -> None:
    """Refuse missing, unexpected and misshapen keys, naming them and the config they contradict."""
    expected = expected_shapes(config)
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        hint = ""
        if any(k.startswith("visual.layer") or k.startswith("visual.attnpool") for k in unexpected):
            hint = " (a ResNet vision tower: not a CLIPModel)"
        elif any(k.startswith(("text_decoder.", "text.")) for k in unexpected):
            hint = " (a CoCa or custom-text model: not a CLIPModel)"
        elif any(".resblocks." in k for k in unexpected):
            hint = " (more layers, or extra per-block modules, than --config says)"
        raise UserInputError(
            f"checkpoint {where}: {len(unexpected)} unexpected key(s) for config {config.source!r}, e.g. "
            f"{unexpected[:5]}{hint}; refusing to drop weights"
        )
    if missing:
        raise UserInputError(
            f"checkpoint {where}: {len(missing)} key(s) missing for config {config.source!r}, e.g. {missing[:5]}; "
            "is --config the architecture this checkpoint was trained with?"
        )
    for key, shape in expected.items():
        got = tuple(state[key].shape)
        if got != shape and not (shape == () and got == (1,)):
            raise UserInputError(
                f"checkpoint {where}: {key} has shape {list(got)} but config {config.source!r} implies {list(shape)}; "
                "pass the --config this checkpoint was trained with"
            )


_DIRECT = {
    "visual.conv1.weight": "vision_model.embeddings.patch_embedding.weight",
    "visual.class_embedding": "vision_model.embeddings.class_embedding",
    "visual.positional_embedding": "vision_model.embeddings.position_embedding.weight",
    "visual.ln_pre.weight": "vision_model.pre_layrnorm.weight",
    "visual.ln_pre.bias": "vision_model.pre_layrnorm.bias",
    "visual.ln_post.weight": "vision_model.post_layernorm.weight",
    "visual.ln_post.bias": "vision_model.post_layernorm.bias",
    "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
    "positional_embedding": "text_model.embeddings.position_embedding.weight",
    "ln_final.weight": "text_model.final_layer_norm.weight",
    "ln_final.bias": "text_model.final_layer_norm.bias",
}
_TRANSPOSED = {"visual.proj": "visual_projection.weight", "text_projection": "text_projection.weight"}
_BLOCK = {
    "attn.out_proj.weight": "self_attn.out_proj.weight",
    "attn.out_proj.bias": "self_attn.out_proj.bias",
    "ln_1.weight": "layer_norm1.weight",
    "ln_1.bias": "layer_norm1.bias",
    "ln_2.weight": "layer_norm2.weight",
    "ln_2.bias": "layer_norm2.bias",
    "mlp.c_fc.weight": "mlp.fc1.weight",
    "mlp.c_fc.bias": "mlp.fc1.bias",
    "mlp.c_proj.weight": "mlp.fc2.weight",
    "mlp.c_proj.bias": "mlp.fc2.bias",
}
_BLOCK_KEY = re.compile(r"(visual\.)?transformer\.resblocks\.(\d+)\.(.+)")


def to_clip_state_dict(
    state: dict[str, torch.Tensor], config: OpenClipConfig, where: str
) -> dict[str, torch.Tensor]:
    """`CLIPModel` weights from a checked open_clip state dict: renames, transposes, q/k/v split."""
    check_state_dict(state, config, where)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        value = value.float().contiguous()
        if key in _DIRECT:
            out[_DIRECT[key]] = value
        elif key in _TRANSPOSED:
            out[_TRANSPOSED[key]] = value.t().contiguous()
        elif key == "logit_scale":
            out["logit_scale"] = value.reshape(())
        else:
            match = _BLOCK_KEY.fullmatch(key)
            assert match is not None, key  # check_state_dict admitted only expected keys
            tower = "vision_model" if match.group(1) else "text_model"
            prefix = f"{tower}.encoder.layers.{match.group(2)}."
            rest = match.group(3)
            if rest in ("attn.in_proj_weight", "attn.in_proj_bias"):
                kind = "weight" if rest.endswith("weight") else "bias"
                for name, part in zip(("q", "k", "v"), value.chunk(3, dim=0)):
                    out[f"{prefix}self_attn.{name}_proj.{kind}"] = part.contiguous()
            else:
                out[prefix + _BLOCK[rest]] = value
    return out


def load_into_clip_model(model, clip_state: dict[str, torch.Tensor], where: str) -> None:
    """Load mapped weights; any parameter left unset or any leftover tensor is an error (never partial)."""
    expected = model.state_dict()
    buffers_ok = {k for k in expected if k.endswith("position_ids")}  # index buffers CLIPModel creates itself
    missing = [k for k in expected if k not in clip_state and k not in buffers_ok]
    unexpected = [k for k in clip_state if k not in expected]
    wrong = [
        k for k in clip_state if k in expected and tuple(expected[k].shape) != tuple(clip_state[k].shape)
    ]
    if missing or unexpected or wrong:
        raise UserInputError(
            f"checkpoint {where}: the mapped weights do not fit CLIPModel (missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}, wrong shape {wrong[:5]})"
        )
    model.load_state_dict(clip_state, strict=False)
