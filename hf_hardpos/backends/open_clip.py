"""The open_clip backend: open_clip builds the model, its transforms and its tokenizer.

Why a second backend: `CLIPModel` holds a ViT image tower and CLIP's own text transformer only.
The paper's Table 8 (Kamath et al., ECCV 2024, appendix) also evaluates CLIP RN50x16 / RN50x64 /
RN101 (ResNet image towers) and OpenCLIP RoBERTa-ViT-B/32 (a RoBERTa text tower), which only
open_clip can build. Here open_clip itself creates the model, so its own preprocessing and
tokenizer are used, and `open_clip_adapters.OpenClipDualEncoder` gives the scorer the `get_image_features` /
`get_text_features` interface every model is scored through (cosine of L2-normalised features).

Accepted forms of `--model` (open_clip is an optional extra: `pip install -e ".[openclip]"`):

- `open_clip:RN50x16/openai` — an open_clip model name and a pretrained tag;
- `open_clip:hf-hub:laion/CLIP-ViT-B-32-roberta-base-laion2B-s12B-b32k` — an open_clip Hub repo;
- `open_clip:ViT-B-32//path/to/negclip.pt` or `open_clip:my-config.json/model.pt`, i.e.
  `--model FILE --native --open-clip-config NAME_OR_JSON` (`--native` is `--backend open_clip`) or
  `--model open_clip:FILE --open-clip-config NAME_OR_JSON` — a checkpoint file in a named (or JSON) config.

Choices that change scores are explicit and recorded in the model identity: the activation (a tag's
weights were trained with the activation its open_clip entry records — QuickGELU for OpenAI's — and
are built with it, where open_clip itself only warns on a mismatch; `activation=` overrides), the
tokenizer (the model's own; `tokenizer="clip"` feeds CLIP BPE ids to any text tower as the paper's
code did, hard_positives@33addaa `run_eval.py` calls `clip.tokenize` for every model), the
preprocessing open_clip applies, and the weights' sha256.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..conversion.open_clip_config import ACTIVATIONS, OPEN_CLIP_DISTRIBUTION
from ..errors import UserInputError
from ..provenance import digest_of, sha256_file, versions
from .base import ModelBackend, ModelOptions

PREFIX = "open_clip:"
HF_HUB = "hf-hub:"
INSTALL_HINT = 'pip install -e ".[openclip]"'
CLIP_TOKENIZER = "clip"  # open_clip's CLIP BPE (SimpleTokenizer) whatever the text tower
TOKENIZERS = (CLIP_TOKENIZER,)
_RESOLVED = PREFIX + "{"  # the JSON form `OpenClipBackend.resolve` returns; users type the short forms above


@dataclass(frozen=True)
class OpenClipSpec:
    """One open_clip model as this backend builds it.

    `model_name` is an open_clip model name, a model-config JSON file, or `hf-hub:org/repo`;
    `pretrained` a tag or a checkpoint file (None with `hf-hub:`, whose repo holds the weights);
    `activation` None means as trained (a tag's entry) or the config's; `tokenizer` None means the
    model's own.
    """

    model_name: str
    pretrained: str | None = None
    activation: str | None = None
    tokenizer: str | None = None

    def to_model_string(self) -> str:
        """The form `OpenClipBackend.resolve` returns and the loaders read back (a JSON object after `open_clip:`)."""
        return PREFIX + json.dumps(
            {
                "model": self.model_name,
                "pretrained": self.pretrained,
                "activation": self.activation,
                "tokenizer": self.tokenizer,
            },
            sort_keys=True,
        )


def parse(model: str) -> OpenClipSpec:
    """`open_clip:NAME/TAG_OR_FILE`, `open_clip:hf-hub:ORG/REPO`, or the JSON form `OpenClipBackend.resolve` writes."""
    if model.startswith(_RESOLVED):
        fields = json.loads(model[len(PREFIX) :])
        return OpenClipSpec(fields["model"], fields["pretrained"], fields["activation"], fields["tokenizer"])
    body = model[len(PREFIX) :]
    if body.startswith(HF_HUB):
        if body.count("/") != 1 or body.endswith("/"):
            raise UserInputError(f"--model {model}: expected open_clip:hf-hub:ORG/REPO")
        return OpenClipSpec(body)
    # A config JSON's path holds slashes: then the name ends at ".json/".
    split = body.index(".json/") + len(".json") if ".json/" in body else body.find("/")
    name, pretrained = (body[:split], body[split + 1 :]) if split > 0 else (body, "")
    if not name or not pretrained:
        raise UserInputError(
            f"--model {model}: expected open_clip:NAME/PRETRAINED (a tag, e.g. open_clip:RN50x16/openai, or a "
            "checkpoint file), or open_clip:hf-hub:ORG/REPO"
        )
    return OpenClipSpec(name, pretrained)


def _resolve(model: str, options: ModelOptions) -> str:
    """The string the loaders read for `open_clip:...`: paths made absolute, `activation` / `tokenizer` folded in.

    Refuses, without importing open_clip, what cannot apply: a config given twice, an unknown
    activation or tokenizer, a checkpoint file that does not exist.
    """
    activation, tokenizer = options.activation, options.tokenizer
    if activation is not None and activation not in ACTIVATIONS:
        raise UserInputError(f"--activation must be one of {ACTIVATIONS}, got {activation!r}")
    if tokenizer is not None and tokenizer not in TOKENIZERS:
        raise UserInputError(
            f"--tokenizer {tokenizer!r}: the open_clip backend uses the model's own tokenizer, or "
            f"{CLIP_TOKENIZER!r} for open_clip's CLIP BPE (the paper's tokenization of every model)"
        )
    if options.open_clip_config is not None:
        body = model[len(PREFIX) :]
        if model.startswith(_RESOLVED) or not Path(body).expanduser().is_file():
            raise UserInputError(
                f"--model {model} names its open_clip config and weights, so --open-clip-config does not apply; it "
                "names the config of a checkpoint file: --model FILE --native --open-clip-config C (or --model "
                "open_clip:FILE --open-clip-config C, or --model open_clip:C/FILE)"
            )
        model = checkpoint_spelling(body, options.open_clip_config)
    spec = parse(model)
    if (
        spec.pretrained is not None
        and _is_path(spec.pretrained)
        and not Path(spec.pretrained).expanduser().is_file()
    ):
        raise UserInputError(f"checkpoint {spec.pretrained}: no such file")
    if spec.pretrained is not None and Path(spec.pretrained).expanduser().is_file():
        spec = replace(spec, pretrained=str(Path(spec.pretrained).expanduser().resolve()))
    if spec.model_name.endswith(".json"):
        if not Path(spec.model_name).expanduser().is_file():
            raise UserInputError(f"open_clip config {spec.model_name}: no such file")
        spec = replace(spec, model_name=str(Path(spec.model_name).expanduser().resolve()))
    return replace(
        spec, activation=activation or spec.activation, tokenizer=tokenizer or spec.tokenizer
    ).to_model_string()


def checkpoint_spelling(checkpoint: str, open_clip_config: str | Path | dict) -> str:
    """A checkpoint file in an open_clip config (a name, a JSON file, JSON text or a dict) as a model argument:
    `open_clip:C/FILE`, or the resolved JSON form where the config is JSON text (no short form holds it)."""
    path = str(Path(checkpoint).expanduser().resolve())
    config = json.dumps(open_clip_config) if isinstance(open_clip_config, dict) else str(open_clip_config)
    if config.lstrip().startswith("{"):
        return OpenClipSpec(config, path).to_model_string()
    return f"{PREFIX}{config}/{path}"


def _is_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.endswith((".pt", ".pth", ".bin", ".safetensors", ".ckpt"))


def import_open_clip():
    """open_clip, or a one-line error naming the extra (it needs torchvision, which may fail to import)."""
    try:
        import open_clip
    except Exception as err:  # ImportError, or torchvision's RuntimeError beside a mismatched torch
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserInputError(f"the open_clip backend needs open_clip: {INSTALL_HINT} ({first})") from err
    return open_clip


class _Resolved:
    """What open_clip will build for a spec, worked out without building it (for identity and settings)."""

    def __init__(self, spec: OpenClipSpec):
        open_clip = import_open_clip()
        from open_clip.pretrained import (
            download_pretrained,
            download_pretrained_from_hf,
            get_pretrained_cfg,
        )
        from open_clip.transform import PreprocessCfg, merge_preprocess_dict

        self.spec = spec
        self.version = versions(OPEN_CLIP_DISTRIBUTION)[OPEN_CLIP_DISTRIBUTION]
        self.name = _registered_name(open_clip, spec.model_name)
        preprocess = merge_preprocess_dict(PreprocessCfg(), {})
        try:
            if spec.model_name.startswith(HF_HUB):
                repo = spec.model_name[len(HF_HUB) :]
                hub_config = json.loads(
                    Path(download_pretrained_from_hf(repo, "open_clip_config.json")).read_text()
                )
                self.config = hub_config["model_cfg"]
                preprocess = merge_preprocess_dict(preprocess, hub_config.get("preprocess_cfg", {}))
                self.weights = download_pretrained_from_hf(repo)
                self.weights_source = f"Hub {repo}"
                trained_quick_gelu = bool(self.config.get("quick_gelu", False))
            else:
                self.config = open_clip.get_model_config(self.name)
                if self.config is None:
                    raise UserInputError(
                        f"open_clip has no model config {spec.model_name!r} (open_clip {self.version}; "
                        "open_clip.list_models() lists them; or pass a model-config JSON file)"
                    )
                tag = get_pretrained_cfg(self.name, spec.pretrained)
                if tag:
                    preprocess = merge_preprocess_dict(preprocess, tag)
                    self.weights = download_pretrained(tag)
                    self.weights_source = tag.get("hf_hub") or tag.get("url")
                    trained_quick_gelu = bool(
                        tag.get("quick_gelu", False) or self.config.get("quick_gelu", False)
                    )
                elif spec.pretrained is not None and Path(spec.pretrained).is_file():
                    self.weights = spec.pretrained
                    self.weights_source = f"file {Path(spec.pretrained).name}"
                    trained_quick_gelu = bool(self.config.get("quick_gelu", False))
                else:
                    from open_clip.pretrained import list_pretrained_tags_by_model

                    raise UserInputError(
                        f"open_clip model {spec.model_name}: {spec.pretrained!r} is neither a pretrained tag "
                        f"({', '.join(list_pretrained_tags_by_model(self.name)) or 'none known'}) nor a file"
                    )
        except UserInputError:
            raise
        except Exception as err:  # downloads: offline and not cached, no such repo, ...
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise UserInputError(
                f"cannot fetch open_clip model {spec.model_name} ({spec.pretrained}): {first}"
            ) from err
        vision = self.config["vision_cfg"]
        preprocess["size"] = _two(vision.get("image_size", preprocess["size"]))
        self.preprocess = json.loads(
            json.dumps(preprocess)
        )  # tuples as lists: comparable with what is recorded
        self.activation = spec.activation or ("quick_gelu" if trained_quick_gelu else "gelu")
        self.context_length = int(self.config["text_cfg"].get("context_length", 77))

    def identity(self) -> dict[str, Any]:
        """Content and every score-changing choice: resume and embedding-cache keys hash all of it."""
        return {
            "open_clip": {
                "model": _config_label(self.spec.model_name),
                "config_digest": digest_of(self.config),
                "pretrained": self.spec.pretrained
                if not _is_path(self.spec.pretrained or "")
                else Path(self.spec.pretrained).name,
                "weights": self.weights_source,
                "activation": self.activation,
                "tokenizer": self.spec.tokenizer or "the model's own",
                "context_length": self.context_length,
                "preprocess": self.preprocess,
                "open_clip_version": self.version,
            },
            "sha256": sha256_file(self.weights),
        }


def _two(size) -> list[int]:
    """An image size as [height, width] (open_clip stores an int or a pair, depending on the tower)."""
    return [int(size), int(size)] if isinstance(size, (int, float)) else [int(v) for v in size]


def _config_label(model_name: str) -> str:
    """How reports name the config: open_clip's model name, a JSON file's name, or "JSON text"."""
    if model_name.endswith(".json"):
        return Path(model_name).name
    return "model-config JSON text" if model_name.lstrip().startswith("{") else model_name


def _registered_name(open_clip, model_name: str) -> str:
    """A model-config JSON (a file, or JSON text as --open-clip-config accepts) registered with open_clip
    under a name derived from its content; an open_clip model name is returned as it is.

    Not under the file's stem, as `open_clip.add_model_config` would name it: a user's `ViT-B-32.json`
    would then silently replace open_clip's own `ViT-B-32` for the rest of the process. A Hub-style
    `open_clip_config.json` (`{"model_cfg": ..., "preprocess_cfg": ...}`) contributes its `model_cfg`.
    """
    is_text = model_name.lstrip().startswith("{")
    if not (is_text or model_name.endswith(".json")):
        return model_name
    try:
        config = json.loads(model_name if is_text else Path(model_name).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UserInputError(
            f"open_clip config {_config_label(model_name)}: not readable JSON ({err})"
        ) from err
    config = config.get("model_cfg", config) if isinstance(config, dict) else config
    if not (
        isinstance(config, dict) and all(key in config for key in ("embed_dim", "vision_cfg", "text_cfg"))
    ):
        raise UserInputError(
            f"open_clip config {_config_label(model_name)}: an open_clip model config needs embed_dim, vision_cfg and "
            "text_cfg (or a model_cfg holding them)"
        )
    name = f"hardpos-{digest_of(config)}"
    if open_clip.get_model_config(name) is None:
        folder = Path(tempfile.mkdtemp(prefix="hardpos-open-clip-"))
        (folder / f"{name}.json").write_text(json.dumps(config))
        open_clip.add_model_config(folder / f"{name}.json")
    return name


class OpenClipBackend(ModelBackend):
    name = "open_clip"
    prefix = PREFIX
    # The BibTeX key of OpenCLIP (Ilharco et al., 2021), in backends/references.bib (`hf_hardpos.citations`).
    citation = "ilharco2021openclip"
    summary = (
        f"open_clip itself (--model {PREFIX}NAME/TAG, {PREFIX}{HF_HUB}ORG/REPO, or --model FILE --backend "
        f"open_clip --open-clip-config C): any open_clip architecture with its own transforms and tokenizer; "
        f"needs the [openclip] extra ({INSTALL_HINT})"
    )

    def checkpoint_model(self, checkpoint: str, open_clip_config: str | None) -> tuple[str, str | None]:
        """`--model FILE --backend open_clip --open-clip-config C` as the model `open_clip:C/FILE`."""
        if self.recognises(checkpoint):
            return checkpoint, open_clip_config
        path = Path(checkpoint).expanduser()
        if not path.is_file():
            raise UserInputError(
                f"--backend open_clip (--native) applies to a checkpoint file; --model {checkpoint} "
                "is not one"
            )
        if open_clip_config is None:
            raise UserInputError(
                "--backend open_clip (--native) needs --open-clip-config NAME_OR_JSON (the checkpoint's "
                "open_clip model)"
            )
        return checkpoint_spelling(checkpoint, open_clip_config), None

    def holds_openai_release(self, model_argument: str, identity: Mapping[str, Any]) -> bool:
        """`open_clip:NAME/openai` (as given or resolved): open_clip's tag for OpenAI's weights."""
        return self.recognises(model_argument) and parse(model_argument).pretrained == "openai"

    def describe(self, model: str, identity: Mapping[str, Any]) -> str | None:
        """open_clip's model, the weights' sha256, activation and tokenizer (`_Resolved.identity`)."""
        facts = identity.get("open_clip")
        if facts is None:
            return None
        return (
            f"{model} (open_clip {facts['model']}, weights sha256 {identity['sha256'][:12]}, "
            f"activation {facts['activation']}, tokenizer {facts['tokenizer']})"
        )

    def check_options(self, model_argument: str, options: ModelOptions) -> None:
        _resolve(model_argument, options)  # refuses what cannot apply, without importing open_clip

    def resolve(self, model_argument: str, options: ModelOptions, progress: bool = True) -> str:
        return _resolve(model_argument, options)

    def identity(self, resolved: str) -> dict[str, Any]:
        """Weights sha256, activation, tokenizer and preprocessing (`_Resolved.identity`)."""
        return _Resolved(parse(resolved)).identity()

    def context_length(self, resolved: str) -> int:
        """The text context open_clip's tokenizer pads and truncates to (77 for CLIP, 64 for SigLIP)."""
        return _Resolved(parse(resolved)).context_length

    def image_processor_settings(self, resolved: str, image_backend: str) -> dict[str, Any]:
        # open_clip builds its own transform; the model identity records it (`_Resolved.identity`).
        return {
            "backend": "open_clip",
            "transform": "the model's own open_clip transform (see model_identity)",
        }

    def load(self, resolved: str, image_backend: str):
        """The adapter and processor, built by open_clip (fp32, on CPU; the scorer moves it).

        The preprocessing open_clip attaches to the model must be the one recorded in the identity,
        else the recorded identity would not describe what was scored.
        """
        from .open_clip_adapters import (
            OpenClipDualEncoder,
            OpenClipImageProcessor,
            OpenClipProcessor,
            OpenClipTokenizer,
        )

        built = _Resolved(parse(resolved))
        open_clip = import_open_clip()
        spec = built.spec
        pretrained = None if spec.model_name.startswith(HF_HUB) else spec.pretrained
        with _quiet_open_clip_warnings():
            net, _, preprocess = open_clip.create_model_and_transforms(
                built.name,
                pretrained=pretrained,
                precision="fp32",
                device="cpu",
                quick_gelu=built.activation == "quick_gelu",
            )
        used = json.loads(json.dumps(open_clip.get_model_preprocess_cfg(net)))
        used["size"] = _two(used["size"])
        recorded = {key: built.preprocess[key] for key in used}
        if used != recorded:
            raise RuntimeError(f"open_clip preprocesses {resolved} with {used}, not the recorded {recorded}")
        if spec.tokenizer == CLIP_TOKENIZER:
            tokenizer = open_clip.SimpleTokenizer(context_length=built.context_length)
        else:
            tokenizer = open_clip.get_tokenizer(built.name, context_length=built.context_length)
        return (
            OpenClipDualEncoder(net.eval(), built.context_length),
            OpenClipProcessor(
                OpenClipTokenizer(tokenizer, built.context_length), OpenClipImageProcessor(preprocess)
            ),
        )


@contextlib.contextmanager
def _quiet_open_clip_warnings():
    """open_clip warns when a tag's QuickGELU differs from its config; here the activation is chosen
    explicitly (and recorded), so that warning would only mislead."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="QuickGELU mismatch")
        yield
