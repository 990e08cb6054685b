"""How many REPLACE/SWAP-shaped rows change outcome between the default protocol and `--protocol paper`.

Workload: the synthetic world's REPLACE (attributes + relations) and SWAP rows (`hf_hardpos.synthetic.world`),
each scene rendered at 128 px and resized (bicubic) to one of the image sizes common in Visual Genome
and COCO (640x427, 427x640, 500x375, 500x333, 800x600, 640x480), so some crops fall where transformers'
and torchvision's centre-crop offsets differ by a pixel and some do not. Model: a randomly initialised
CLIP with ViT-B/32's image geometry (224 px, patch 32) and the tiny text tower of
`synthetic.tiny_clip` — random weights, so the figures are about the protocols, not about any model's
quality.

Arms, every one scored by `hf_hardpos.scoring.ITMScorer` on the same rows:

- default: fp32, the model's transformers image processor (PIL backend);
- paper (CPU): `--protocol paper` on a CPU, i.e. the paper's transform, fp32 (clip.load on CPU);
- paper transform + float16 weights on CPU: what `--protocol paper` sets on CUDA for OpenAI weights,
  computed here with CPU float16 kernels (not the GPU's arithmetic: an indication, not that figure).

For each arm against the default it prints, per metric, how many rows' outcome flipped (either way)
and the change of the rate in percentage points.

    python benchmarks/protocol_flips.py [--rows 600]
"""

from __future__ import annotations

import argparse
import io
import tempfile

import numpy as np
from datasets import Dataset
from PIL import Image
from results import record  # benchmarks/results.py: one results file for every benchmark

from hf_hardpos.evaluation.tasks.hard_positive import score_eval_set
from hf_hardpos.image_processing import PaperImageProcessor
from hf_hardpos.metrics import augmented_correct, brittle, original_correct
from hf_hardpos.scoring import ITMScorer
from hf_hardpos.synthetic import world
from hf_hardpos.synthetic.tiny_clip import build_tiny_clip

SIZES = ((640, 427), (427, 640), (500, 375), (500, 333), (800, 600), (640, 480))
OUTCOMES = {
    "original_accuracy": original_correct,
    "augmented_accuracy": augmented_correct,
    "brittleness": brittle,
}


def resized_images(dataset: Dataset, offset: int) -> Dataset:
    """The set with each image resized to one of `SIZES` (cycled), encoded as JPEG-free PNG bytes."""
    images = []
    for i, image in enumerate(dataset["image"]):
        size = SIZES[(i + offset) % len(SIZES)]
        buffer = io.BytesIO()
        image.convert("RGB").resize(size, Image.Resampling.BICUBIC).save(buffer, format="PNG")
        images.append({"bytes": buffer.getvalue(), "path": None})
    return (
        dataset.remove_columns("image")
        .add_column("image", images)
        .cast_column("image", dataset.features["image"])
    )


def outcomes(scorer: ITMScorer, dataset: Dataset) -> dict[str, np.ndarray]:
    s = score_eval_set(scorer, dataset)
    return {name: rule(s["original"], s["negative"], s["positive"]) if name != "original_accuracy"
            else rule(s["original"], s["negative"]) for name, rule in OUTCOMES.items()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=600, help="rows per set (REPLACE attributes, relations, SWAP)"
    )
    args = parser.parse_args()
    from transformers import CLIPModel, CLIPProcessor

    folder = build_tiny_clip(tempfile.mkdtemp(), image_size=224, patch_size=32, seed=0)
    processor = CLIPProcessor.from_pretrained(folder)
    sets = {
        "replace/attributes": world.make_replace_dataset(args.rows, 7, "attributes", image_size=128),
        "replace/relations": world.make_replace_dataset(args.rows, 7, "relations", image_size=128),
        "swap": world.make_swap_dataset(args.rows, 7, image_size=128),
    }
    sets = {name: resized_images(rows, i) for i, (name, rows) in enumerate(sets.items())}
    paper_processor = CLIPProcessor.from_pretrained(folder)
    paper_processor.image_processor = PaperImageProcessor.from_image_processor(processor.image_processor)
    arms = {
        "default": ITMScorer(CLIPModel.from_pretrained(folder), processor, progress=False),
        "paper (CPU: fp32)": ITMScorer(CLIPModel.from_pretrained(folder), paper_processor, progress=False),
        "paper transform + fp16 weights (CPU kernels)": ITMScorer(
            CLIPModel.from_pretrained(folder), paper_processor, precision="fp16-weights", progress=False
        ),
    }
    results = {
        arm: {name: outcomes(scorer, rows) for name, rows in sets.items()} for arm, scorer in arms.items()
    }
    base = results["default"]
    total = sum(len(rows) for rows in sets.values())
    print(f"{total} rows ({', '.join(f'{n} {len(r)}' for n, r in sets.items())}); image sizes {SIZES}")
    figures = {"rows": str(total)}
    for arm, key in zip(list(arms)[1:], ("paper_fp32", "paper_fp16_weights_cpu")):
        for name in OUTCOMES:
            ours = np.concatenate([results[arm][s][name] for s in sets])
            ref = np.concatenate([base[s][name] for s in sets])
            flips = int((ours != ref).sum())
            print(f"{arm:46s} {name:19s} flipped {flips:4d} / {total} rows ({100 * flips / total:.2f}%), "
                  f"rate {100 * (ours.mean() - ref.mean()):+.2f} pp")  # fmt: skip
            figures[f"{key}.{name}"] = f"{flips} ({100 * (ours.mean() - ref.mean()):+.2f} pp)"
    record("protocol_flips", figures)


if __name__ == "__main__":
    main()
