"""One open_clip / OpenAI / TSVLC checkpoint -> one Hub-ready `CLIPModel` folder.

The folder holds the weights (safetensors), the config, a `CLIPProcessor` (CLIP BPE tokenizer with
`model_max_length` = the context length; image processor sized from the config, OpenAI's
mean/std, bicubic), a model card saying what was converted and how, and `conversion.json` with
the same facts for programs (the conversion cache uses it as its "complete" marker).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserInputError
from ..provenance import sha256_file
from .lora import TSVLC_ALPHA, TSVLC_RANK, LoraMerge, has_lora, merge_tsvlc_lora
from .open_clip_config import (
    ACTIVATIONS,
    OpenClipConfig,
    config_from_openai_state_dict,
    load_open_clip_config,
)
from .record import MARKER, OPENAI_ARCHIVE
from .state_dict import load_into_clip_model, load_state_dict, to_clip_state_dict
from .tokenizer import load_clip_tokenizer, tokenizer_source

NOT_VERIFIED = (
    "not requested (`hardpos convert --no-verify`, or converted for `hardpos eval`, which does not verify)"
)


@dataclass
class ConversionResult:
    """What a conversion did; saved as `conversion.json` and rendered in the model card."""

    output_dir: Path
    checkpoint: str
    sha256: str
    checkpoint_kind: str
    config: OpenClipConfig
    activation: str
    activation_reason: str
    tokenizer: str
    lora: LoraMerge | None = None
    verification: dict | None = None
    verification_skipped: str | None = None
    preset: str | None = None

    def to_dict(self) -> dict:
        return {
            "checkpoint": self.checkpoint,
            "sha256": self.sha256,
            "checkpoint_kind": self.checkpoint_kind,
            "open_clip_config": self.config.to_dict(),
            "activation": self.activation,
            "activation_reason": self.activation_reason,
            "tokenizer": self.tokenizer,
            "lora": None
            if self.lora is None
            else {
                "rank": self.lora.rank,
                "alpha": self.lora.alpha,
                "merged_weights": self.lora.merged_weights,
            },
            "verification": self.verification,
            "verification_skipped": self.verification_skipped,
            "preset": self.preset,
        }


def _activation(config: OpenClipConfig, requested: str | None) -> tuple[str, str]:
    if requested is None:
        return config.activation, (
            f"from the open_clip config ({config.source}: quick_gelu={config.quick_gelu}), i.e. the model as built "
            "by open_clip with this config"
        )
    if requested not in ACTIVATIONS:
        raise UserInputError(f"--activation must be one of {ACTIVATIONS}, got {requested!r}")
    if requested == config.activation:
        return requested, f"requested with --activation; the same as the open_clip config ({config.source})"
    return requested, (
        f"requested with --activation, overriding the open_clip config ({config.source}: quick_gelu="
        f"{config.quick_gelu})"
    )


def _processor(config: OpenClipConfig, tokenizer):
    from transformers import CLIPImageProcessor, CLIPProcessor

    size = config.vision.image_size
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": size}, crop_size={"height": size, "width": size}
    )
    return CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)


def _check_tokenizer(tokenizer, config: OpenClipConfig) -> None:
    """The tokenizer must cover exactly the model's vocabulary, with EOS as the largest id.

    open_clip pools the text at argmax(ids), CLIPModel at the first EOS: the same position only if
    EOS is the largest id, as in CLIP's vocabulary.
    """
    vocab = config.text.vocab_size
    if len(tokenizer) != vocab:
        raise UserInputError(
            f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary (text_cfg.vocab_size) has {vocab}; "
            "pass the --tokenizer this model was trained with"
        )
    if tokenizer.eos_token_id != vocab - 1:
        raise UserInputError(
            f"the tokenizer's end-of-text id is {tokenizer.eos_token_id}, not the largest id {vocab - 1}: open_clip's "
            "argmax pooling and CLIPModel's EOS pooling would read different positions"
        )


def convert_checkpoint(
    checkpoint: str | Path,
    output_dir: str | Path,
    open_clip_config: str | Path | dict | OpenClipConfig | None = None,
    *,
    activation: str | None = None,
    lora_rank: int = TSVLC_RANK,
    lora_alpha: float = TSVLC_ALPHA,
    tokenizer: str | Path | None = None,
    verify: bool = True,
    preset: str | None = None,
    activation_reason: str | None = None,
    sha256: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> ConversionResult:
    """Convert one checkpoint into a `CLIPModel` folder and return what was done.

    Args (all but the first three by keyword):
        checkpoint: an open_clip state dict or training checkpoint (`module.` prefixes and a
            `state_dict` wrapper are handled), a TSVLC/DAC checkpoint with unmerged LoRA, or an
            OpenAI TorchScript archive (auto-detected).
        output_dir: the folder to write (must not exist or be empty unless `overwrite`).
        open_clip_config: an open_clip model name, a config JSON (path or text), a dict or a parsed
            config. Required except for OpenAI archives, whose config is inferred from shapes.
        activation: "quick_gelu" or "gelu"; default: the config's `quick_gelu`. The paper evaluated
            the open_clip baselines with GELU although they were trained with QuickGELU (see
            `presets.py`), so the choice changes the numbers and is recorded in the card.
        lora_rank, lora_alpha: TSVLC's LoRA hyper-parameters (4 and 1), used only when the
            checkpoint holds `lora_*` keys.
        tokenizer: a folder or Hub id; default `openai/clip-vit-base-patch32`, offline open_clip's BPE.
        verify: compare with open_clip on identical inputs when open_clip is importable.
        preset: the `hardpos zoo` preset this conversion follows, for the card.
        activation_reason: why `activation` was chosen, when the caller knows better than "requested"
            (a preset's "as the paper evaluated it").
        sha256: the checkpoint's SHA-256 if already known (the cache computes it first).
    """
    from .card import converted_model_card
    from .verify import open_clip_unavailable_reason, verify_against_open_clip

    checkpoint, output_dir = Path(checkpoint), Path(output_dir)
    _check_output_dir(checkpoint, output_dir, overwrite)
    state, kind = load_state_dict(checkpoint)
    config = _config(checkpoint, open_clip_config, state, kind)
    chosen_activation, reason = _activation(config, activation)
    lora = None
    if has_lora(state):
        state, lora = merge_tsvlc_lora(state, lora_rank, lora_alpha, where=f"checkpoint {checkpoint}")
    clip_state = to_clip_state_dict(state, config, str(checkpoint))

    clip_tokenizer = load_clip_tokenizer(tokenizer, config.text.context_length)
    _check_tokenizer(clip_tokenizer, config)
    model = _clip_model(config, chosen_activation, clip_tokenizer, clip_state, str(checkpoint))
    del clip_state  # the model holds the weights now; big checkpoints need the memory back

    result = ConversionResult(
        output_dir=output_dir,
        checkpoint=checkpoint.name,
        sha256=sha256 or sha256_file(checkpoint, progress),
        checkpoint_kind=kind,
        config=config,
        activation=chosen_activation,
        activation_reason=activation_reason or reason,
        tokenizer=tokenizer_source(clip_tokenizer, tokenizer),
        lora=lora,
        preset=preset,
    )
    if verify:
        result.verification_skipped = open_clip_unavailable_reason()
        if result.verification_skipped is None:
            result.verification = verify_against_open_clip(state, config, chosen_activation, model)
    else:
        result.verification_skipped = NOT_VERIFIED

    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    _processor(config, clip_tokenizer).save_pretrained(output_dir)
    converted_model_card(result).save(output_dir / "README.md")
    (output_dir / MARKER).write_text(
        json.dumps(result.to_dict(), indent=2) + "\n"
    )  # written last: "complete"
    return result


def _clip_model(config: OpenClipConfig, activation: str, tokenizer, clip_state: dict, where: str):
    """A `CLIPModel` of `config` built with `activation` and the tokenizer's special ids, holding `clip_state`."""
    from transformers import CLIPModel

    clip_config = config.to_clip_config(
        activation, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    )
    model = CLIPModel(clip_config).eval()
    load_into_clip_model(model, clip_state, where)
    return model


def _check_output_dir(checkpoint: Path, output_dir: Path, overwrite: bool) -> None:
    """Refuse a folder that holds the checkpoint (save_pretrained may write over it) or other files."""
    if checkpoint.resolve().is_relative_to(output_dir.resolve()):
        raise UserInputError(
            f"checkpoint {checkpoint} is inside --output-dir {output_dir}, which the conversion "
            "writes; choose another folder"
        )
    if output_dir.exists() and any(output_dir.iterdir()) and not overwrite:
        raise UserInputError(f"--output-dir {output_dir} is not empty; choose a new folder (or --overwrite)")


def _config(checkpoint: Path, open_clip_config, state: dict, kind: str) -> OpenClipConfig:
    """The open_clip config as given (name, JSON, dict or parsed), or inferred from an OpenAI archive's shapes."""
    if open_clip_config is None:
        if kind != OPENAI_ARCHIVE:
            raise UserInputError(
                f"checkpoint {checkpoint}: --config is required for open_clip checkpoints (attention heads and the "
                "activation cannot be read from the weights); e.g. --config ViT-B-32"
            )
        return config_from_openai_state_dict(state)
    if isinstance(open_clip_config, OpenClipConfig):
        return open_clip_config
    return load_open_clip_config(open_clip_config)
