"""Zero-shot classification and retrieval on clip_benchmark's webdataset layout.

Each test writes a tiny webdataset in the exact upstream layout (tar shards, nshards.txt, root
metadata files), then checks our numbers against (a) a naive per-sample loop that reads the tars
with `tarfile` and (b) clip_benchmark's own metric code (`pip install --no-deps clip_benchmark`).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.tasks.ranking import strict_rank
from hf_hardpos.evaluation.tasks.webdataset import (
    ZEROSHOT_CLASSIFICATION,
    ZEROSHOT_RETRIEVAL,
    detect_webdataset_task,
    is_clip_benchmark_webdataset,
    load_clip_benchmark_webdataset,
)
from hf_hardpos.evaluation.tasks.zeroshot_classification import (
    classification_metrics,
    evaluate_zeroshot_classification,
)
from hf_hardpos.evaluation.tasks.zeroshot_retrieval import (
    evaluate_zeroshot_retrieval,
    retrieval_metrics,
)
from hf_hardpos.scoring import ITMScorer
from tests.support.webdataset import (
    CLASSNAMES,
    TEMPLATES,
    WORDS,
    image_bytes,
    read_webdataset,
    write_webdataset,
)


@pytest.fixture(scope="module")
def scorer(model_and_processor):
    return ITMScorer(*model_and_processor, batch_size=5, progress=False)


@pytest.fixture(scope="module")
def classification_dir(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    samples = [{"png": image_bytes(rng, "PNG"), "cls": str(i % len(CLASSNAMES)).encode()} for i in range(15)]
    samples[3] = dict(samples[0])  # a repeated image: encoded once, counted twice
    return write_webdataset(
        tmp_path_factory.mktemp("wds_cls"),
        samples,
        nshards=2,
        classnames="\n".join(CLASSNAMES) + "\n",
        zeroshot_classification_templates="\n".join(TEMPLATES) + "\n",
    )


@pytest.fixture(scope="module")
def retrieval_dir(tmp_path_factory) -> Path:
    rng = np.random.default_rng(1)
    samples = []
    for i in range(12):
        captions = [" ".join(rng.choice(WORDS, size=rng.integers(2, 6))) for _ in range(1 + i % 3)]
        samples.append({"webp": image_bytes(rng, "WEBP"), "txt": "\n".join(captions).encode()})
    return write_webdataset(
        tmp_path_factory.mktemp("wds_ret"), samples, nshards=3, dataset_type="retrieval\n"
    )


# ---- naive reference: one sample, one prompt at a time ---------------------------------------------


def _embed_image(model, processor, data: bytes) -> torch.Tensor:
    pixels = processor(images=Image.open(io.BytesIO(data)).convert("RGB"), return_tensors="pt")[
        "pixel_values"
    ]
    with torch.no_grad():
        return torch.nn.functional.normalize(
            model.get_image_features(pixel_values=pixels).pooler_output[0], dim=-1
        )


def _embed_text(model, processor, text: str) -> torch.Tensor:
    tokens = processor.tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        return torch.nn.functional.normalize(model.get_text_features(**tokens).pooler_output[0], dim=-1)


def naive_classification(model, processor, root: Path) -> dict:
    classifier = []
    for name in CLASSNAMES:
        mean = torch.stack([_embed_text(model, processor, t.format(c=name)) for t in TEMPLATES]).mean(0)
        classifier.append(mean / mean.norm())
    correct1, correct5, per_class = [], [], {}
    for sample in read_webdataset(root):
        label = int(sample["cls"])
        logits = [float(_embed_image(model, processor, sample["png"]) @ w) for w in classifier]
        order = sorted(range(len(logits)), key=lambda c: -logits[c])
        correct1.append(order[0] == label)
        correct5.append(label in order[:5])
        per_class.setdefault(label, []).append(order[0] == label)
    return {
        "acc1": np.mean(correct1),
        "acc5": np.mean(correct5),
        "mean_per_class_recall": np.mean([np.mean(v) for v in per_class.values()]),
    }


def naive_retrieval(model, processor, root: Path) -> dict:
    images, texts, owner = [], [], []
    for row, sample in enumerate(read_webdataset(root)):
        images.append(_embed_image(model, processor, sample["webp"]))
        for caption in sample["txt"].decode().splitlines():
            texts.append(_embed_text(model, processor, caption))
            owner.append(row)
    result = {}
    for k in (1, 5, 10):
        hits = []
        for j, text in enumerate(texts):
            scores = [float(text @ image) for image in images]
            hits.append(owner[j] in sorted(range(len(images)), key=lambda i: -scores[i])[:k])
        result[f"image_retrieval_recall@{k}"] = np.mean(hits)
        hits = []
        for i, image in enumerate(images):
            scores = [float(image @ text) for text in texts]
            top = sorted(range(len(texts)), key=lambda j: -scores[j])[:k]
            hits.append(any(owner[j] == i for j in top))
        result[f"text_retrieval_recall@{k}"] = np.mean(hits)
    return result


# ---- reader ----------------------------------------------------------------------------------------


def test_reader_detects_task_and_reads_every_sample(classification_dir, retrieval_dir, tmp_path):
    assert is_clip_benchmark_webdataset(classification_dir) and is_clip_benchmark_webdataset(retrieval_dir)
    assert not is_clip_benchmark_webdataset(tmp_path)
    assert detect_webdataset_task(classification_dir) == ZEROSHOT_CLASSIFICATION
    assert detect_webdataset_task(retrieval_dir) == ZEROSHOT_RETRIEVAL
    assert detect_webdataset_task(classification_dir, split="train") is None

    loaded = load_clip_benchmark_webdataset(classification_dir, cache_dir=str(tmp_path / "cache"))
    assert loaded.classnames == CLASSNAMES and loaded.templates == TEMPLATES
    assert loaded.image_column == "png" and len(loaded.dataset) == 15
    reference = read_webdataset(classification_dir)
    assert sorted(loaded.dataset["cls"]) == sorted(int(s["cls"]) for s in reference)

    retrieval = load_clip_benchmark_webdataset(retrieval_dir, cache_dir=str(tmp_path / "cache"))
    assert retrieval.task == ZEROSHOT_RETRIEVAL and retrieval.image_column == "webp"
    assert retrieval.classnames is None and len(retrieval.dataset) == 12


@pytest.mark.parametrize(
    "broken, message",
    [
        ("no_nshards", "no test/nshards.txt"),
        ("missing_shard", "1 are missing"),
        ("no_classnames", "needs classnames.txt"),
        ("multilabel", "multi-label"),
        ("bad_count", "must hold a shard count"),
        ("mixed_formats", "do not all have the same fields"),
    ],
)
def test_reader_errors_name_the_file(tmp_path, broken, message):
    rng = np.random.default_rng(4)
    samples = [{"png": image_bytes(rng, "PNG"), "cls": b"0"} for _ in range(4)]
    if broken == "mixed_formats":
        samples[2] = {"jpg": image_bytes(rng, "JPEG"), "cls": b"0"}
    root = write_webdataset(
        tmp_path / "wds", samples, nshards=1, classnames="a\n", zeroshot_classification_templates="{c}\n"
    )
    if broken == "no_nshards":
        (root / "test" / "nshards.txt").unlink()
    elif broken == "missing_shard":
        (root / "test" / "nshards.txt").write_text("2\n")
    elif broken == "no_classnames":
        (root / "classnames.txt").unlink()
    elif broken == "multilabel":
        (root / "dataset_type.txt").write_text("multilabel\n")
    elif broken == "bad_count":
        (root / "test" / "nshards.txt").write_text("two\n")
    with pytest.raises(UserInputError, match=message):
        load_clip_benchmark_webdataset(root, cache_dir=str(tmp_path / "cache"))


def test_class_index_out_of_range_names_the_sample(tmp_path, scorer):
    rng = np.random.default_rng(5)
    samples = [{"png": image_bytes(rng, "PNG"), "cls": str(c).encode()} for c in (0, 1, 7)]
    root = write_webdataset(
        tmp_path / "wds", samples, nshards=1, classnames="a\nb\n", zeroshot_classification_templates="{c}\n"
    )
    with pytest.raises(UserInputError, match=r"sample 's000002'.*class index 7"):
        evaluate_zeroshot_classification(scorer, root, cache_dir=str(tmp_path / "cache"))


# ---- metrics: naive loop and clip_benchmark --------------------------------------------------------


def test_classification_equals_naive_loop(model_and_processor, scorer, classification_dir, tmp_path):
    result = evaluate_zeroshot_classification(scorer, classification_dir, cache_dir=str(tmp_path / "cache"))
    expected = naive_classification(*model_and_processor, classification_dir)
    for name, value in expected.items():
        assert result[name] == pytest.approx(value, abs=1e-12), name
    assert result["num_examples"] == 15 and result["num_distinct_images"] == 14
    assert result["num_classes"] == 6 and result["num_templates"] == 3
    assert "strict" in result["tie_rule"] and "balanced accuracy" in result["aggregation"]


def test_retrieval_equals_naive_loop(model_and_processor, scorer, retrieval_dir, tmp_path):
    result = evaluate_zeroshot_retrieval(scorer, retrieval_dir, cache_dir=str(tmp_path / "cache"))
    expected = naive_retrieval(*model_and_processor, retrieval_dir)
    for name, value in expected.items():
        assert result[name] == pytest.approx(value, abs=1e-12), name
    assert result["num_images"] == 12 and result["num_texts"] == sum(1 + i % 3 for i in range(12))
    assert result["image_retrieval_recall@10"] < 1  # not trivially saturated on 12 images


class _ClipBenchmarkModel(torch.nn.Module):
    """The `encode_image` / `encode_text` interface clip_benchmark's metric code calls."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def encode_image(self, pixel_values):
        return self.model.get_image_features(pixel_values=pixel_values).pooler_output

    def encode_text(self, tokens):
        return self.model.get_text_features(**tokens).pooler_output


