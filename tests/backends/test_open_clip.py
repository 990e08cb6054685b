"""The open_clip backend (`--model open_clip:...`, `--backend open_clip FILE`): models `CLIPModel` cannot hold.

Two parts. Everywhere: the model strings, the refusals and the one-line error without the extra.
Against real open_clip (`pytest -m open_clip`, in the side venv `.ci/openclip_env.sh` builds: open_clip
needs torchvision, whose wheel does not load beside the main environment's CPU torch; `.ci/run` runs
them there on every run): a tiny ResNet-tower CLIP and a tiny RoBERTa-text-tower CLIP scored through
`ITMScorer` / `hardpos eval` give the per-row scores real open_clip gives when called directly
(`tests/fixtures/open_clip/native_goldens.pt`, written by `make_native_goldens.py`), and models open_clip
makes and saves during the test give, through `hardpos eval --native` on a REPLACE-layout folder, every
row's s_c, s_n, s_p that open_clip's own preprocessing, tokenizer and encoders give.

    .ci/openclip_env.sh tests/backends/test_open_clip.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset, Features, Value
from datasets import Image as ImageFeature

from hf_hardpos.backends import BACKENDS, ModelOptions, backend_for
from hf_hardpos.backends.open_clip import OpenClipSpec, parse
from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.metrics import compute_metrics
from hf_hardpos.provenance import sha256_file
from tests.support.open_clip_env import needs_open_clip
from tests.support.paths import OPEN_CLIP_FIXTURES as FIXTURES

OPEN_CLIP = BACKENDS["open_clip"]
COLUMNS = ("caption", "hard_negative", "hard_positive")


# -- model strings and refusals (no open_clip needed) -------------------------------------------------


@pytest.mark.parametrize(
    ("model", "name", "pretrained"),
    [
        ("open_clip:RN50x16/openai", "RN50x16", "openai"),
        (
            "open_clip:hf-hub:laion/CLIP-ViT-B-32-roberta-base-laion2B-s12B-b32k",
            "hf-hub:laion/CLIP-ViT-B-32-roberta-base-laion2B-s12B-b32k",
            None,
        ),
        ("open_clip:ViT-B-32//models/negclip.pt", "ViT-B-32", "/models/negclip.pt"),
        ("open_clip:/configs/tiny.json//models/tiny.pt", "/configs/tiny.json", "/models/tiny.pt"),
    ],
)
def test_model_strings_parse(model, name, pretrained):
    spec = parse(model)
    assert backend_for(model) is OPEN_CLIP
    assert (spec.model_name, spec.pretrained, spec.activation, spec.tokenizer) == (
        name,
        pretrained,
        None,
        None,
    )
    assert parse(spec.to_model_string()) == spec  # the resolved form reads back


def test_resolve_folds_options_and_absolute_paths(tmp_path, monkeypatch):
    checkpoint = tmp_path / "ckpt.pt"
    checkpoint.write_bytes(b"weights")
    config = tmp_path / "cfg.json"
    config.write_text("{}")
    monkeypatch.chdir(tmp_path)
    resolved = parse(OPEN_CLIP.resolve("open_clip:cfg.json/ckpt.pt", ModelOptions(None, "gelu", "clip")))
    assert resolved == OpenClipSpec(str(config), str(checkpoint), "gelu", "clip")
    tag = parse(OPEN_CLIP.resolve("open_clip:RN101/openai", ModelOptions(activation="quick_gelu")))
    assert (tag.model_name, tag.pretrained, tag.activation, tag.tokenizer) == (
        "RN101",
        "openai",
        "quick_gelu",
        None,
    )
    # docs/models.md's three spellings of a checkpoint file in a config name the same model.
    from hf_hardpos.commands._eval_runs import backend_model

    spellings = [
        ("open_clip:ViT-B-32/ckpt.pt", None),
        ("open_clip:ckpt.pt", "ViT-B-32"),
        (backend_model("open_clip", "ckpt.pt", "ViT-B-32")[0], None),
    ]
    resolved = {
        OPEN_CLIP.resolve(model, ModelOptions(open_clip_config=config)) for model, config in spellings
    }
    assert {parse(model) for model in resolved} == {OpenClipSpec("ViT-B-32", str(checkpoint))}
    with_json = OPEN_CLIP.resolve("open_clip:ckpt.pt", ModelOptions(open_clip_config={"embed_dim": 8}))
    assert parse(with_json) == OpenClipSpec('{"embed_dim": 8}', str(checkpoint))


def test_openai_tag_is_openai_weights_as_given_and_resolved():
    """The paper scored OpenAI's weights through `clip.load` (fp16 on CUDA): the backend recognises its tag."""
    from hf_hardpos.backends import ResolvedModel

    given = "open_clip:RN50x16/openai"
    resolved = OPEN_CLIP.resolve(given, ModelOptions())
    assert OPEN_CLIP.holds_openai_release(given, {}) and OPEN_CLIP.holds_openai_release(resolved, {})
    assert not OPEN_CLIP.holds_openai_release("open_clip:ViT-B-32/laion2b_s34b_b79k", {})
    model = ResolvedModel(given, resolved, {}, ModelOptions(), OPEN_CLIP.name)
    assert model.paper_precision("cuda")[0] == "fp16-weights" and model.paper_precision("cpu")[0] == "fp32"


