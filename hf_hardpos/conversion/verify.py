"""Numerical proof that a converted `CLIPModel` computes what the open_clip model computes.

Both models get identical `pixel_values` and `input_ids` (no image processor or tokenizer in
between: those differ slightly by design, docs/checkpoints.md, Tokenisation and preprocessing), and the maximum absolute difference
of the unnormalised image features, text features and (log) logit scale is reported. The reference
comes from open_clip itself when it is importable (an optional extra: it cannot be imported beside
a CPU-only torch, docs/reference.md, Installation notes), or from features open_clip computed earlier (the test goldens).
"""

from __future__ import annotations

import torch

from ..provenance import versions
from .open_clip_config import OPEN_CLIP_DISTRIBUTION, OpenClipConfig

VERIFY_SEED = 0


def fixed_inputs(config: OpenClipConfig, seed: int = VERIFY_SEED) -> dict[str, torch.Tensor]:
    """Two random images and three token sequences (BOS ... EOS, zero padding as open_clip pads).

    Sequences of several lengths, one filling the whole context, so positions and the EOS pooling
    are all exercised; ids avoid the two special tokens, which are the vocabulary's last two.
    """
    generator = torch.Generator().manual_seed(seed)
    size, context, vocab = config.vision.image_size, config.text.context_length, config.text.vocab_size
    pixel_values = torch.randn(2, 3, size, size, generator=generator)
    input_ids = torch.zeros(3, context, dtype=torch.long)
    for row, length in enumerate((min(5, context), max(2, context // 2), context)):
        body = torch.randint(1, vocab - 2, (length - 2,), generator=generator)
        input_ids[row, :length] = torch.cat([torch.tensor([vocab - 2]), body, torch.tensor([vocab - 1])])
    return {"pixel_values": pixel_values, "input_ids": input_ids}


def _projected(output) -> torch.Tensor:
    return output if isinstance(output, torch.Tensor) else output.pooler_output


@torch.no_grad()
def clip_model_features(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Unnormalised projected features and the log logit scale of a `CLIPModel`, float32 on CPU."""
    model = model.eval()
    return {
        "image_features": _projected(model.get_image_features(pixel_values=inputs["pixel_values"])).float(),
        "text_features": _projected(model.get_text_features(input_ids=inputs["input_ids"])).float(),
        "logit_scale": model.logit_scale.detach().float().reshape(()),
    }


def max_abs_differences(
    model, inputs: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]
) -> dict[str, float]:
    """Max |converted - reference| per quantity, as Python floats (for JSON and the model card)."""
    ours = clip_model_features(model, inputs)
    return {
        f"max_abs_diff_{name}": float(
            (ours[name] - reference[name].float().reshape(ours[name].shape)).abs().max()
        )
        for name in ("image_features", "text_features", "logit_scale")
    }


def open_clip_unavailable_reason() -> str | None:
    """None when open_clip imports; else why not (recorded in the model card instead of a result)."""
    try:
        import open_clip  # noqa: F401
    except Exception as err:  # ImportError, or torchvision's operator error beside a CPU torch
        return f"open_clip is not importable here ({type(err).__name__}: {str(err).splitlines()[0][:120]})"
    return None


@torch.no_grad()
def verify_against_open_clip(
    open_clip_state: dict[str, torch.Tensor], config: OpenClipConfig, activation: str, model
) -> dict:
    """Build the same model in open_clip with `activation`, feed both the same inputs, compare.

    `open_clip_state` is the (LoRA-merged) open_clip state dict the converted weights came from.
    """
    from open_clip.model import CLIP

    reference_model = CLIP(**config.to_open_clip_dict(quick_gelu=activation == "quick_gelu")).eval()
    missing, unexpected = reference_model.load_state_dict(open_clip_state, strict=False)
    missing = [k for k in missing if k != "attn_mask"]
    if missing or unexpected:
        raise RuntimeError(
            f"open_clip refused the weights: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    inputs = fixed_inputs(config)
    reference = {
        "image_features": reference_model.encode_image(inputs["pixel_values"], normalize=False),
        "text_features": reference_model.encode_text(inputs["input_ids"], normalize=False),
        "logit_scale": reference_model.logit_scale.detach(),
    }
    return {
        **max_abs_differences(model, inputs, reference),
        "open_clip_version": versions(OPEN_CLIP_DISTRIBUTION)[OPEN_CLIP_DISTRIBUTION],
        "torch_version": versions()["torch"],
        "inputs": f"2 random images and 3 random token sequences (seed {VERIFY_SEED}), float32, CPU",
        "activation": activation,
    }
