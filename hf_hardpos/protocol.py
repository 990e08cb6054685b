"""`hardpos eval --protocol paper`: score as the paper's code did, and say where it still differs.

The default protocol is this package's: fp32 on every device, the model's own transformers image
processor on the PIL backend (`image_processing`), strict ties. Kamath et al. (ECCV 2024) scored with
their code (github.com/amitakamath/hard_positives @33addaa, `model_zoo/__init__.py`):

- OpenAI's CLIP models through `clip.load(...)`, which keeps the weights in **float16 on CUDA** and
  converts them to float32 on CPU (`clip/clip.py`: `if str(device) == "cpu": model.float()`); every
  other checkpoint (NegCLIP, the fine-tuned baselines, LAION and DataComp rows) in float32. Which
  models are OpenAI's, and the precision a model was scored in, are facts of the model's family:
  `ResolvedModel.paper_precision` asks its backend (`ModelBackend.paper_precision`).
- The checkpoint's own eval transform: bicubic resize of the short side, centre crop with
  torchvision's `int(round((d - size) / 2))` offsets, the checkpoint's mean and std
  (`image_processing.PaperImageProcessor`).
- Strict comparisons of the scores (`run_eval.py` counts `>`), as this package always does.

So `paper` sets the `paper` image backend and, for OpenAI weights on CUDA, the `fp16-weights`
precision. On CPU it keeps float32, which is what `clip.load` itself does there: a CPU run reproduces
the paper's preprocessing, not its GPU arithmetic. One difference remains on every device: the paper
normalised the float16 embeddings and took their dot products in float16 NumPy arrays; this package
casts the embeddings to float32 before normalising and computes the cosines in float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .backends import ResolvedModel
from .errors import UserInputError

PROTOCOLS = ("default", "paper")


@dataclass(frozen=True)
class Protocol:
    """What a protocol sets: the scorer's precision and image backend, and why (recorded in metrics.json)."""

    name: str
    precision: str
    image_backend: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "precision": self.precision, "image_backend": self.image_backend,
                "notes": list(self.notes)}  # fmt: skip


def resolve_protocol(
    name: str,
    model: ResolvedModel,
    device_type: str,
    precision: str,
    image_backend: str,
    preset: str | None = None,
) -> Protocol:
    """The precision and image backend to score with under protocol `name`.

    `default` passes the user's `precision` and `image_backend` through; `paper` sets both, so it
    refuses a non-default value of either rather than silently overriding it.
    """
    if name not in PROTOCOLS:
        raise UserInputError(f"--protocol must be one of {list(PROTOCOLS)}, got {name!r}")
    if name == "default":
        return Protocol(name, precision, image_backend)
    if precision != "fp32" or image_backend != "pil":
        raise UserInputError(
            "--protocol paper sets the precision and the image backend itself; drop --dtype/--image-backend"
        )
    notes = ["image: bicubic short-side resize, torchvision centre-crop offsets, the checkpoint's mean/std"]
    precision, note = model.paper_precision(device_type, preset)
    return Protocol(name, precision, "paper", (*notes, note))
