"""The transformers backend: Hub ids, saved Hugging Face folders, and checkpoint files converted into one.

Any dual encoder `AutoModel` loads (CLIP, SigLIP, SigLIP 2, ...) with its `AutoProcessor`; an
open_clip / OpenAI / TSVLC checkpoint *file* is converted once into a `CLIPModel` folder in the
conversion cache (`conversion.resolve_model`) and from then on is such a folder. Identity: the sha256
of a folder's files (with the checkpoint's sha256 and activation for a converted one), or a Hub id's
commit (`provenance.model_identity`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UserInputError, first_line
from ..image_processing import describe_image_processor, load_image_processor
from ..provenance import looks_like_path, model_identity
from .base import ModelBackend, ModelOptions, TextInputs

# Hub repositories holding OpenAI's own weights, which the paper loaded with `clip.load`.
OPENAI_HUB_PREFIX = "openai/clip-"


def text_context_length(config, tokenizer=None) -> int:
    """The model's text context (CLIP 77, SigLIP 64), read from its config, else the tokenizer's.

    Passed to the tokenizer explicitly: a tokenizer saved without `model_max_length` never truncates,
    and a caption longer than the position table would then fail or, worse, be cut silently elsewhere.
    """
    text_config = getattr(config, "text_config", config)
    length = getattr(text_config, "max_position_embeddings", None)
    if length is None:
        length = getattr(tokenizer, "model_max_length", None)
        if length is None or length > 100_000:  # transformers' "no limit" sentinel
            raise ValueError("cannot tell the model's text context length: set max_position_embeddings")
    return int(length)


def transformers_text_inputs(model, tokenizer) -> TextInputs:
    """What a transformers dual encoder reads from its tokenizer's ids (`base.TextInputs`).

    SigLIP and SigLIP 2 were trained on text padded on the right to the context length (64), attending
    to that padding (no attention mask) and pooling the last position (big_vision; open_clip's
    SigLipTokenizer returns ids only, padded right). transformers' SigLIP tokenizers may say otherwise
    (5.x: attention_mask, Gemma's left padding), so that is fixed here. CLIP pools at the EOS token:
    padding to the longest text of a batch, on the tokenizer's side and with its mask, gives the same result.
    """
    config = getattr(model, "config", None)
    context = text_context_length(config, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if "siglip" in str(getattr(config, "model_type", "")):
        return TextInputs(context, True, "right", pad_id, ("input_ids",))
    side = "left" if getattr(tokenizer, "padding_side", "right") == "left" else "right"
    names = getattr(tokenizer, "model_input_names", ["attention_mask"])
    return TextInputs(
        context,
        False,
        side,
        pad_id,
        ("input_ids", "attention_mask") if "attention_mask" in names else ("input_ids",),
    )


def missing_model_message(name: str, err: Exception) -> str:
    """What is wrong with a model that cannot be loaded, and what to run (one line)."""
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            return (
                f"model {name}: the folder has no config.json, so it is no saved Hugging Face model (an open_clip "
                "or OpenAI checkpoint is a file: pass that file with --open-clip-config NAME, or convert it once with "
                "`hardpos convert`)"
            )
        return f"model {name}: its config.json cannot be read as a CLIP-like model ({first_line(err)})"
    if folder.is_file():
        return (
            f"model {name} is a file: a checkpoint needs --open-clip-config NAME (open_clip) or is converted "
            "with `hardpos convert`; a Hugging Face model is a folder or a Hub id"
        )
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    reach = "HF_HUB_OFFLINE is set" if offline else "the Hub did not answer or has no such model"
    return (
        f"model {name!r} is not a local folder and not in the Hugging Face cache, and {reach}: check the id "
        f"(owner/name), or download it once online (`hf download {name}`) and rerun, or pass a local folder"
    )


class HFBackend(ModelBackend):
    name = "hf"
    summary = (
        "transformers (CLIPModel, SigLIP, any AutoModel dual encoder): a Hub id or a saved folder; a checkpoint "
        "file is converted once into a CLIPModel folder"
    )

    def require_exists(self, model_argument: str) -> None:
        if looks_like_path(model_argument) and not Path(model_argument).expanduser().exists():
            raise UserInputError(f"model not found: {model_argument} (no such folder)")

    def checkpoint_model(self, checkpoint: str, open_clip_config: str | None) -> tuple[str, str | None]:
        return checkpoint, open_clip_config  # converted, with the config the conversion needs

    def check_options(self, model_argument: str, options: ModelOptions) -> None:
        from ..conversion.cache import check_model_options

        check_model_options(model_argument, options.open_clip_config, options.activation, options.tokenizer)

    def resolve(self, model_argument: str, options: ModelOptions, progress: bool = True) -> str:
        from ..conversion.cache import resolve_model
        from ..model_checks import refuse_remote_code

        resolved = resolve_model(
            model_argument, options.open_clip_config, options.activation, options.tokenizer, progress=progress
        )
        refuse_remote_code(resolved)
        return resolved

    def identity(self, resolved: str) -> dict[str, Any]:
        """`provenance.model_identity`; a folder converted from a checkpoint (`hardpos convert`, or the
        conversion cache behind `--model FILE.pt`) also carries `converted_from`: the folder's digest proves
        equality between runs, but only the checkpoint's sha256 and the activation tell a reader which
        published file, loaded which way, the numbers belong to."""
        from ..conversion.record import converted_from

        identity = model_identity(resolved)
        origin = converted_from(resolved) if "path" in identity else None
        return identity if origin is None else {**identity, "converted_from": origin}

    def holds_openai_release(self, model_argument: str, identity: Mapping[str, Any]) -> bool:
        """OpenAI's Hub copies (`openai/clip-...`) and folders converted from OpenAI's TorchScript archives."""
        from ..conversion.record import OPENAI_ARCHIVE

        origin = identity.get("converted_from") or {}
        return model_argument.startswith(OPENAI_HUB_PREFIX) or origin.get("checkpoint_kind") == OPENAI_ARCHIVE

    def describe(self, model: str, identity: Mapping[str, Any]) -> str:
        """Its content digest or Hub commit, and for a converted checkpoint the checkpoint's sha256 and
        activation rather than only the (cache) folder it was loaded from. The default backend: it names
        every identity no other family claims."""
        origin = identity.get("converted_from")
        if origin is not None:
            facts = f"sha256 {origin['checkpoint_sha256'][:12]}, hidden_act={origin['activation']}"
            if (
                str(Path(model).expanduser().resolve()) == identity["path"]
            ):  # a `hardpos convert` folder, named itself
                return (
                    f"{model} (converted from {origin['checkpoint']}: {origin['checkpoint_kind']}, {facts})"
                )
            return f"{model} ({origin['checkpoint_kind']}, {facts}; converted into {identity['path']})"
        if "sha256" in identity:
            return f"{model} (sha256 {identity['sha256'][:12]})"
        revision = identity.get("revision")
        return f"{model} ({'revision ' + revision[:12] if revision else 'revision unknown offline'})"

    def context_length(self, resolved: str) -> int:
        from transformers import AutoConfig

        try:
            return text_context_length(AutoConfig.from_pretrained(resolved, trust_remote_code=False))
        except (OSError, ValueError) as err:
            raise UserInputError(missing_model_message(resolved, err)) from err

    def image_processor_settings(self, resolved: str, image_backend: str) -> dict[str, Any]:
        try:
            return describe_image_processor(load_image_processor(resolved, image_backend))
        except UserInputError:
            _refuse_single_encoder(resolved)  # the likelier reason when a model has no image processor
            raise

    def load(self, resolved: str, image_backend: str):
        """`AutoModel` + `AutoProcessor` in float32, the image processor pinned to `image_backend`.

        float32 whatever dtype the weights were saved in: transformers 5 loads `dtype="auto"`, so a
        checkpoint saved in half precision would otherwise be scored in half precision (outcomes of
        near-tied rows flip) while the report says fp32; `--dtype` is the one switch for lower
        precision. Refuses, with a one-line reason naming the file to add, a model that is not a dual
        encoder (the scorer needs `get_image_features` and `get_text_features`), a missing or
        degenerate tokenizer and a missing image processor (`model_checks`).
        """
        import pickle

        import torch
        from transformers import AutoModel, AutoProcessor

        from ..model_checks import check_image_processor, check_tokenizer

        where = (
            "local folder"
            if Path(resolved).expanduser().exists()
            else "Hub id (offline: it must be in the local cache)"
        )
        try:
            model = AutoModel.from_pretrained(resolved, dtype=torch.float32, trust_remote_code=False)
        except pickle.UnpicklingError:  # transformers reads .bin weights with torch.load(weights_only=True)
            raise UserInputError(
                f"model {resolved!r}: its .bin weights hold Python objects other than tensors, which "
                "are not loaded (unpickling could run code); save the model as safetensors"
            ) from None
        except (OSError, ValueError, KeyError) as err:
            raise UserInputError(f"cannot load model {resolved!r} as a {where}: {first_line(err)}") from err
        if not all(hasattr(model, m) for m in ("get_image_features", "get_text_features")):
            raise UserInputError(
                f"{resolved} is a {type(model).__name__}, not a dual encoder (needs get_image_features/get_text_features)"
            )
        try:
            processor = AutoProcessor.from_pretrained(resolved, trust_remote_code=False)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserInputError(
                f"cannot load the processor of model {resolved!r} ({where}): add preprocessor_config.json (or "
                f"processor_config.json) and the tokenizer files from the base model ({first_line(err)})"
            ) from err
        if (
            getattr(processor, "image_processor", None) is not None
        ):  # pinned, not the backend AutoProcessor picked
            processor.image_processor = load_image_processor(resolved, image_backend)
        check_image_processor(resolved, processor)
        text_config = getattr(model.config, "text_config", model.config)
        check_tokenizer(resolved, getattr(processor, "tokenizer", None), text_config)
        return model, processor


def _refuse_single_encoder(model: str) -> None:
    """Name a model without an image tower as such (a text-only or image-only model has no vision_config)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=False)
    except (OSError, ValueError, KeyError):
        return
    if getattr(config, "vision_config", None) is None or getattr(config, "text_config", None) is None:
        raise UserInputError(
            f"{model} is a {config.model_type} model, not a dual encoder (needs get_image_features/get_text_features)"
        )