def test_a_config_given_twice_names_the_spelling_that_works(tmp_path):
    """--open-clip-config with a model that names its own config: the error's suggested spelling scores the file."""
    from hf_hardpos.commands._eval_runs import backend_model

    checkpoint = tmp_path / "ckpt.pt"
    checkpoint.write_bytes(b"weights")
    with pytest.raises(UserInputError) as caught:
        OPEN_CLIP.resolve(f"open_clip:RN50x16/{checkpoint}", ModelOptions(open_clip_config="RN50x16"))
    assert "--model FILE --native --open-clip-config C" in str(caught.value)
    model, _ = backend_model("open_clip", str(checkpoint), "RN50x16")  # that spelling
    assert parse(OPEN_CLIP.resolve(model, ModelOptions())) == OpenClipSpec("RN50x16", str(checkpoint))


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("open_clip:RN50x16", {}),  # no weights named
        ("open_clip:hf-hub:laion", {}),
        ("open_clip:RN50x16/openai", {"open_clip_config": "RN50x16"}),  # config given twice
        ("open_clip:RN50x16/openai", {"activation": "relu"}),
        ("open_clip:RN50x16/openai", {"tokenizer": "openai/clip-vit-base-patch32"}),
        ("open_clip:ViT-B-32//no/such/file.pt", {}),
        ("open_clip:/no/such/config.json//no/such/file.pt", {}),
    ],
)
def test_resolve_refuses_what_cannot_apply(model, options):
    with pytest.raises(UserInputError):
        OPEN_CLIP.resolve(model, ModelOptions(**options))


def test_without_open_clip_the_error_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "open_clip", None)  # `import open_clip` raises ImportError
    with pytest.raises(UserInputError) as caught:
        OPEN_CLIP.identity("open_clip:RN50x16/openai")
    assert "[openclip]" in str(caught.value) and "\n" not in str(caught.value)
    folder = tmp_path / "data"
    _hub_folder(folder)
    code = main(["eval", "--model", "open_clip:RN50x16/openai", "--dataset", str(folder), "--no-progress"])
    assert code == UserInputError.exit_code
    assert "[openclip]" in capsys.readouterr().err


def test_backend_flag_needs_a_file_and_a_config(tmp_path):
    checkpoint = tmp_path / "ckpt.pt"
    checkpoint.write_bytes(b"weights")
    folder = _hub_folder(tmp_path / "data")
    for argv in (
        ["--model", str(checkpoint), "--native"],
        ["--model", str(checkpoint), "--backend", "open_clip"],
        ["--model", "openai/clip-vit-base-patch32", "--native", "--open-clip-config", "ViT-B-32"],
        ["--model", "open_clip:RN50x16/openai", "--backend", "hf"],
    ):
        assert main(["eval", *argv, "--dataset", str(folder), "--no-progress"]) == UserInputError.exit_code


