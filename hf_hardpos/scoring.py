"""Image-text matching scores for any dual-encoder model, computed once per distinct input.

Why a scorer of our own: REPLACE has 27,443 rows but only 11,723 distinct images, and its captions
repeat too; the reference code encodes every image twice per row. Here each distinct image and each
distinct caption goes through its tower exactly once, images are decoded and preprocessed in
DataLoader workers, texts are batched by length, and the per-row scores are dot products of cached,
L2-normalised embeddings — the cosine similarity defined in docs/reference.md (Scores and metrics), independent of batch size.

Works with any model exposing `get_image_features` / `get_text_features` (`CLIPModel`, `SiglipModel`,
a peft-wrapped CLIP, ...), whether they return a tensor or a `BaseModelOutputWithPooling`.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from datasets import Dataset
from datasets import Image as ImageFeature
from PIL import Image
from tqdm.auto import tqdm

from . import columns
from .errors import UserInputError
from .image_processing import describe_image_processor
from .embedding_cache import EmbeddingCache, token_key
from .image_keys import ImageSource, distinct_images


# At most this many image workers by default: past it, decoding outruns any one model's forward passes.
MAX_DEFAULT_WORKERS = 16


def default_num_workers() -> int:
    """Image-decoding DataLoader workers when none are asked for: the CPU cores this process may use
    (its affinity mask, as a container or `taskset` sets it), shared with the other processes a launcher
    started on this machine (`LOCAL_WORLD_SIZE`, set by torchrun and accelerate), at most
    `MAX_DEFAULT_WORKERS`.

    Why not 0: decoding and preprocessing a 500x375 JPEG costs about 4.7 ms, a ViT-B/32 forward pass
    on an H100 about 0.5 ms per image, so decoding in the main process leaves the device idle most of
    the time; with workers it overlaps the forward passes. Scores do not depend on the number.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return max(1, min(cores // processes, MAX_DEFAULT_WORKERS))


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The requested device, else CUDA, else Apple MPS, else CPU; a requested device that is not there
    is refused with one line (torch would fail later, mid-run, with an assertion)."""
    if device is not None:
        from .errors import UserInputError

        try:
            chosen = torch.device(device)
        except RuntimeError as err:
            raise UserInputError(f"--device {device!r} is not a device torch knows (cpu, cuda, cuda:1, mps)") from err
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise UserInputError(f"--device {device}: CUDA is not available here (torch {torch.__version__}); use --device cpu")
        if chosen.type == "cuda" and chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise UserInputError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
        if chosen.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise UserInputError(f"--device {device}: Apple MPS is not available here; use --device cpu")
        return chosen
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _features(output) -> torch.Tensor:
    """Projected embeddings from a `get_*_features` call (a tensor, or `.pooler_output` in transformers 5)."""
    if isinstance(output, torch.Tensor):
        return output
    pooled = getattr(output, "pooler_output", None)
    if pooled is None:
        raise TypeError(f"cannot find projected features in a {type(output).__name__}")
    return pooled


# One orientation policy for scoring and training: pixels as stored, EXIF orientation ignored, as the
# reference code opens images (amitakamath/hard_positives: `Image.open(path).convert("RGB")`).
# `datasets`' Image decoding applies the EXIF rotation instead, so images are opened here, not there.
EXIF_ORIENTATION = "ignored (pixels as stored, as the reference code's PIL Image.open(...).convert('RGB'))"


# Full scale of PIL's high-bit-depth greyscale modes: 16-bit integers (a 16-bit PNG opens as I;16 or I) and floats.
_FULL_SCALE = {"I;16": 65535.0, "I;16L": 65535.0, "I;16B": 65535.0, "I;16N": 65535.0, "I": 65535.0, "F": 1.0}


def as_rgb(image: Image.Image) -> Image.Image:
    """`image` as 8-bit RGB, a 16-bit or float greyscale image scaled by its mode's value range.

    Why: `.convert("RGB")` clips a 16-bit greyscale image's values to 0..255 instead of scaling them, so
    all but the darkest pixels become white (the 8-bit version of a gradient 0, 6, 13, ... comes out
    0, 255, 255, ...). Values 0..65535 (integer modes) or 0..1 (`F`) map to 0..255, rounded.
    """
    if image.mode not in _FULL_SCALE:
        return image if image.mode == "RGB" else image.convert("RGB")
    import numpy as np

    values = np.asarray(image, dtype=np.float64) * (255.0 / _FULL_SCALE[image.mode])
    grey = np.clip(np.rint(np.nan_to_num(values)), 0, 255).astype(np.uint8)
    return Image.fromarray(grey, mode="L").convert("RGB")


def open_image(value) -> Image.Image:
    """An image cell (PIL image, `{"bytes", "path"}` dict, or path) as RGB, EXIF orientation ignored (`as_rgb`)."""
    if isinstance(value, Image.Image):
        return as_rgb(value)
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return as_rgb(Image.open(io.BytesIO(value["bytes"])))
        return as_rgb(Image.open(value["path"]))
    return as_rgb(Image.open(value))


class _DistinctImages(torch.utils.data.Dataset):
    """Decodes and preprocesses the distinct images; runs inside DataLoader workers."""

    def __init__(self, dataset: Dataset, image_column: str, sources: list[ImageSource], image_processor):
        # A worker reads a row's image, not its captions (another process's share arrives as a plain mapping).
        self.dataset = dataset.select_columns([image_column]) if isinstance(dataset, Dataset) else dataset
        self.image_column = image_column
        self.sources = sources
        self.image_processor = image_processor

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> torch.Tensor | str:
        """The image's pixels, or its one-line error as text: raised in a DataLoader worker, the error would
        reach the main process as "Caught UserInputError in DataLoader worker process 0", its row lost
        (`decoded_batches` raises it there instead)."""
        try:
            return self.pixels(index)
        except UserInputError as err:
            return str(err)

    def pixels(self, index: int) -> torch.Tensor:
        """The preprocessed pixels of source `index`; a damaged image raises one line naming its row."""
        source = self.sources[index]
        value = self.dataset[source.row][self.image_column]
        try:
            image = open_image(value)
        except Exception as err:  # PIL raises several types; all mean the same to the user
            raise UserInputError(  # a damaged image, or one over PIL's pixel limit: the data's fault, one line
                f"cannot read the image of row {source.row} (image_id={source.image_id!r}): {err}"
            ) from err
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]


def _pixels_or_error(items: list[torch.Tensor | str]) -> torch.Tensor | str:
    """A DataLoader batch: the stacked pixels, or the first image's error."""
    errors = [item for item in items if isinstance(item, str)]
    return errors[0] if errors else torch.stack(items)


def decoded_batches(images: _DistinctImages, batch_size: int, num_workers: int, pin_memory: bool = False
                    ) -> Iterator[torch.Tensor]:  # fmt: skip
    """`images`' pixels, `batch_size` at a time, in order, decoded in `num_workers` DataLoader workers; a
    damaged image stops the iteration with its one-line error, raised in the calling process."""
    for batch in torch.utils.data.DataLoader(images, batch_size=batch_size, num_workers=num_workers,
                                             pin_memory=pin_memory, collate_fn=_pixels_or_error):  # fmt: skip
        if isinstance(batch, str):
            raise UserInputError(batch)
        yield batch


# Precision name -> autocast dtype. "fp16-weights" casts the weights themselves to float16 (no autocast),
# as OpenAI's `clip.load` keeps them on CUDA: what `--protocol paper` uses for OpenAI checkpoints.
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp16-weights": None}


@contextlib.contextmanager
def _cuda_tf32(allow: bool):
    """CUDA matmuls and cuDNN convolutions in TF32 or full fp32, as asked, for the block; restored after.

    Uses torch's `fp32_precision` settings where they exist (torch >= 2.9): reading the legacy
    `allow_tf32` flags after anything set the new ones raises. Only called on CUDA: TF32 means
    nothing elsewhere, and CPU runs leave the process's settings untouched.
    """
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision") and hasattr(getattr(conv, "conv", None), "fp32_precision"):
        saved = (matmul.fp32_precision, conv.conv.fp32_precision)
        matmul.fp32_precision = conv.conv.fp32_precision = "tf32" if allow else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision, conv.conv.fp32_precision = saved
        return
    saved = (matmul.allow_tf32, conv.allow_tf32)
    matmul.allow_tf32 = conv.allow_tf32 = allow
    try:
        yield
    finally:
        matmul.allow_tf32, conv.allow_tf32 = saved


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


@dataclass
class TruncationReport:
    """Captions longer than the text context, which the tokenizer cut to `max_length` tokens.

    `identical_rows` are rows where two captions that differ as text became the same token sequence:
    they get the same score, so e.g. a caption and a hard positive differing only after token 77
    silently count as "not brittle". Reported per dataset so such rows can be inspected or dropped.
    """

    max_length: int
    truncated_captions: int = 0  # caption cells (row x column) that were cut
    truncated_rows: list[int] = field(default_factory=list)
    identical_rows: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "max_length": self.max_length,
            "truncated_captions": self.truncated_captions,
            "truncated_rows": len(self.truncated_rows),
            "num_rows_made_identical_by_truncation": len(self.identical_rows),
            "rows_made_identical_by_truncation": self.identical_rows[:1000],
        }


class Scores(dict):
    """Per caption column, one cosine score per row; `truncation` says which captions were cut."""

    truncation: TruncationReport


class ITMScorer:
    """Cosine image-text matching scores, one per (row, caption column).

    Args:
        model: a dual encoder with `get_image_features(pixel_values=...)` and
            `get_text_features(input_ids=..., attention_mask=...)`.
        processor: its processor (`.image_processor` and `.tokenizer`).
        batch_size: images / texts per forward pass; results do not depend on it.
        num_workers: DataLoader workers that decode and preprocess images.
        device: defaults to CUDA, then MPS, then CPU.
        precision: "fp32" (default on every device), "bf16" / "fp16" autocast, or "fp16-weights"
            (float16 weights and pixels, as `clip.load` on CUDA). The metrics
            compare near-tied cosines with strict inequalities, so lower precision flips outcomes;
            it is opt-in and recorded with every result.
        allow_tf32: let CUDA matmuls and convolutions use TF32 (off by default: PyTorch enables it
            for cuDNN convolutions, i.e. CLIP's patch embedding, unless told otherwise).
        progress: show tqdm bars.
        cache: where embeddings are looked up by content before encoding (default: a fresh
            in-memory cache, so inputs repeated across calls of this scorer are encoded once). The
            model must therefore not change while the scorer lives: build a new scorer after
            training steps (the trainer's evaluation does).
    """

    def __init__(
        self,
        model,
        processor,
        batch_size: int = 64,
        num_workers: int = 0,
        device: str | torch.device | None = None,
        precision: str = "fp32",
        allow_tf32: bool = False,
        progress: bool = True,
        cache: EmbeddingCache | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
        self.device = pick_device(device)
        self.model = model.to(self.device).eval()
        self.pixel_dtype = torch.float16 if precision == "fp16-weights" else torch.float32
        if precision == "fp16-weights":
            self.model = self.model.half()
        self.processor = processor
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.progress = progress
        self.precision = precision
        self.allow_tf32 = allow_tf32
        self.cache = cache if cache is not None else EmbeddingCache()
        self.max_length = text_context_length(getattr(model, "config", None), processor.tokenizer)
        # SigLIP and SigLIP 2 were trained on text padded on the right to the context length (64),
        # attending to that padding (no attention mask) and pooling the last position (big_vision;
        # open_clip's SigLipTokenizer returns ids only, padded right). transformers' SigLIP
        # tokenizers may say otherwise (5.x: attention_mask, Gemma's left padding), so the protocol is
        # fixed here. CLIP pools at the EOS token: dynamic padding gives it the same result.
        model_type = getattr(getattr(model, "config", None), "model_type", "")
        self.siglip_text = "siglip" in str(model_type)
        self.text_padding = "max_length" if self.siglip_text else True

    def settings(self) -> dict:
        """Everything about the scorer that can change a score, for provenance and resume keys."""
        return {
            "device": str(self.device),
            "precision": self.precision,
            "allow_tf32": self.allow_tf32,
            "max_length": self.max_length,
            "text_padding": self.text_padding if isinstance(self.text_padding, str) else "longest",
            "image_processor": describe_image_processor(self.processor.image_processor),
        }

    @contextlib.contextmanager
    def _numerics(self):
        """Autocast only when asked for; on CUDA, TF32 exactly as asked, restored afterwards."""
        dtype = PRECISIONS[self.precision]
        tf32 = _cuda_tf32(self.allow_tf32) if self.device.type == "cuda" else contextlib.nullcontext()
        with tf32, torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext():
            yield

    def _pad(self, sequences: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """`input_ids` and `attention_mask` for token sequences, padded as `_tokenize` pads (to the
        longest, or to `max_length` for SigLIP) with the tokenizer's pad id and side."""
        tokenizer = self.processor.tokenizer
        width = self.max_length if self.text_padding == "max_length" else max(len(s) for s in sequences)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
        left = not self.siglip_text and getattr(tokenizer, "padding_side", "right") == "left"
        for row, sequence in enumerate(sequences):
            span = slice(width - len(sequence), width) if left else slice(0, len(sequence))
            input_ids[row, span] = torch.as_tensor(list(sequence), dtype=torch.long)
            attention_mask[row, span] = 1
        if self.siglip_text or "attention_mask" not in getattr(tokenizer, "model_input_names", ["attention_mask"]):
            return {"input_ids": input_ids}  # SigLIP attends to its padding, as it was trained
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
        """Each text's token ids as the model reads them (cut to the text context, as the tokenizer cuts
        with `truncation=True`) and its untruncated token count (special tokens included).

        One tokenizer call over every text, and a second over only the texts the context cuts: the
        Python side of a tokenizer call costs about as much as the text tower of a small model, and the
        ids, the counts and the truncation report all come from these two calls.
        """
        tokenizer = self.processor.tokenizer
        ids = tokenizer(list(texts), truncation=False, verbose=False, return_attention_mask=False)["input_ids"]
        counts = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        cut = np.flatnonzero(counts > self.max_length)
        if len(cut):
            kept = tokenizer([texts[i] for i in cut], truncation=True, max_length=self.max_length,
                             return_attention_mask=False)["input_ids"]  # fmt: skip
            for index, sequence in zip(cut, kept):
                ids[index] = sequence
        return ids, counts

    def encode_texts(self, texts: Sequence[str], token_ids: Sequence[Sequence[int]] | None = None) -> torch.Tensor:
        """L2-normalised text embeddings (float32, CPU), in the order given; cached texts are not re-encoded.

        Texts are keyed and deduplicated by their (truncated) token ids, not their characters:
        "red cube" and "Red  cube " tokenize alike for CLIP, and encoded apart (in other batches,
        under other padding) they would differ by ~1e-7 and break what is an exact tie for the
        model, so outcomes would depend on `batch_size`. One token sequence, one embedding.
        `token_ids`: the texts' ids from `tokenize`, when the caller has them already.
        """
        if not texts:
            return torch.empty(0, 0)
        ids = self.tokenize(texts)[0] if token_ids is None else token_ids
        keys = [token_key(i) for i in ids]
        todo = sorted({keys[i]: i for i in self.cache.missing("text", keys)}.values())
        if todo:
            self.cache.add("text", [keys[i] for i in todo], self._encode_token_ids([ids[i] for i in todo]))
        return self.cache.get("text", keys)

    @torch.inference_mode()
    def _encode_token_ids(self, ids: Sequence[Sequence[int]]) -> torch.Tensor:
        order = np.argsort([len(i) for i in ids], kind="stable")  # similar lengths together: less padding
        out: torch.Tensor | None = None
        for start in tqdm(
            range(0, len(ids), self.batch_size),
            desc="Encoding texts",
            disable=not self.progress,
            unit="batch",
        ):
            idx = order[start : start + self.batch_size]
            batch = {k: v.to(self.device) for k, v in self._pad([ids[i] for i in idx]).items()}
            with self._numerics():
                emb = _features(self.model.get_text_features(**batch))
            emb = torch.nn.functional.normalize(emb.float(), dim=-1).cpu()
            if out is None:
                out = torch.empty(len(ids), emb.shape[-1])
            out[torch.as_tensor(idx)] = emb
        assert out is not None
        return out

    def encode_images(self, dataset: Dataset, image_column: str, sources: list[ImageSource]) -> torch.Tensor:
        """L2-normalised embeddings of the distinct images (float32, CPU), in `sources` order."""
        keys = [source.key for source in sources]
        todo = [sources[i] for i in self.cache.missing("image", keys)]
        if todo:
            self.cache.add("image", [source.key for source in todo], self._encode_images(dataset, image_column, todo))
        return self.cache.get("image", keys)

    def _pixel_batches(self, dataset: Dataset, image_column: str, sources: list[ImageSource]) -> Iterable[torch.Tensor]:
        """Preprocessed pixels of `sources`, `batch_size` images at a time, in order (decoded in DataLoader
        workers). `pixel_store.SharedPixelScorer` serves pixels decoded earlier (for another model) instead."""
        return decoded_batches(_DistinctImages(dataset, image_column, sources, self.processor.image_processor),
                               self.batch_size, self.num_workers, pin_memory=self.device.type == "cuda")

    @torch.inference_mode()
    def _encode_images(self, dataset: Dataset, image_column: str, sources: list[ImageSource]) -> torch.Tensor:
        loader = self._pixel_batches(dataset, image_column, sources)
        chunks = []
        batches = -(-len(sources) // self.batch_size)
        for pixel_values in tqdm(loader, desc="Encoding images", disable=not self.progress, unit="batch", total=batches):
            with self._numerics():
                emb = _features(self.model.get_image_features(pixel_values=pixel_values.to(self.device, self.pixel_dtype)))
            chunks.append(torch.nn.functional.normalize(emb.float(), dim=-1).cpu())
        return torch.cat(chunks)

    def embed_images(self, dataset: Dataset, image_column: str = columns.IMAGE) -> tuple[torch.Tensor, np.ndarray]:
        """Embeddings of the distinct images of `dataset` and, per row, the index of its image's embedding.

        Images are told apart by content, so a dataset that repeats an image (REPLACE: ~2.3 rows per
        image) encodes it once; the zero-shot tasks use this too.
        """
        dataset = _undecoded(dataset, image_column)
        sources, image_slot = distinct_images(dataset, image_column)
        return self.encode_images(dataset, image_column, sources), image_slot

    def score(
        self,
        dataset: Dataset | dict,
        image_column: str = columns.IMAGE,
        caption_columns: Sequence[str] = columns.EVAL_CAPTION_COLUMNS,
        optional_columns: Sequence[str] = (),
    ) -> Scores:
        """Per-row cosine similarity of the row's image with each caption column.

        Any number of caption columns may be given (several hard negatives, say). A null caption is
        an error naming its column and row, except in `optional_columns`, where it gets a NaN score
        (which the metrics then refuse rather than miscount). An empty caption is always an error:
        it would be scored as the bare start/end tokens. The result's `truncation` reports the
        captions the text context cut.
        """
        if isinstance(dataset, dict):
            dataset = Dataset.from_dict(dataset)
        all_columns = list(dict.fromkeys([*caption_columns, *optional_columns]))
        columns.require_columns(dataset, [image_column, *all_columns])
        if len(dataset) == 0:
            raise ValueError("the dataset has no rows: there is nothing to score")

        text_to_slot: dict[str, int] = {}
        caption_slots: dict[str, np.ndarray] = {}
        for column in all_columns:
            slots = np.full(len(dataset), -1, dtype=np.int64)
            for row, text in enumerate(dataset[column]):
                if text is None:
                    if column in optional_columns:
                        continue
                    raise ValueError(f"row {row}, column {column!r}: the caption is missing (null)")
                if not isinstance(text, str):
                    raise ValueError(f"row {row}, column {column!r}: expected a string, got {type(text).__name__}")
                if not text.strip():
                    raise ValueError(f"row {row}, column {column!r}: the caption is empty")
                slots[row] = text_to_slot.setdefault(text, len(text_to_slot))
            caption_slots[column] = slots

        image_emb, image_slot = self.embed_images(dataset, image_column)
        texts = list(text_to_slot)
        token_ids, token_counts = self.tokenize(texts)
        text_emb = self.encode_texts(texts, token_ids)

        scores = Scores()
        row_images = image_emb[torch.from_numpy(image_slot)]
        for column, slots in caption_slots.items():
            present = torch.from_numpy(slots >= 0)
            values = torch.full((len(dataset),), float("nan"), dtype=torch.float64)
            chosen = text_emb[torch.from_numpy(slots[slots >= 0])]
            values[present] = (row_images[present] * chosen).sum(-1).double()
            scores[column] = values.numpy()
        scores.truncation = self._truncation_report(token_ids, token_counts, caption_slots)
        return scores

    def _truncation_report(self, token_ids: list[list[int]], token_counts: np.ndarray,
                           caption_slots: dict[str, np.ndarray]) -> TruncationReport:  # fmt: skip
        """Which caption cells the context cut, and the rows where two different texts became one."""
        report = TruncationReport(self.max_length)
        cut = token_counts > self.max_length
        if not cut.any():
            return report
        # Texts whose kept tokens coincide share one id in `kept`, so equal ids on a row = one score.
        kept = np.arange(len(token_ids))
        first_with: dict[tuple, int] = {}
        for text_index in np.flatnonzero(cut):
            kept[text_index] = first_with.setdefault(tuple(token_ids[text_index]), int(text_index))
        slots = np.stack(list(caption_slots.values()), axis=1)  # rows x columns, -1 = missing
        present = slots >= 0
        safe = np.where(present, slots, 0)
        cut_cells = present & cut[safe]
        report.truncated_captions = int(cut_cells.sum())
        report.truncated_rows = np.flatnonzero(cut_cells.any(axis=1)).tolist()
        kept_slots = np.where(present, kept[safe], -1)
        for row in report.truncated_rows:
            if len({k for k in kept_slots[row] if k >= 0}) < len({t for t in slots[row] if t >= 0}):
                report.identical_rows.append(row)
        return report


def _undecoded(dataset: Dataset, image_column: str) -> Dataset:
    """The dataset with its image column left as bytes/paths: keys are hashed without decoding."""
    if isinstance(dataset.features.get(image_column), ImageFeature) and dataset.features[image_column].decode:
        return dataset.cast_column(image_column, ImageFeature(decode=False))
    return dataset