def _clip_benchmark_tokenizer(processor):
    return lambda texts: processor.tokenizer(texts, padding=True, return_tensors="pt")


class _Samples(torch.utils.data.Dataset):
    def __init__(self, samples, processor, image_ext, target):
        self.samples, self.processor, self.image_ext, self.target = samples, processor, image_ext, target
        self.classes = CLASSNAMES

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        image = Image.open(io.BytesIO(self.samples[i][self.image_ext])).convert("RGB")
        return self.processor(images=image, return_tensors="pt")["pixel_values"][0], self.target(
            self.samples[i]
        )


def test_classification_equals_clip_benchmark(model_and_processor, scorer, classification_dir, tmp_path):
    """clip_benchmark's own `evaluate()` against ours.

    Under NumPy 2.4 (checked with 2.4.6) its `accuracy()` fails: it calls `float()` on a one-element
    array. Then the test runs its `zero_shot_classifier` and `run_classification` (templates,
    normalisation, logits) unchanged and applies its metric lines itself: `logits.topk(5, 1, True,
    True)` for acc1/acc5 and sklearn's `balanced_accuracy_score` of the argmax.
    """
    zeroshot_classification = pytest.importorskip("clip_benchmark.metrics.zeroshot_classification")
    model, processor = model_and_processor
    samples = _Samples(read_webdataset(classification_dir), processor, "png", lambda s: int(s["cls"]))
    loader = torch.utils.data.DataLoader(samples, batch_size=4)
    wrapped, tokenizer = _ClipBenchmarkModel(model), _clip_benchmark_tokenizer(processor)
    try:
        theirs = zeroshot_classification.evaluate(
            wrapped, loader, tokenizer, CLASSNAMES, TEMPLATES, device="cpu", amp=False
        )
    except TypeError as err:
        assert "0-dimensional" in str(err)  # the NumPy incompatibility described above, nothing else
        classifier = zeroshot_classification.zero_shot_classifier(
            wrapped, tokenizer, CLASSNAMES, TEMPLATES, "cpu", amp=False
        )
        logits, target = zeroshot_classification.run_classification(
            wrapped, classifier, loader, "cpu", amp=False
        )
        pred = logits.topk(5, 1, True, True)[1].t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        theirs = {
            "acc1": correct[:1].reshape(-1).float().sum().item() / len(target),
            "acc5": correct[:5].reshape(-1).float().sum().item() / len(target),
            "mean_per_class_recall": zeroshot_classification.balanced_accuracy_score(
                target, logits.argmax(axis=1)
            ),
        }
    ours = evaluate_zeroshot_classification(scorer, classification_dir, cache_dir=str(tmp_path / "cache"))
    for name in ("acc1", "acc5", "mean_per_class_recall"):
        assert ours[name] == pytest.approx(theirs[name], abs=1e-12), name


