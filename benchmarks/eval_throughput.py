"""`hardpos eval` on REPLACE's two configs vs the reference protocol, side by side in one run.

Workload: about `--rows` rows of REPLACE, randomly chosen images with all their rows in *both*
subsets, from `--upstream-dir` (a clone of amitakamath/hard_positives) when given, so the row-per-image multiplicity, the
caption repeats and the images shared between the two subsets are the real ones (otherwise a
synthetic stand-in with REPLACE's 2.34 rows per image), written as a local Hub folder with the
`attributes` and `relations` configs — what a user evaluates; one generated
500x375 JPEG per distinct image id (Visual Genome's typical size), the full-size ViT-B/32
architecture (`CLIPConfig()` defaults, random weights: speed does not depend on them) and the real
CLIP tokenizer from `--tokenizer-dir` (a folder with CLIP's vocab.json and merges.txt) when given.

Reference protocol (the upstream evaluation code): batches of 16 rows; each row's image decoded,
preprocessed and encoded twice (once with (c, c_n), once with (c_p, c_n)); every caption tokenised
to 77 tokens and encoded per row; no deduplication.

    python benchmarks/eval_throughput.py [--rows 400]

Ours is `evaluate_model(model_folder, dataset_folder)` end to end (model and data loading, both
configs, metrics); the reference loads the same model folder and scores the same rows config by
config. Prints both rates (wall and CPU time, DataLoader workers included), the CPU-time ratio and,
last, `speedup_vs_reference=<x>` (wall clock). Run it on an otherwise idle machine: other processes stretch
wall time unevenly between the two arms; the CPU-time ratio is the check.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset, Features, Image, Value
from PIL import Image as PILImage
from results import record  # benchmarks/results.py: one results file for every benchmark
from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

from hf_hardpos.columns import REPLACE_SUBSETS
from hf_hardpos.evaluation.eval_data import load_eval_sets
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.synthetic.tiny_clip import train_clip_tokenizer


def replace_rows(limit: int, upstream: Path | None) -> list[dict]:
    if upstream is not None:
        rows = []
        for subset in REPLACE_SUBSETS:
            original = json.loads((upstream / "data" / f"vl_checklist_{subset}.json").read_text())
            positive = json.loads((upstream / "swapped_data" / f"vl_checklist_{subset}.json").read_text())
            rows += [
                {
                    "subset": subset,
                    "image_id": str(o["image_id"]),
                    "caption": o["true_caption"],
                    "hard_negative": o["false_caption"],
                    "hard_positive": p["true_caption"],
                }
                for o, p in zip(original, positive)
            ]
        return whole_images(rows, limit)
    rng = np.random.default_rng(0)
    words = [
        "red",
        "white",
        "large",
        "wooden",
        "cat",
        "door",
        "table",
        "holding",
        "on",
        "near",
        "man",
        "sign",
    ]
    return [
        {
            "subset": REPLACE_SUBSETS[i % 2],
            "image_id": str(i * 3 // 7),
            "caption": " ".join(rng.choice(words, 3)),
            "hard_negative": " ".join(rng.choice(words, 3)),
            "hard_positive": " ".join(rng.choice(words, 3)),
        }
        for i in range(limit)
    ]


def whole_images(rows: list[dict], limit: int) -> list[dict]:
    """About `limit` rows made of randomly chosen images with *all* their rows (in both subsets), so a
    sample keeps REPLACE's rows-per-image multiplicity and sharing (a plain prefix does not)."""
    by_image: dict[str, list[dict]] = {}
    for row in rows:
        by_image.setdefault(row["image_id"], []).append(row)
    chosen: list[dict] = []
    for image_id in np.random.default_rng(0).permutation(sorted(by_image)):
        if len(chosen) >= limit:
            break
        chosen += by_image[image_id]
    return chosen


def jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (47, 63, 3), dtype=np.uint8)  # smooth-ish content compresses like a photo
    buffer = io.BytesIO()
    PILImage.fromarray(small).resize((500, 375), PILImage.BILINEAR).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def build_processor(rows: list[dict], tokenizer_dir: Path | None) -> CLIPProcessor:
    if tokenizer_dir is not None:
        tokenizer = CLIPTokenizer(
            vocab=str(tokenizer_dir / "vocab.json"),
            merges=str(tokenizer_dir / "merges.txt"),
            model_max_length=77,
        )
    else:
        tokenizer = train_clip_tokenizer(
            [r[c] for r in rows for c in ("caption", "hard_negative", "hard_positive")]
        )
    return CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tokenizer)


@torch.inference_mode()
def reference_protocol(
    model: CLIPModel, processor: CLIPProcessor, dataset: Dataset, batch_size: int = 16
) -> dict:
    """Per row: image encoded with (c, c_n), then again with (c_p, c_n); texts padded to 77."""
    scores = {"caption": [], "hard_positive": [], "hard_negative": []}
    for start in range(0, len(dataset), batch_size):
        batch = dataset[start : start + batch_size]
        for first in ("caption", "hard_positive"):
            images = [PILImage.open(io.BytesIO(cell["bytes"])).convert("RGB") for cell in batch["image"]]
            pixels = processor.image_processor(images=images, return_tensors="pt")["pixel_values"]
            img = torch.nn.functional.normalize(
                model.get_image_features(pixel_values=pixels).pooler_output, dim=-1
            )
            for column in (first, "hard_negative"):
                tokens = processor.tokenizer(
                    batch[column], padding="max_length", truncation=True, return_tensors="pt"
                )
                txt = model.get_text_features(
                    input_ids=tokens.input_ids, attention_mask=tokens.attention_mask
                )
                score = (img * torch.nn.functional.normalize(txt.pooler_output, dim=-1)).sum(-1)
                if first == "caption" or column != "hard_negative":
                    scores[column].append(score)
    return {column: torch.cat(values).numpy() for column, values in scores.items()}


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (DataLoader workers), all threads."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def write_hub_folder(rows: list[dict], images: dict[str, bytes], root: Path) -> None:
    """The two REPLACE configs as parquet + README `configs:`, as the Hub repo stores them."""
    features = Features(
        {
            "image": Image(),
            "image_id": Value("string"),
            "caption": Value("string"),
            "hard_negative": Value("string"),
            "hard_positive": Value("string"),
        }
    )
    for subset in REPLACE_SUBSETS:
        part = [r for r in rows if r["subset"] == subset]
        Dataset.from_dict(
            {
                "image": [{"bytes": images[r["image_id"]], "path": None} for r in part],
                **{
                    k: [r[k] for r in part] for k in ("image_id", "caption", "hard_negative", "hard_positive")
                },
            },
            features=features,
        ).to_parquet(str(root / "data" / subset / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {s}\n  data_files:\n  - split: test\n    path: data/{s}/test-*.parquet\n"
            for s in REPLACE_SUBSETS
        )
        + "---\n"
    )