def test_backend_flag_spells_a_checkpoint_in_the_backends_syntax(tmp_path):
    """`--model FILE --backend open_clip --open-clip-config C` (or `--native`) is `open_clip:C/FILE`; hf keeps the file."""
    from hf_hardpos.commands._eval_runs import backend_model

    checkpoint = tmp_path / "ckpt.pt"
    checkpoint.write_bytes(b"weights")
    model, config = backend_model("open_clip", str(checkpoint), "ViT-B-32")
    assert (model, config) == (f"open_clip:ViT-B-32/{checkpoint.resolve()}", None)
    assert parse(model) == OpenClipSpec("ViT-B-32", str(checkpoint.resolve()))
    as_json = backend_model("open_clip", str(checkpoint), '{"embed_dim": 8}')[0]
    assert parse(as_json) == OpenClipSpec('{"embed_dim": 8}', str(checkpoint.resolve()))
    assert backend_model("hf", str(checkpoint), "ViT-B-32") == (str(checkpoint), "ViT-B-32")


class _FakeOpenClipNet(torch.nn.Module):
    """What the adapter calls of an open_clip model: `encode_image`, `encode_text` (ids padded with 0 to the
    context length: like open_clip's text towers it adds its whole positional table, so other widths fail)."""

    def __init__(self, context: int):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.words = torch.nn.Embedding(40, 3)
        torch.nn.init.normal_(self.words.weight, generator=generator)
        self.positions = torch.nn.Parameter(torch.randn(context, 3, generator=generator))

    def encode_image(self, pixels):
        return pixels.mean(dim=(2, 3))

    def encode_text(self, ids):
        return (self.words(ids) + self.positions).sum(1)


class _FakeSimpleTokenizer:
    """open_clip's SimpleTokenizer calls: `encode`, SOT/EOT ids, and `__call__` padding to the context."""

    sot_token_id, eot_token_id = 38, 39

    def encode(self, text):
        return [1 + sum(map(ord, word)) % 36 for word in text.split()]

    def __call__(self, texts, context_length):
        rows = torch.zeros(len(texts), context_length, dtype=torch.long)
        for row, text in enumerate(texts):
            ids = [self.sot_token_id, *self.encode(text)][: context_length - 1] + [self.eot_token_id]
            rows[row, : len(ids)] = torch.tensor(ids)
        return rows


def test_adapters_score_through_itm_scorer_as_the_model_computes():
    """The scorer's calls (tokenize with and without truncation, pixel values, features) reach the
    open_clip model as open_clip's own API takes them; a caption longer than the context is cut as
    open_clip cuts it (EOT kept last)."""
    from hf_hardpos.backends.open_clip_adapters import (
        OpenClipDualEncoder,
        OpenClipImageProcessor,
        OpenClipProcessor,
        OpenClipTokenizer,
    )
    from hf_hardpos.image_processing import describe_image_processor
    from hf_hardpos.scoring import ITMScorer

    def transform(image):
        return torch.from_numpy(
            np.asarray(image.convert("RGB").resize((4, 4)), dtype=np.float32).transpose(2, 0, 1)
        )

    net, bpe, context = _FakeOpenClipNet(5), _FakeSimpleTokenizer(), 5
    processor = OpenClipProcessor(OpenClipTokenizer(bpe, context), OpenClipImageProcessor(transform))
    assert describe_image_processor(processor.image_processor)["backend"] == "open_clip"
    rows = {
        "image": [_png(i) for i in range(3)],
        "caption": ["a red cube", "one two three four five six", "b"],
        "hard_negative": ["a blue cube", "x", "c d"],
        "hard_positive": ["red cube", "y z", "b b"],
    }
    scores = ITMScorer(OpenClipDualEncoder(net, context), processor, batch_size=2, progress=False).score(rows)
    assert scores.truncation.truncated_captions == 1
    with torch.no_grad():
        for row in range(3):
            image = net.encode_image(transform(rows["image"][row]).unsqueeze(0))
            for column in COLUMNS:
                text = net.encode_text(bpe([rows[column][row]], context))
                expected = float(torch.nn.functional.cosine_similarity(image.double(), text.double()))
                assert abs(scores[column][row] - expected) < 1e-6, (row, column)