def test_retrieval_equals_clip_benchmark(model_and_processor, scorer, retrieval_dir, tmp_path):
    zeroshot_retrieval = pytest.importorskip("clip_benchmark.metrics.zeroshot_retrieval")
    model, processor = model_and_processor
    samples = _Samples(
        read_webdataset(retrieval_dir), processor, "webp", lambda s: s["txt"].decode().splitlines()
    )
    loader = torch.utils.data.DataLoader(
        samples,
        batch_size=5,
        collate_fn=lambda batch: (torch.stack([b[0] for b in batch]), [b[1] for b in batch]),
    )
    theirs = zeroshot_retrieval.evaluate(
        _ClipBenchmarkModel(model),
        loader,
        _clip_benchmark_tokenizer(processor),
        device="cpu",
        amp=False,
        recall_k_list=[1, 5, 10],
    )
    ours = evaluate_zeroshot_retrieval(scorer, retrieval_dir, cache_dir=str(tmp_path / "cache"))
    assert set(theirs) <= set(ours)
    for name, value in theirs.items():
        # clip_benchmark averages in float32; one query more or less would move the rate by >= 1/30
        assert ours[name] == pytest.approx(value, abs=1e-6), name


# ---- the strict tie rule ---------------------------------------------------------------------------


def test_ties_never_count_as_hits():
    # two identical class vectors (a duplicated class name): topk would pick one by position
    classifier = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), dim=-1)
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    result = classification_metrics(images, torch.tensor([0, 2]), classifier)
    assert result["acc1"] == 0.5  # image 0 ties classes 0 and 1: a miss
    assert "acc5" not in result  # fewer than 5 classes, as clip_benchmark (which reports NaN)
    assert result["mean_per_class_recall"] == 0.5  # class 0: 0/1, class 2: 1/1
    assert strict_rank(torch.tensor([[0.5, 0.5, 0.1]]), torch.tensor([[True, False, False]])).item() == 1

    # retrieval: two gallery rows with identical embeddings, and captions that tie across them
    images = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    texts = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    result = retrieval_metrics(images, texts, torch.tensor([0, 2, 1]), ks=(1, 2))
    assert (
        result["image_retrieval_recall@1"] == pytest.approx(1 / 3)
        and result["image_retrieval_recall@2"] == 1.0
    )
    assert (
        result["text_retrieval_recall@1"] == pytest.approx(1 / 3) and result["text_retrieval_recall@2"] == 1.0
    )
    with pytest.raises(ValueError, match="at least one correct candidate"):
        strict_rank(torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.bool))