def replace_workload(limit: int, upstream: Path | None, prefix: str) -> tuple[list[dict], int, Path, Path]:
    """(rows, distinct images, a fresh work folder, the Hub folder written in it) of a REPLACE-shaped run:
    one generated 500x375 JPEG per distinct image id."""
    rows = replace_rows(limit, upstream)
    ids = sorted({r["image_id"] for r in rows})
    work = Path(tempfile.mkdtemp(prefix=prefix))
    write_hub_folder(rows, {image_id: jpeg(i) for i, image_id in enumerate(ids)}, work / "replace")
    print(
        f"workload: {len(rows)} rows, {len(ids)} distinct 500x375 JPEGs; "
        f"source: {'upstream REPLACE' if upstream else 'synthetic'}"
    )
    return rows, len(ids), work, work / "replace"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=64, help="our scorer's batch size")
    parser.add_argument("--num-workers", type=int, default=1, help="our scorer's image workers")
    parser.add_argument(
        "--upstream-dir", type=Path, help="a clone of amitakamath/hard_positives (real REPLACE rows)"
    )
    parser.add_argument(
        "--tokenizer-dir", type=Path, help="CLIP's vocab.json + merges.txt (else a small BPE trained here)"
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    rows = replace_rows(args.rows, args.upstream_dir)
    ids = sorted({r["image_id"] for r in rows})
    images = {image_id: jpeg(i) for i, image_id in enumerate(ids)}
    texts = {r[c] for r in rows for c in ("caption", "hard_negative", "hard_positive")}
    counts = {s: sum(r["subset"] == s for r in rows) for s in REPLACE_SUBSETS}
    print(
        f"workload: {len(rows)} rows {counts}, {len(ids)} distinct images ({len(rows) / len(ids):.2f} rows/image), "
        f"{len(texts)} distinct captions; source: {'upstream REPLACE' if args.upstream_dir else 'synthetic'}"
    )
    work = Path(tempfile.mkdtemp(prefix="hardpos-bench-"))
    write_hub_folder(rows, images, work / "replace")
    model_dir = work / "model"
    CLIPModel(CLIPConfig()).save_pretrained(model_dir)  # ViT-B/32 shape, random weights
    build_processor(rows, args.tokenizer_dir).save_pretrained(model_dir)

    start, cpu_start = time.perf_counter(), cpu_seconds()
    model, processor = CLIPModel.from_pretrained(model_dir).eval(), CLIPProcessor.from_pretrained(model_dir)
    eval_sets = load_eval_sets(str(work / "replace"), None, "test")  # by content, as hardpos eval reads it
    reference = {
        subset: reference_protocol(
            model, processor, eval_sets[subset].dataset.cast_column("image", Image(decode=False))
        )
        for subset in REPLACE_SUBSETS
    }
    reference_seconds, reference_cpu = time.perf_counter() - start, cpu_seconds() - cpu_start

    start, cpu_start = time.perf_counter(), cpu_seconds()
    report = evaluate_model(
        str(model_dir),
        str(work / "replace"),
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        progress=False,
        log=lambda message: None,
    )
    ours_seconds, ours_cpu = time.perf_counter() - start, cpu_seconds() - cpu_start

    columns = {"caption": "original", "hard_negative": "negative", "hard_positive": "positive"}
    agreement = max(
        np.abs(report.scores[subset][ours] - reference[subset][column]).max()
        for subset in REPLACE_SUBSETS
        for column, ours in columns.items()
    )
    print(f"max |score difference| vs reference: {agreement:.2e}")
    print(
        f"reference protocol: {len(rows) / reference_seconds:8.1f} rows/s ({reference_seconds:.1f} s wall, {reference_cpu:.1f} s CPU)"
    )
    print(
        f"hardpos eval:       {len(rows) / ours_seconds:8.1f} rows/s ({ours_seconds:.1f} s wall, {ours_cpu:.1f} s CPU)"
    )
    # CPU time is the robust figure on a shared machine (other processes stretch wall time unevenly).
    print(f"cpu_time_ratio={reference_cpu / ours_cpu:.2f}")
    print(f"speedup_vs_reference={reference_seconds / ours_seconds:.2f}")
    record("eval_throughput", {
        "rows": f"{len(rows):,}", "images": f"{len(ids):,}",
        "ours_rows_per_s": f"{len(rows) / ours_seconds:.1f}", "reference_rows_per_s": f"{len(rows) / reference_seconds:.1f}",
        "ours_wall_s": f"{ours_seconds:.1f}", "reference_wall_s": f"{reference_seconds:.1f}",
        "speedup_vs_reference": f"{reference_seconds / ours_seconds:.2f}", "cpu_time_ratio": f"{reference_cpu / ours_cpu:.2f}",
        "max_score_difference": f"{agreement:.1e}",
    })  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