def _png(seed: int):
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (6, 8, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


# -- against real open_clip (its own venv) -------------------------------------------------------------


def _goldens() -> dict:
    import torch

    return torch.load(FIXTURES / "native_goldens.pt", weights_only=False)


def _dataset() -> Dataset:
    rows = dict(_goldens()["rows"])
    rows["image"] = [{"bytes": png, "path": None} for png in rows["image"]]
    features = Features({"image": ImageFeature(), **{c: Value("string") for c in ("image_id", *COLUMNS)}})
    return Dataset.from_dict(rows, features=features)


def _hub_folder(root: Path) -> Path:
    """The golden rows as a one-config Hub-style folder (what `hardpos eval --dataset` reads)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    _dataset().to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*.parquet\n---\n"
    )
    return root


def _make_native_goldens():
    """`tests/fixtures/open_clip/make_native_goldens.py`, the script that makes the fixtures with open_clip."""
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_native_goldens
    finally:
        sys.path.remove(str(FIXTURES))
    return make_native_goldens


def _configs(folder: Path) -> dict[str, Path]:
    """The fixtures' model configs, with the absolute paths they need (as make_native_goldens.py writes them)."""
    make = _make_native_goldens()
    bpe = make.write_bpe(folder)
    configs = {
        "resnet": make.native_resnet_config(bpe),
        "roberta": make.native_roberta_config(FIXTURES / "tiny-roberta"),
    }
    for name, config in configs.items():
        (folder / f"{name}.json").write_text(json.dumps(config))
    return {name: folder / f"{name}.json" for name in configs}


def _scores(model: str) -> dict[str, np.ndarray]:
    from hf_hardpos.scoring import ITMScorer

    loaded, processor = OPEN_CLIP.load(model, "pil")
    scores = ITMScorer(loaded, processor, batch_size=4, progress=False).score(_dataset())
    return {column: scores[column] for column in COLUMNS}


@needs_open_clip
@pytest.mark.parametrize(
    ("tower", "golden", "activation"),
    [("resnet", "resnet", None), ("resnet", "resnet_as_gelu", "gelu"), ("roberta", "roberta", None)],
)
def test_adapter_scores_equal_open_clip_called_directly(tmp_path, tower, golden, activation):
    configs = _configs(tmp_path)
    model = OPEN_CLIP.resolve(
        f"open_clip:{configs[tower]}/{FIXTURES / f'native_{tower}.pt'}", ModelOptions(activation=activation)
    )
    ours = _scores(model)
    for column in COLUMNS:
        np.testing.assert_allclose(ours[column], _goldens()[golden][column].numpy(), rtol=0, atol=1e-6)


def _replace_rows(rows: int, seed: int) -> dict[str, list]:
    """REPLACE-shaped rows: PNG images of several sizes shared by ~2.3 rows each, short captions and a few
    longer than the tiny models' 16-token context (cut as open_clip cuts them)."""
    make = _make_native_goldens()
    rng = np.random.default_rng(seed)
    table: dict[str, list] = {"image": [], "image_id": [], **{column: [] for column in COLUMNS}}
    images = [_png_bytes(rng) for _ in range(rows * 3 // 7 + 1)]
    for row in range(rows):
        table["image"].append(images[row * 3 // 7])
        table["image_id"].append(str(row * 3 // 7))
        for column in COLUMNS:
            words = int(rng.integers(2, 7)) if row % 13 else 20
            table[column].append(" ".join(rng.choice(make.WORDS, size=words)))
    return table


def _png_bytes(rng: np.random.Generator) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    height, width = (int(v) for v in rng.integers(24, 96, size=2))
    Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@needs_open_clip
@pytest.mark.parametrize("tower", ["resnet", "roberta"])
def test_native_route_scores_every_row_as_open_clip_itself(tmp_path, tower):
    """A model open_clip makes and saves now (a ModifiedResNet image tower, or a Hugging Face RoBERTa text
    tower), scored by `hardpos eval --model FILE --native --open-clip-config CFG` on a 120-row folder laid
    out as REPLACE (attributes and relations): every row's s_c, s_n, s_p equal what open_clip gives called
    directly (`make_native_goldens.direct_scores`: its own eval transform and tokenizer, `encode_image` /
    `encode_text`, cosine of the normalised features) within 1e-5."""
    import open_clip
    import pyarrow.parquet as pq

    from hf_hardpos.columns import REPLACE_SUBSETS
    from tests.support.eval_data import write_hub_folder

    make = _make_native_goldens()
    config = _configs(tmp_path)[tower]
    name = make.register(json.loads(config.read_text()), f"check-{tower}", tmp_path)
    built = open_clip.create_model(name, **({"pretrained_text": False} if tower == "roberta" else {}))
    checkpoint = tmp_path / f"{tower}.pt"
    torch.save(make.randomise(built, seed=49).state_dict(), checkpoint)
    rows = {subset: _replace_rows(60, seed) for seed, subset in enumerate(REPLACE_SUBSETS)}
    features = Features({"image": ImageFeature(), **{c: Value("string") for c in ("image_id", *COLUMNS)}})
    sets = {
        subset: Dataset.from_dict(
            {**table, "image": [{"bytes": png, "path": None} for png in table["image"]]}, features=features
        )
        for subset, table in rows.items()
    }
    folder = write_hub_folder(tmp_path / "replace", sets)
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--model",
                str(checkpoint),
                "--native",
                "--open-clip-config",
                str(config),
                "--dataset",
                str(folder),
                "--output",
                str(out),
                "--batch-size",
                "16",
                "--no-progress",
            ]
        )
        == 0
    )
    for subset, table in rows.items():
        saved = pq.read_table(out / f"scores-{subset}.parquet").to_pydict()
        expected = make.direct_scores(name, checkpoint, table)
        assert len(saved["row"]) == 60
        for column, field in zip(COLUMNS, ("original_score", "negative_score", "positive_score")):
            np.testing.assert_allclose(
                saved[field], expected[column].numpy(), rtol=0, atol=1e-5, err_msg=column
            )


@needs_open_clip
def test_config_as_json_text_or_hub_style_file_gives_the_same_scores(tmp_path):
    """--open-clip-config also takes JSON text, and open_clip's Hub-style {"model_cfg": ...} file."""
    config = json.loads(_configs(tmp_path)["resnet"].read_text())
    checkpoint = str(FIXTURES / "native_resnet.pt")
    hub_style = tmp_path / "open_clip_config.json"
    hub_style.write_text(json.dumps({"model_cfg": config, "preprocess_cfg": {}}))
    for model in (
        OpenClipSpec(json.dumps(config), checkpoint).to_model_string(),
        OPEN_CLIP.resolve(f"open_clip:{hub_style}/{checkpoint}", ModelOptions()),
    ):
        ours = _scores(model)
        for column in COLUMNS:
            np.testing.assert_allclose(ours[column], _goldens()["resnet"][column].numpy(), rtol=0, atol=1e-6)
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--model",
                checkpoint,
                "--native",
                "--open-clip-config",
                json.dumps(config),
                "--dataset",
                str(_hub_folder(tmp_path / "data")),
                "--output",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    expected = compute_metrics(*(_goldens()["resnet"][c].numpy() for c in COLUMNS))
    saved = json.loads((out / "metrics.json").read_text())["results"]["default"]
    assert saved["augmented_accuracy"] == expected["augmented_accuracy"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"vision_cfg": config["vision_cfg"]}))
    with pytest.raises(UserInputError):
        OPEN_CLIP.identity(OPEN_CLIP.resolve(f"open_clip:{bad}/{checkpoint}", ModelOptions()))


@needs_open_clip
def test_hardpos_eval_native_records_weights_activation_and_preprocessing(tmp_path, capsys):
    configs = _configs(tmp_path)
    checkpoint = FIXTURES / "native_resnet.pt"
    out = tmp_path / "out"
    argv = [
        "eval",
        "--model",
        str(checkpoint),
        "--native",
        "--open-clip-config",
        str(configs["resnet"]),
        "--dataset",
        str(_hub_folder(tmp_path / "data")),
        "--output",
        str(out),
        "--batch-size",
        "4",
        "--no-progress",
    ]
    assert main(argv) == 0
    saved = json.loads((out / "metrics.json").read_text())
    identity = saved["run"]["model_identity"]
    assert identity["sha256"] == sha256_file(checkpoint)
    facts = identity["open_clip"]
    assert (facts["activation"], facts["context_length"], facts["preprocess"]["size"]) == (
        "quick_gelu",
        16,
        [64, 64],
    )
    assert (
        facts["preprocess"]["interpolation"] == "bicubic" and facts["preprocess"]["resize_mode"] == "shortest"
    )
    golden = _goldens()["resnet"]
    expected = compute_metrics(*(golden[c].numpy() for c in COLUMNS))
    for name in ("original_accuracy", "augmented_accuracy", "brittleness", "num_examples"):
        assert saved["results"]["default"][name] == expected[name], name
    # Caption cells longer than the context, counted with open_clip's own tokenizer (SOT + BPE + EOT).
    import open_clip

    bpe = open_clip.SimpleTokenizer(bpe_path=str(tmp_path / "tiny_bpe.txt.gz"))
    rows = _goldens()["rows"]
    cut = sum(len(bpe.encode(text)) + 2 > 16 for column in COLUMNS for text in rows[column])
    assert 0 < cut < 18 and saved["provenance"]["default"]["truncation"]["truncated_captions"] == cut
    # Resumed: same identity, nothing rescored; --activation gelu is another model (other key).
    assert main(argv) == 0
    assert "default" in json.loads((out / "metrics.json").read_text())["results"]
    gelu_out = tmp_path / "gelu"
    argv_gelu = [
        *argv[:-5],
        "--output",
        str(gelu_out),
        "--activation",
        "gelu",
        "--batch-size",
        "4",
        "--no-progress",
    ]
    assert main(argv_gelu) == 0
    gelu = json.loads((gelu_out / "metrics.json").read_text())
    assert gelu["run"]["model_identity"]["open_clip"]["activation"] == "gelu"
    assert gelu["run"]["key"] != saved["run"]["key"]


@needs_open_clip
def test_clip_tokenizer_option_feeds_clip_bpe_ids(tmp_path):
    """The paper's tokenization of its RoBERTa row: open_clip's CLIP BPE (77-token default context
    here 16) whatever the text tower; the model's own tokenizer is the default."""
    import open_clip

    configs = _configs(tmp_path)
    checkpoint = FIXTURES / "native_roberta.pt"
    _, own = OPEN_CLIP.load(
        OPEN_CLIP.resolve(f"open_clip:{configs['roberta']}/{checkpoint}", ModelOptions()), "pil"
    )
    _, clip = OPEN_CLIP.load(
        OPEN_CLIP.resolve(f"open_clip:{configs['roberta']}/{checkpoint}", ModelOptions(tokenizer="clip")),
        "pil",
    )
    text = ["a red cube left of a blue sphere"]
    expected = open_clip.SimpleTokenizer(context_length=16)(text)
    assert clip.tokenizer(text, max_length=16)["input_ids"] == expected.tolist()
    assert own.tokenizer(text, max_length=16)["input_ids"] != expected.tolist()


# -- hardpos zoo: every Table 8 row, its route and --model ---------------------------------------------

TABLE8_ROWS = {
    "CLIP ViT-B/16",
    "CLIP ViT-L/14",
    "OpenCLIP ViT-H/14",
    "OpenCLIP ViT-g/14",
    "OpenCLIP ViT-bigG/14",
    "OpenCLIP RoBERTa-ViT-B/32",
    "DataComp ViT-B/32",
    "DataComp ViT-B/16",
    "DataComp ViT-L/14",
    "CLIP RN50x16",
    "CLIP RN50x64",
    "CLIP RN101",
    "XVLM",
}


def test_zoo_lists_every_table8_row_with_a_route_and_a_model(capsys):
    from hf_hardpos.conversion.presets import (
        PRETRAINED_PRESETS,
        ROUTE_HF,
        ROUTE_NONE,
        ROUTE_OPEN_CLIP,
    )
    from hf_hardpos.published import lookup

    presets = list(PRETRAINED_PRESETS.values())
    assert {p.row for p in presets} == TABLE8_ROWS and len(presets) == len(TABLE8_ROWS)
    by_open_clip = {p.row for p in presets if p.route == ROUTE_OPEN_CLIP}
    assert by_open_clip == {"CLIP RN50x16", "CLIP RN50x64", "CLIP RN101", "OpenCLIP RoBERTa-ViT-B/32"}
    for preset in presets:
        if preset.route != ROUTE_NONE:  # a route is the backend that recognises the row's --model
            assert backend_for(preset.model).name == preset.route
        if preset.route == ROUTE_OPEN_CLIP:
            spec = parse(preset.model)
            assert spec.pretrained in {"openai", "laion2b_s12b_b32k"}
        elif preset.route == ROUTE_HF:
            assert preset.model.count("/") == 1
            if preset.other_route:  # LAION weights: open_clip's own loading as the other route
                assert backend_for(preset.other_route) is OPEN_CLIP and parse(preset.other_route).pretrained
        else:
            assert preset.route == ROUTE_NONE and preset.model == "" and preset.note
    assert main(["zoo"]) == 0
    printed = capsys.readouterr().out
    for preset in presets:
        line = next(line for line in printed.splitlines() if line.startswith(preset.name + " "))
        assert preset.route in line and preset.row in line
    # Published figures come from hf_hardpos.published (e.g. CLIP ViT-B/16 on REPLACE).
    b16 = next(line for line in printed.splitlines() if line.startswith("clip-vit-b-16 "))
    expected = " / ".join(
        f"{lookup('CLIP ViT-B/16', 'replace', m).value:.1f}"
        for m in ("original_accuracy", "augmented_accuracy", "brittleness")
    )
    assert expected in b16


@needs_open_clip
def test_open_clip_presets_name_open_clip_tags_and_openai_files():
    """Each open_clip preset's tag exists in open_clip; OpenAI's URLs match open_clip's (the hex is the sha256)."""
    from open_clip.pretrained import get_pretrained_cfg

    from hf_hardpos.conversion.presets import PRETRAINED_PRESETS, ROUTE_OPEN_CLIP

    for preset in PRETRAINED_PRESETS.values():
        for model in (preset.model, preset.other_route):
            if backend_for(model) is not OPEN_CLIP:
                continue
            spec = parse(model)
            tag = get_pretrained_cfg(spec.model_name, spec.pretrained)
            assert tag, model
            if spec.pretrained == "openai":
                assert preset.weights == tag["url"] and tag["quick_gelu"]
            elif preset.route == ROUTE_OPEN_CLIP:
                assert tag["hf_hub"].rstrip("/") in preset.weights