# ---- Hub ids ---------------------------------------------------------------------------------------


def test_hub_id_fetches_only_metadata_then_shards_through_datasets(classification_dir, tmp_path, monkeypatch):
    """A Hub id: the small files via snapshot_download (allow-list), the shards as hf:// data files."""
    import huggingface_hub
    from datasets import load_dataset

    from hf_hardpos.evaluation.tasks import webdataset

    calls = {}
    local_shards = sorted(str(p) for p in (classification_dir / "test").glob("*.tar"))

    def fake_snapshot_download(repo_id, **kwargs):
        calls["snapshot"] = (repo_id, kwargs)
        return str(classification_dir)

    def fake_load_dataset(builder, data_files, split, cache_dir):
        calls["data_files"] = data_files  # what would be downloaded; read the local copies instead
        return load_dataset(
            builder, data_files={split: local_shards}, split=split, cache_dir=str(tmp_path / "cache")
        )

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setattr(webdataset, "load_dataset", fake_load_dataset)
    loaded = load_clip_benchmark_webdataset("clip-benchmark/wds_tiny", revision="abc123")
    repo_id, kwargs = calls["snapshot"]
    assert (
        repo_id == "clip-benchmark/wds_tiny"
        and kwargs["repo_type"] == "dataset"
        and kwargs["revision"] == "abc123"
    )
    assert set(kwargs["allow_patterns"]) == {
        "classnames.txt",
        "zeroshot_classification_templates.txt",
        "dataset_type.txt",
        "test/nshards.txt",
    }
    assert calls["data_files"] == {
        "test": [f"hf://datasets/clip-benchmark/wds_tiny@abc123/test/{i}.tar" for i in (0, 1)]
    }
    assert loaded.task == ZEROSHOT_CLASSIFICATION and len(loaded.dataset) == 15


def test_unreachable_hub_id_is_a_user_error():
    # tests run with HF_HUB_OFFLINE=1 and nothing of this repo in the cache
    with pytest.raises(UserInputError, match="wds_not_cached"):
        detect_webdataset_task("clip-benchmark/wds_not_cached")
