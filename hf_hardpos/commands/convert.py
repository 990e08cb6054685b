"""`hardpos convert`: an open_clip / OpenAI / TSVLC-LoRA checkpoint -> a Hub-ready `CLIPModel` folder.

Writes safetensors, config, CLIPProcessor and a model card. Every key and shape is checked; options
CLIPModel cannot express are refused. With open_clip importable the result is compared with
open_clip on identical inputs and the card records the differences.

    hardpos convert open_clip negclip.pth --config ViT-B-32 --activation gelu --output-dir negclip-hf
    hardpos convert openai ViT-B-32.pt --output-dir clip-b32-hf          (config inferred from shapes)
    hardpos convert --preset svlc --checkpoint svlc.pt --output-dir svlc-hf [--push-to-hub ORG/NAME]

The format word is optional (TorchScript archives are recognised by content). A preset (`hardpos
zoo`) fills in the config, the activation the paper evaluated with and the LoRA settings;
explicit options override it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._parsers import add_command

FORMATS = ("open_clip", "openai")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, __name__, run)
    parser.add_argument(
        "positional",
        nargs="*",
        metavar="[FORMAT] CHECKPOINT",
        help=f"optional format word {FORMATS}, then the checkpoint file (or use --checkpoint)",
    )
    parser.add_argument(
        "--checkpoint", type=Path, default=None, help="the checkpoint file (alternative to the positional)"
    )
    parser.add_argument("--output-dir", type=Path, required=True, help="folder to write (new or empty)")
    parser.add_argument(
        "--config",
        default=None,
        help="open_clip model name (ViT-B-32, ViT-B-32-quickgelu, ViT-L-14, ...) or model-config JSON (file or text); "
        "required for open_clip checkpoints, inferred for OpenAI archives",
    )
    parser.add_argument(
        "--activation",
        choices=("quick_gelu", "gelu"),
        default=None,
        help="override the config's activation (QuickGELU = the model as OpenAI-initialised models were trained; "
        "GELU = how the paper evaluated the open_clip baselines)",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="folder or Hub id (default openai/clip-vit-base-patch32; offline: the BPE file open_clip ships)",
    )
    parser.add_argument(
        "--lora-rank", type=int, default=None, help="rank of unmerged LoRA in the checkpoint (TSVLC/DAC: 4)"
    )
    parser.add_argument(
        "--lora-alpha", type=float, default=None, help="lora_alpha of unmerged LoRA (TSVLC/DAC: 1)"
    )
    parser.add_argument(
        "--preset", default=None, help="a `hardpos zoo` preset filling config, activation and LoRA"
    )
    parser.add_argument("--no-verify", action="store_true", help="skip the numerical check against open_clip")
    parser.add_argument("--overwrite", action="store_true", help="write into a non-empty --output-dir")
    parser.add_argument(
        "--push-to-hub", default=None, metavar="ORG/NAME", help="push the folder and its card to the Hub"
    )
    parser.add_argument("--private", action="store_true", help="create the Hub repository private")
    parser.add_argument("--no-progress", action="store_true")


def _checkpoint_and_format(args: argparse.Namespace) -> tuple[Path, str | None]:
    from ..errors import UserInputError

    words = list(args.positional)
    fmt = words.pop(0) if words and words[0] in FORMATS else None
    if len(words) > 1:
        raise UserInputError(
            f"expected [FORMAT] CHECKPOINT, got {args.positional}; FORMAT is one of {FORMATS}"
        )
    if words and args.checkpoint is not None:
        raise UserInputError("give the checkpoint once: as the positional argument or with --checkpoint")
    checkpoint = Path(words[0]) if words else args.checkpoint
    if checkpoint is None:
        raise UserInputError(
            "no checkpoint given: hardpos convert [open_clip|openai] CHECKPOINT --output-dir DIR"
        )
    return checkpoint, fmt


def run(args: argparse.Namespace) -> int:
    from ..conversion.converter import convert_checkpoint
    from ..conversion.lora import TSVLC_ALPHA, TSVLC_RANK
    from ..conversion.presets import get_preset
    from ..conversion.state_dict import is_torchscript
    from ..errors import UserInputError

    checkpoint, fmt = _checkpoint_and_format(args)
    if fmt == "openai" and checkpoint.is_file() and not is_torchscript(checkpoint) and args.config is None:
        raise UserInputError(
            f"{checkpoint} is not a TorchScript archive; for an OpenAI-format state dict pass --config"
        )
    preset = get_preset(args.preset) if args.preset else None
    config = args.config or (preset.open_clip_config if preset else None)
    activation = args.activation or (preset.paper_activation if preset else None)
    lora = preset.lora if preset and preset.lora else (TSVLC_RANK, TSVLC_ALPHA)
    reason = None
    if preset and not args.activation:
        reason = (
            f"the activation the paper evaluated {preset.row} with (preset {preset.name}; trained with "
            f"{preset.trained_activation}); pass --activation to choose"
        )
    result = convert_checkpoint(
        checkpoint,
        args.output_dir,
        open_clip_config=config,
        activation=activation,
        lora_rank=args.lora_rank if args.lora_rank is not None else lora[0],
        lora_alpha=args.lora_alpha if args.lora_alpha is not None else lora[1],
        tokenizer=args.tokenizer,
        verify=not args.no_verify,
        preset=args.preset,
        activation_reason=reason,
        overwrite=args.overwrite,
        progress=not args.no_progress,
    )
    print(
        f"converted {checkpoint} ({result.checkpoint_kind}, sha256 {result.sha256[:12]}...) -> {args.output_dir}"
    )
    print(f"  config {result.config.source}; hidden_act={result.activation}: {result.activation_reason}")
    if result.lora:
        merge = result.lora
        print(
            f"  merged unmerged LoRA into {merge.merged_weights} weights (r={merge.rank}, alpha={merge.alpha:g})"
        )
    if result.verification:
        v = result.verification
        print(
            f"  vs open_clip {v['open_clip_version']} on identical inputs (fp32, CPU): max |diff| image features "
            f"{v['max_abs_diff_image_features']:.3g}, text features {v['max_abs_diff_text_features']:.3g}, "
            f"logit scale {v['max_abs_diff_logit_scale']:.3g}"
        )
    else:
        print(f"  numerical check against open_clip not run: {result.verification_skipped}")
    if args.push_to_hub:
        _push(result, args.push_to_hub, args.private)
    return 0


def _push(result, repo_id: str, private: bool) -> None:
    from huggingface_hub import HfApi

    from ..conversion.card import converted_model_card
    from ..errors import UserInputError

    converted_model_card(result, repo_id=repo_id).save(result.output_dir / "README.md")
    api = HfApi()
    try:
        api.create_repo(repo_id, exist_ok=True, private=private)
        url = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(result.output_dir),
            commit_message=f"Convert {result.checkpoint} with hf_hardpos",
        )
    except Exception as err:  # offline mode, no token, no permission: all fixable by the user
        from ..data.hub_folder import first_line_masked

        raise UserInputError(
            f"--push-to-hub {repo_id}: {type(err).__name__}: {first_line_masked(err)} (the converted folder "
            f"{result.output_dir} is complete; log in with `hf auth login` or set HF_TOKEN, and push it later with "
            f"`hf upload {repo_id} {result.output_dir}`)"
        ) from None
    print(f"pushed to {url}")
