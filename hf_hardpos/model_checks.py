"""Refuse a model whose tokenizer or processor would make every score meaningless, before scoring.

Why: `AutoProcessor` loads a model folder without tokenizer files as a tokenizer of a few special
tokens, so every caption becomes `<bos> <unk> <unk> ...`, caption, negative and positive get one and
the same score, and the metrics come out as a plausible-looking 0.0 with exit 0. A tokenizer larger
than the text model's embedding table fails with an IndexError deep inside the model. Both are
checked here on a probe sentence, with one message naming the file to add.
"""

from __future__ import annotations

from pathlib import Path

from .errors import UserInputError

# Two probe sentences sharing no word: any working tokenizer gives them different, non-special ids.
PROBES = ("a photo of a red cube to the left of a blue sphere", "two dogs run across snowy grass")

TOKENIZER_FILES = (
    "tokenizer.json (or vocab.json + merges.txt, or the sentencepiece *.model) and tokenizer_config.json"
)


def _add_hint(name: str) -> str:
    """Where the missing files go: into the folder, copied from the model it was fine-tuned from."""
    if Path(name).expanduser().is_dir():
        return f"add {TOKENIZER_FILES} to {name} (copy them from the base model it was trained from)"
    return f"the Hub repo {name} must provide {TOKENIZER_FILES}"


def check_tokenizer(name: str, tokenizer, text_config) -> None:
    """The tokenizer encodes words (not only unknown tokens) and every id fits the text embedding table.

    Checks: the two probes tokenize to different sequences with at least two distinct non-special,
    non-unknown ids each; BOS/EOS/pad ids and the largest vocabulary id are below the text config's
    `vocab_size`.
    """
    if tokenizer is None:
        raise UserInputError(f"model {name} has no tokenizer: {_add_hint(name)}")
    encoded = [list(tokenizer(p)["input_ids"]) for p in PROBES]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    words = [set(ids) - special - {tokenizer.unk_token_id} for ids in encoded]
    if encoded[0] == encoded[1] or min(len(w) for w in words) < 2:
        raise UserInputError(
            f"model {name}: its tokenizer maps words to unknown/special tokens only ({len(tokenizer)} tokens; "
            f"{PROBES[0]!r} -> {encoded[0][:8]}...), so every caption would score the same: {_add_hint(name)}"
        )
    vocab_size = getattr(text_config, "vocab_size", None)
    if not vocab_size:
        return
    ids = {"largest vocabulary id": max(tokenizer.get_vocab().values())}
    for role in ("bos", "eos", "pad"):
        token_id = getattr(tokenizer, f"{role}_token_id", None)
        if token_id is not None:
            ids[f"{role} token id"] = token_id
    beyond = {role: i for role, i in ids.items() if i >= vocab_size}
    if beyond:
        listed = ", ".join(f"{role} {i}" for role, i in beyond.items())
        raise UserInputError(
            f"model {name}: tokenizer ids beyond the text model's vocabulary of {vocab_size} ({listed}): the "
            "tokenizer does not belong to this model; use the tokenizer it was trained with"
        )


def check_image_processor(name: str, processor) -> None:
    """The processor has an image processor (the scorer resizes and normalises every image with it)."""
    if getattr(processor, "image_processor", None) is None:
        raise UserInputError(
            f"model {name} has no image processor: add preprocessor_config.json (or processor_config.json) "
            "from the base model"
        )


# The files of a model folder `from_pretrained` reads an `auto_map` (custom code) from.
CODE_CONFIG_FILES = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "image_processor_config.json",
    "video_preprocessor_config.json",
    "feature_extractor_config.json",
    "generation_config.json",
)


def refuse_remote_code(name: str | Path) -> None:
    """Refuse, with one line, a local model folder that would need its own Python code to load.

    Why: transformers loads a folder whose `config.json` (or tokenizer/processor config) has an
    `auto_map` by importing the folder's `.py` files; with `trust_remote_code` unset it asks on the
    terminal first, and one "y" runs whatever a downloaded folder holds. Every loader here passes
    `trust_remote_code=False` (transformers then raises); this check names the file and the key before
    transformers is reached, and also refuses a `model_type` transformers does not ship (the other
    way a folder points at custom code). A Hub id is left to `trust_remote_code=False`.
    """
    import json

    folder = Path(name).expanduser()
    if not folder.is_dir():
        return
    for file_name in CODE_CONFIG_FILES:
        path = folder / file_name
        if not path.is_file():
            continue
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise UserInputError(f"{path}: not readable JSON ({err})") from None
        if not isinstance(config, dict):
            raise UserInputError(f"{path}: expected a JSON object, got {type(config).__name__}")
        if "auto_map" in config:
            raise UserInputError(
                f"{path}: field 'auto_map' asks to run the folder's own Python code, which hardpos never does "
                "(trust_remote_code=False); use a model whose architecture transformers ships"
            )
        if file_name == "config.json" and "model_type" in config:
            from transformers import CONFIG_MAPPING

            model_type = config["model_type"]
            if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
                raise UserInputError(
                    f"{path}: field 'model_type' is {str(model_type)[:80]!r}, which transformers does not "
                    "ship (custom code, never run here: trust_remote_code=False)"
                )
