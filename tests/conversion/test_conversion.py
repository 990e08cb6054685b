"""Conversion of open_clip / OpenAI / TSVLC-LoRA checkpoints against goldens written by real open_clip.

The fixtures in tests/fixtures/open_clip/ were made by `make_goldens.py` (open_clip 3.3, torch 2.14.1,
in its own venv: open_clip cannot be imported beside the CPU torch). Every conversion must
reproduce open_clip's own features on the same `pixel_values` / `input_ids` to 1e-5.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoProcessor, CLIPModel

from hf_hardpos import citations
from hf_hardpos.commands import convert as convert_command
from hf_hardpos.commands import zoo as zoo_command
from hf_hardpos.conversion import convert_checkpoint, resolve_model
from hf_hardpos.conversion.open_clip_config import load_open_clip_config
from hf_hardpos.conversion.presets import NO_PUBLIC_RELEASE, PRESETS
from hf_hardpos.conversion.record import (
    DDP_PREFIX_REMOVED,
    OPENAI_ARCHIVE,
    TRAINING_CHECKPOINT,
)
from hf_hardpos.conversion.tokenizer import (
    clip_tokenizer_from_merges,
    load_clip_tokenizer,
    read_bpe_merges,
)
from hf_hardpos.conversion.verify import (
    fixed_inputs,
    max_abs_differences,
    open_clip_unavailable_reason,
)
from hf_hardpos.errors import UserInputError
from hf_hardpos.model_source import ModelSource
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set
from tests.support.open_clip_env import needs_open_clip
from tests.support.paths import OPEN_CLIP_FIXTURES as FIXTURES

TOLERANCE = 1e-5
QUICKGELU_JSON = FIXTURES / "tiny-quickgelu.json"
GELU_JSON = FIXTURES / "tiny-gelu.json"


@pytest.fixture(scope="module")
def goldens() -> dict:
    return torch.load(FIXTURES / "goldens.pt", weights_only=True)


def _convert(tmp_path, tiny_tokenizer, checkpoint, config=QUICKGELU_JSON, **options):
    out = tmp_path / "converted"
    result = convert_checkpoint(
        FIXTURES / checkpoint if isinstance(checkpoint, str) else checkpoint,
        out,
        open_clip_config=config,
        tokenizer=tiny_tokenizer,
        progress=False,
        **options,
    )
    return result, CLIPModel.from_pretrained(out)


CASES = [  # golden name, checkpoint, config, --activation
    ("quickgelu_plain", "quickgelu_plain.pt", QUICKGELU_JSON, None),
    ("quickgelu_plain_as_gelu", "quickgelu_plain.pt", QUICKGELU_JSON, "gelu"),
    ("quickgelu_ddp", "quickgelu_ddp.pt", QUICKGELU_JSON, None),
    ("gelu_plain", "gelu_plain.pt", GELU_JSON, None),
    ("lora_tsvlc", "lora_tsvlc.pt", QUICKGELU_JSON, None),
    ("openai_jit", "openai_jit.pt", None, None),
]


@pytest.mark.parametrize("golden, checkpoint, config, activation", CASES, ids=[c[0] for c in CASES])
def test_converted_features_equal_open_clip(
    tmp_path, tiny_tokenizer, goldens, golden, checkpoint, config, activation
):
    result, model = _convert(tmp_path, tiny_tokenizer, checkpoint, config, activation=activation)
    diffs = max_abs_differences(model, goldens["inputs"], goldens[golden])
    assert max(diffs.values()) <= TOLERANCE, diffs
    assert model.config.text_config.hidden_act == (activation or result.config.activation)


def test_activation_override_is_honoured(tmp_path, tiny_tokenizer, goldens):
    """QuickGELU (the config's) and --activation gelu give different features, each open_clip's own."""
    quick = goldens["quickgelu_plain"]
    gelu = goldens["quickgelu_plain_as_gelu"]
    assert (quick["image_features"] - gelu["image_features"]).abs().max() > 1e-3
    assert (quick["text_features"] - gelu["text_features"]).abs().max() > 1e-3
    result, model = _convert(tmp_path, tiny_tokenizer, "quickgelu_plain.pt", activation="gelu")
    assert (result.config.activation, result.activation) == (
        "quick_gelu",
        "gelu",
    )  # --activation overrides the config
    assert model.config.vision_config.hidden_act == "gelu"
    assert max(max_abs_differences(model, goldens["inputs"], quick).values()) > 1e-3


def test_training_checkpoint_and_lora_are_recognised(tmp_path, tiny_tokenizer, goldens):
    result, _ = _convert(tmp_path, tiny_tokenizer, "lora_tsvlc.pt")
    assert result.checkpoint_kind == TRAINING_CHECKPOINT + DDP_PREFIX_REMOVED
    # 2 towers x 2 blocks x 4 matrices + visual.conv1
    assert result.lora is not None and (result.lora.rank, result.lora.alpha, result.lora.merged_weights) == (
        4,
        1.0,
        17,
    )
    unmerged, merged = goldens["lora_tsvlc_unmerged"], goldens["lora_tsvlc"]
    assert (unmerged["image_features"] - merged["image_features"]).abs().max() > 1e-3  # the merge matters


def test_output_folder_is_hub_ready(tmp_path, tiny_tokenizer):
    result, model = _convert(tmp_path, tiny_tokenizer, "quickgelu_ddp.pt")
    out = tmp_path / "converted"
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
    processor = AutoProcessor.from_pretrained(out)
    assert processor.tokenizer.model_max_length == 16
    assert processor.image_processor.crop_size == {"height": 32, "width": 32}
    assert model.config.text_config.eos_token_id == 527 == processor.tokenizer.eos_token_id
    image = torch.zeros(32, 32, 3, dtype=torch.uint8).numpy()
    batch = processor(text=["a photo of a cat"], images=[image], return_tensors="pt")
    assert model(**batch).logits_per_image.shape == (1, 1)
    facts = json.loads((out / "conversion.json").read_text())
    assert facts["sha256"] == result.sha256 and len(result.sha256) == 64
    assert facts["open_clip_config"]["vision"]["heads"] == 4  # head_width 8, not the default 64
    card = (out / "README.md").read_text()
    assert result.sha256 in card and f"`{result.activation}`" in card
    if open_clip_unavailable_reason() is None:  # the card holds the measured check
        assert f"{result.verification['max_abs_diff_image_features']:.3g}" in card
    else:  # or says why there is none
        assert result.verification is None and result.verification_skipped in card


def _modified_checkpoint(tmp_path, source: str, edit) -> Path:
    obj = torch.load(FIXTURES / source, weights_only=True)
    edit(obj["state_dict"] if "state_dict" in obj else obj)
    path = tmp_path / f"edited-{source}"
    torch.save(obj, path)
    return path


def test_checkpoint_with_pickled_objects_is_refused(tmp_path, tiny_tokenizer):
    """Checkpoints load with weights_only=True: a pickled object is an error with the fix, not code run."""
    path = tmp_path / "with_args.pt"
    torch.save(
        {"state_dict": torch.load(FIXTURES / "quickgelu_plain.pt"), "args": argparse.Namespace(lr=1)}, path
    )
    with pytest.raises(UserInputError, match="torch.save\\(state_dict\\)"):
        _convert(tmp_path, tiny_tokenizer, path)


def test_missing_key_is_named(tmp_path, tiny_tokenizer):
    path = _modified_checkpoint(tmp_path, "quickgelu_plain.pt", lambda s: s.pop("ln_final.bias"))
    with pytest.raises(UserInputError, match=r"missing.*ln_final\.bias"):
        _convert(tmp_path, tiny_tokenizer, path)


def test_unexpected_key_is_named(tmp_path, tiny_tokenizer):
    path = _modified_checkpoint(
        tmp_path,
        "quickgelu_plain.pt",
        lambda s: s.update({"visual.attnpool.positional_embedding": torch.zeros(2)}),
    )
    with pytest.raises(UserInputError, match=r"unexpected.*visual\.attnpool.*ResNet"):
        _convert(tmp_path, tiny_tokenizer, path)


def test_wrong_config_is_refused(tmp_path, tiny_tokenizer):
    with pytest.raises(UserInputError, match=r"transformer\.resblocks\.1\."):
        _convert(tmp_path, tiny_tokenizer, "quickgelu_plain.pt", GELU_JSON)
    with pytest.raises(
        UserInputError, match=r"visual\.proj has shape \[32, 16\] but config .* implies \[32, 12\]"
    ):
        _convert(tmp_path, tiny_tokenizer, "quickgelu_plain.pt", _config_with(None, embed_dim=12))


def test_lora_with_wrong_shapes_is_refused(tmp_path, tiny_tokenizer):
    key = "module.transformer.resblocks.0.mlp.c_fc.lora_B"
    path = _modified_checkpoint(tmp_path, "lora_tsvlc.pt", lambda s: s.update({key: torch.ones(7, 4)}))
    with pytest.raises(UserInputError, match=r"transformer\.resblocks\.0\.mlp\.c_fc\.lora_B"):
        _convert(tmp_path, tiny_tokenizer, path)


def test_lora_rank_is_checked_against_the_tensors(tmp_path, tiny_tokenizer):
    with pytest.raises(UserInputError, match="lora-rank 8.*rank 4"):
        _convert(tmp_path, tiny_tokenizer, "lora_tsvlc.pt", lora_rank=8)


def test_lora_without_partner_is_refused(tmp_path, tiny_tokenizer):
    path = _modified_checkpoint(tmp_path, "lora_tsvlc.pt", lambda s: s.pop("module.visual.conv1.lora_A"))
    with pytest.raises(UserInputError, match=r"visual\.conv1\.lora_B"):
        _convert(tmp_path, tiny_tokenizer, path)


def _config_with(section: str | None, **options) -> dict:
    cfg = json.loads(QUICKGELU_JSON.read_text())
    (cfg[section] if section else cfg).update(options)
    return cfg


@pytest.mark.parametrize(
    "config, pattern",
    [
        (_config_with("vision_cfg", qk_norm=True), "vision_cfg.qk_norm"),
        (_config_with("vision_cfg", attentional_pool=True), "vision_cfg.attentional_pool"),
        (_config_with("vision_cfg", no_ln_pre=True), "vision_cfg.no_ln_pre"),
        (_config_with("vision_cfg", pool_type="avg"), "vision_cfg.pool_type"),
        (_config_with("vision_cfg", ls_init_value=1e-5), "vision_cfg.ls_init_value"),
        (_config_with("text_cfg", no_causal_mask=True), "text_cfg.no_causal_mask"),
        (_config_with("text_cfg", proj_bias=True), "text_cfg.proj_bias"),
        (_config_with("text_cfg", embed_cls=True), "text_cfg.embed_cls"),
        (_config_with("text_cfg", pool_type="last"), "text_cfg.pool_type"),
        (_config_with("text_cfg", hf_model_name="roberta-base"), "text_cfg.hf_model_name"),
        (_config_with(None, init_logit_bias=-10), "init_logit_bias"),
        (_config_with("text_cfg", some_new_option=1), "unknown open_clip option 'text_cfg.some_new_option'"),
        (_config_with("vision_cfg", layers=[3, 4, 6, 3]), "ResNet"),
        (_config_with(None, multimodal_cfg={"width": 8}), "CoCa"),
        ("RN50", "ResNet and CoCa"),
        ("coca_ViT-B-32", "ResNet and CoCa"),
        ("ViT-X-99", "not a known open_clip model name"),
    ],
)
def test_unsupported_configs_are_refused_by_name(config, pattern):
    with pytest.raises(UserInputError, match=pattern.replace(".", r"\.").replace("(", r"\(")):
        load_open_clip_config(config)


def test_named_configs_match_open_clip():
    b32, b32q, h14 = (load_open_clip_config(n) for n in ("ViT-B-32", "ViT-B-32-quickgelu", "ViT-H-14"))
    assert (b32.activation, b32q.activation) == ("gelu", "quick_gelu")
    assert (b32.vision.heads, b32.text.heads, b32.vision.image_size, b32.embed_dim) == (12, 8, 224, 512)
    assert (h14.vision.heads, h14.vision.mlp_width) == (16, 5120)  # head_width 80
    inline = load_open_clip_config(QUICKGELU_JSON.read_text())
    assert inline.vision == load_open_clip_config(QUICKGELU_JSON).vision


def test_open_clip_checkpoint_needs_a_config(tmp_path, tiny_tokenizer):
    with pytest.raises(UserInputError, match="--config"):
        _convert(tmp_path, tiny_tokenizer, "quickgelu_plain.pt", None)


def test_tokenizer_matches_open_clip_ids(shared_data, tmp_path):
    """The CLIP BPE from a folder, and rebuilt from an open_clip-format merges file, give open_clip's ids."""
    import gzip

    reference = json.loads((FIXTURES / "tokenizer_ids.json").read_text())
    from_folder = load_clip_tokenizer(shared_data / "clip_tokenizer", 77)
    merges_gz = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(merges_gz, "wt", encoding="utf-8") as handle:
        handle.write((shared_data / "clip_tokenizer" / "merges.txt").read_text(encoding="utf-8"))
    from_bpe = clip_tokenizer_from_merges(read_bpe_merges(merges_gz), 77)
    for tokenizer in (from_folder, from_bpe):
        assert tokenizer.model_max_length == 77 and len(tokenizer) == 49408
        for text, ids in zip(reference["texts"], reference["ids"]):
            assert tokenizer(text)["input_ids"] == ids, text
    assert from_bpe.get_vocab() == from_folder.get_vocab()


def test_tokenizer_vocabulary_must_match_the_model(tmp_path, shared_data):
    with pytest.raises(UserInputError, match="49408 tokens but the model's vocabulary.*528"):
        convert_checkpoint(
            FIXTURES / "quickgelu_plain.pt",
            tmp_path / "out",
            QUICKGELU_JSON,
            tokenizer=shared_data / "clip_tokenizer",
            progress=False,
        )


def test_cache_converts_once_per_checkpoint_and_options(tmp_path, tiny_tokenizer, goldens, monkeypatch):
    options = dict(
        open_clip_config=QUICKGELU_JSON, tokenizer=tiny_tokenizer, cache_dir=tmp_path, progress=False
    )
    first = Path(resolve_model(FIXTURES / "quickgelu_ddp.pt", **options))
    model = CLIPModel.from_pretrained(first)
    assert max(max_abs_differences(model, goldens["inputs"], goldens["quickgelu_ddp"]).values()) <= TOLERANCE
    gelu = Path(resolve_model(FIXTURES / "quickgelu_ddp.pt", activation="gelu", **options))
    assert gelu != first and CLIPModel.from_pretrained(gelu).config.text_config.hidden_act == "gelu"

    def fail(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr("hf_hardpos.conversion.cache.convert_checkpoint", fail)
    assert Path(resolve_model(FIXTURES / "quickgelu_ddp.pt", **options)) == first
    copy = tmp_path / "renamed.pt"  # the key is the content, not the path
    copy.write_bytes((FIXTURES / "quickgelu_ddp.pt").read_bytes())
    assert Path(resolve_model(copy, **options)) == first


def test_resolve_model_converts_files_and_passes_hub_models_through(tmp_path, tiny_tokenizer, monkeypatch):
    monkeypatch.setenv("HARDPOS_CONVERTED_CACHE", str(tmp_path / "cache"))
    converted = resolve_model(
        FIXTURES / "openai_jit.pt", activation="gelu", tokenizer=tiny_tokenizer, progress=False
    )
    assert Path(converted).parent == tmp_path / "cache"
    assert CLIPModel.from_pretrained(converted).config.text_config.hidden_act == "gelu"
    assert resolve_model(str(tiny_tokenizer)) == str(tiny_tokenizer)  # a folder: loaded as it is
    assert resolve_model("openai/clip-vit-base-patch32") == "openai/clip-vit-base-patch32"
    with pytest.raises(UserInputError, match="openai/clip-vit-base-patch32.*--activation"):
        resolve_model("openai/clip-vit-base-patch32", activation="gelu")
    with pytest.raises(UserInputError, match="quickgelu_plain.pt.*--open-clip-config"):
        resolve_model(FIXTURES / "quickgelu_plain.pt")


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hardpos")
    subparsers = parser.add_subparsers(dest="command", required=True)
    convert_command.register(subparsers)
    zoo_command.register(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_preset_fills_activation_and_lora(tmp_path, tiny_tokenizer, capsys):
    out = tmp_path / "svlc"
    code = _run_cli(
        [
            "convert",
            "--preset",
            "svlc",
            "--checkpoint",
            str(FIXTURES / "lora_tsvlc.pt"),
            "--config",
            str(QUICKGELU_JSON),
            "--tokenizer",
            str(tiny_tokenizer),
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    svlc = PRESETS["svlc"]
    facts = json.loads((out / "conversion.json").read_text())
    assert (facts["preset"], facts["activation"]) == ("svlc", svlc.paper_activation) == ("svlc", "gelu")
    assert facts["lora"] == {"rank": 4, "alpha": 1.0, "merged_weights": 17}
    assert svlc.row in facts["activation_reason"]  # the reason names the preset's row, not the config
    card = (out / "README.md").read_text()
    assert svlc.citation in card and svlc.weights in card
    preset_line = next(line for line in card.splitlines() if line.startswith(f"For {svlc.row}:"))
    assert (
        re.findall(r"`(\w+)`", preset_line)
        == [svlc.trained_activation, svlc.paper_activation]
        == ["quick_gelu", "gelu"]
    )


def test_cli_openai_archive_needs_no_config(tmp_path, tiny_tokenizer, goldens, capsys):
    out = tmp_path / "openai"
    archive, tokenizer = str(FIXTURES / "openai_jit.pt"), str(tiny_tokenizer)
    _run_cli(["convert", "openai", archive, "--tokenizer", tokenizer, "--output-dir", str(out)])
    assert json.loads((out / "conversion.json").read_text())["checkpoint_kind"] == OPENAI_ARCHIVE
    model = CLIPModel.from_pretrained(out)
    assert max(max_abs_differences(model, goldens["inputs"], goldens["openai_jit"]).values()) <= TOLERANCE
    with pytest.raises(UserInputError, match=f"--output-dir {re.escape(str(out))}"):
        _run_cli(["convert", archive, "--tokenizer", tokenizer, "--output-dir", str(out)])


def test_cli_push_to_hub_offline_is_a_clear_error(tmp_path, tiny_tokenizer):
    out = tmp_path / "pushed"
    with pytest.raises(UserInputError, match=f"--push-to-hub me/tiny.*{re.escape(str(out))}"):
        _run_cli(
            [
                "convert",
                "open_clip",
                str(FIXTURES / "quickgelu_plain.pt"),
                "--config",
                str(QUICKGELU_JSON),
                "--tokenizer",
                str(tiny_tokenizer),
                "--output-dir",
                str(out),
                "--push-to-hub",
                "me/tiny",
                "--no-progress",
            ]
        )
    assert "me/tiny" in (out / "README.md").read_text()  # the card names the repo it was meant for


def test_zoo_lists_every_row(capsys):
    assert _run_cli(["zoo"]) == 0
    printed = capsys.readouterr().out
    for name in (
        "negclip",
        "crepe-swap",
        "crepe-replace",
        "svlc",
        "svlc-pos",
        "dac-llm",
        "dac-sam",
        "hn",
        "hp-hn",
        "ce-clip",
        "clip-coco",
        "clip",
    ):
        assert name in PRESETS and name in printed
    assert NO_PUBLIC_RELEASE in printed and "1ooVVPxB-tvptgmHlIMMFGV3Cg-IrhbRZ" in printed
    assert all(p.citation in citations.BIBTEX for p in PRESETS.values())


@needs_open_clip
@pytest.mark.parametrize("golden, checkpoint, config, activation", CASES, ids=[c[0] for c in CASES])
def test_verification_against_real_open_clip(
    tmp_path, tiny_tokenizer, golden, checkpoint, config, activation
):
    """Every fixture checkpoint converted where open_clip imports (`.ci/openclip_env.sh`): the converter
    builds the same model in open_clip and compares features (`verify_against_open_clip`); the card records it."""
    result, _ = _convert(tmp_path, tiny_tokenizer, checkpoint, config, activation=activation)
    assert result.verification is not None, golden
    assert max(v for k, v in result.verification.items() if k.startswith("max_abs")) <= TOLERANCE
    assert (
        f"{result.verification['max_abs_diff_text_features']:.3g}"
        in (tmp_path / "converted" / "README.md").read_text()
    )


def test_fixed_inputs_put_eos_at_the_largest_id():
    config = load_open_clip_config(QUICKGELU_JSON)
    inputs = fixed_inputs(config)
    assert inputs["input_ids"].max() == config.text.vocab_size - 1
    assert inputs["input_ids"].argmax(-1).tolist() == [4, 7, 15]


def test_converted_checkpoint_scores_like_any_hf_model(tmp_path, tiny_tokenizer):
    """The evaluation path: cache -> `ModelSource.load` -> `ITMScorer`, once per activation."""
    dataset = make_eval_set(num_images=3, rows_per_image=2)
    scores = {}
    for activation in ("quick_gelu", "gelu"):
        folder = resolve_model(
            FIXTURES / "quickgelu_ddp.pt",
            QUICKGELU_JSON,
            activation,
            tokenizer=tiny_tokenizer,
            cache_dir=tmp_path,
            progress=False,
        )
        model, processor = ModelSource.resolve(folder).load()
        scorer = ITMScorer(model, processor, batch_size=4, progress=False)
        assert scorer.max_length == 16
        scores[activation] = scorer.score(dataset)["caption"]
        assert scores[activation].shape == (len(dataset),)
        assert torch.isfinite(torch.from_numpy(scores[activation])).all()
    assert abs(scores["quick_gelu"] - scores["gelu"]).max() > 1e-4  # the mismatch `--activation both` shows


def test_converted_processor_gives_open_clip_ids(tmp_path, shared_data):
    """A model with CLIP's real vocabulary and context: its saved processor tokenizes as open_clip does."""
    state = torch.load(FIXTURES / "quickgelu_plain.pt", weights_only=True)
    width = state["token_embedding.weight"].shape[1]
    state["token_embedding.weight"] = torch.randn(49408, width) * 0.02
    state["positional_embedding"] = torch.randn(77, width) * 0.01
    path = tmp_path / "full_vocab.pt"
    torch.save(state, path)
    config = _config_with("text_cfg", vocab_size=49408, context_length=77)
    convert_checkpoint(
        path, tmp_path / "out", config, tokenizer=shared_data / "clip_tokenizer", verify=False, progress=False
    )
    processor = AutoProcessor.from_pretrained(tmp_path / "out")
    reference = json.loads((FIXTURES / "tokenizer_ids.json").read_text())
    assert processor.tokenizer.model_max_length == reference["context_length"] == 77
    assert processor(text=reference["texts"])["input_ids"] == reference["ids"]
