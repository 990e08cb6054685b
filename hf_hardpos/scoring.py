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
import contextvars
import itertools
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch
from datasets import Dataset
from datasets import Image as ImageFeature
from tqdm.auto import tqdm

from . import columns
from .backends import text_inputs_of
from .compute import PRECISIONS, cuda_tf32, pick_device
from .embedding_cache import EmbeddingCache, token_key
from .image_decoding import DistinctImages, decoded_batches
from .image_keys import ImageSource, distinct_images
from .image_processing import describe_image_processor
from .run_memo import remembered, tokenizer_key


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
        # How the text tower reads ids (padding, side, mask), as its family declares (`backends.TextInputs`).
        self.text_inputs = text_inputs_of(model, processor.tokenizer)
        self.max_length = self.text_inputs.context_length

    def settings(self) -> dict:
        """Everything about the scorer that can change a score, for provenance and resume keys."""
        return {
            "device": str(self.device),
            "precision": self.precision,
            "allow_tf32": self.allow_tf32,
            "max_length": self.max_length,
            "text_padding": self.text_inputs.padding,
            "image_processor": describe_image_processor(self.processor.image_processor),
        }

    @contextlib.contextmanager
    def _numerics(self):
        """Autocast only when asked for; on CUDA, TF32 exactly as asked, restored afterwards."""
        dtype = PRECISIONS[self.precision]
        tf32 = cuda_tf32(self.allow_tf32) if self.device.type == "cuda" else contextlib.nullcontext()
        with tf32, torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext():
            yield

    def _pad(self, sequences: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """The inputs `get_text_features` takes for token sequences, padded as the model's family declares
        (`self.text_inputs`: to the longest or to the context, which side, with which id, with a mask or not).

        Built with one numpy scatter, not two tensor writes per text: for 1,728 texts in batches of 64 that
        is 2 ms instead of 33 ms (2-core EPYC), paid again by every model of a run."""
        declared = self.text_inputs
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        width = self.max_length if declared.pad_to_context else int(lengths.max())
        columns = np.arange(width)
        if declared.padding_side == "left":
            mask = columns >= width - lengths[:, None]
        else:
            mask = columns < lengths[:, None]
        input_ids = np.full((len(sequences), width), declared.pad_token_id, dtype=np.int64)
        input_ids[mask] = np.fromiter(
            itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum())
        )
        inputs = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(mask.astype(np.int64)),
        }
        return {name: inputs[name] for name in declared.input_names}

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
        """Each text's token ids as the model reads them (cut to the text context, as the tokenizer cuts
        with `truncation=True`) and its untruncated token count (special tokens included).

        One tokenizer call over every text, and a second over only the texts the context cuts: the
        Python side of a tokenizer call costs about as much as the text tower of a small model, and the
        ids, the counts and the truncation report all come from these two calls.
        """
        tokenizer = self.processor.tokenizer
        ids = tokenizer(list(texts), truncation=False, verbose=False, return_attention_mask=False)[
            "input_ids"
        ]
        counts = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        cut = np.flatnonzero(counts > self.max_length)
        if len(cut):
            kept = tokenizer([texts[i] for i in cut], truncation=True, max_length=self.max_length,
                             return_attention_mask=False)["input_ids"]  # fmt: skip
            for index, sequence in zip(cut, kept):
                ids[index] = sequence
        return ids, counts

    def encode_texts(
        self, texts: Sequence[str], token_ids: Sequence[Sequence[int]] | None = None
    ) -> torch.Tensor:
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
            self.cache.add(
                "image", [source.key for source in todo], self._encode_images(dataset, image_column, todo)
            )
        return self.cache.get("image", keys)

    def _pixel_batches(
        self, dataset: Dataset, image_column: str, sources: list[ImageSource]
    ) -> Iterable[torch.Tensor]:
        """Preprocessed pixels of `sources`, `batch_size` images at a time, in order (decoded in DataLoader
        workers). `pixel_store.SharedPixelScorer` serves pixels decoded earlier (for another model) instead."""
        return decoded_batches(
            DistinctImages(dataset, image_column, sources, self.processor.image_processor),
            self.batch_size,
            self.num_workers,
            pin_memory=self.device.type == "cuda",
        )

    @torch.inference_mode()
    def _encode_images(self, dataset: Dataset, image_column: str, sources: list[ImageSource]) -> torch.Tensor:
        loader = self._pixel_batches(dataset, image_column, sources)
        chunks = []
        batches = -(-len(sources) // self.batch_size)
        for pixel_values in tqdm(
            loader, desc="Encoding images", disable=not self.progress, unit="batch", total=batches
        ):
            with self._numerics():
                emb = _features(
                    self.model.get_image_features(pixel_values=pixel_values.to(self.device, self.pixel_dtype))
                )
            chunks.append(torch.nn.functional.normalize(emb.float(), dim=-1).cpu())
        return torch.cat(chunks)

    def embed_images(
        self, dataset: Dataset, image_column: str = columns.IMAGE
    ) -> tuple[torch.Tensor, np.ndarray]:
        """Embeddings of the distinct images of `dataset` and, per row, the index of its image's embedding.

        Images are told apart by content, so a dataset that repeats an image (REPLACE: ~2.3 rows per
        image) encodes it once; the zero-shot tasks use this too.
        """
        undecoded, sources, image_slot = _keyed_images(dataset, image_column)
        return self.encode_images(undecoded, image_column, sources), image_slot

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

        texts, caption_slots = remembered(
            "captions",
            (id(dataset), tuple(all_columns), tuple(optional_columns)),
            lambda: _caption_slots(dataset, all_columns, optional_columns),
            keep=dataset,
        )
        # The images are keyed (content hashes, which release the GIL) in a thread while this one tokenises.
        # They are decoded and encoded after, here: the DataLoader forks its workers, and a fork while
        # another thread runs Python copies that thread's locks and half-imported modules into the worker
        # held, never to be released (a worker that then exits with code 1, seen in CI; Python 3.12 warns of
        # it). So the fork happens when this process runs one thread of ours.
        with ThreadPoolExecutor(1, thread_name_prefix="hardpos-image-keys") as keying:
            keyed = keying.submit(
                contextvars.copy_context().run,  # the caller's `run_memo.sharing` too
                _keyed_images,
                dataset,
                image_column,
            )
            token_ids, token_counts = remembered(
                "tokens",
                _none_or(
                    (type(self).tokenize, tokenizer_key(self.processor.tokenizer), self.max_length, id(texts))
                ),
                lambda: self.tokenize(texts),
                keep=texts,
            )
        undecoded, sources, image_slot = keyed.result()
        image_emb = self.encode_images(undecoded, image_column, sources)
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


def _caption_slots(dataset: Dataset, all_columns: Sequence[str], optional_columns: Sequence[str]
                   ) -> tuple[list[str], dict[str, np.ndarray]]:  # fmt: skip
    """The distinct texts of `all_columns`, and per column each row's index among them (-1: a null in an
    optional column); a null, non-string or empty caption elsewhere is refused naming its row and column."""
    text_to_slot: dict[str, int] = {}
    caption_slots: dict[str, np.ndarray] = {}
    for column in all_columns:
        slots = np.full(len(dataset), -1, dtype=np.int64)
        for row, text in enumerate(dataset[column][:]):  # one batch: a `Column` iterates row by row
            if text is None:
                if column in optional_columns:
                    continue
                raise ValueError(f"row {row}, column {column!r}: the caption is missing (null)")
            if not isinstance(text, str):
                raise ValueError(
                    f"row {row}, column {column!r}: expected a string, got {type(text).__name__}"
                )
            if not text.strip():
                raise ValueError(f"row {row}, column {column!r}: the caption is empty")
            slots[row] = text_to_slot.setdefault(text, len(text_to_slot))
        caption_slots[column] = slots
    return list(text_to_slot), caption_slots


def _keyed_images(dataset: Dataset, image_column: str) -> tuple[Dataset, list[ImageSource], np.ndarray]:
    """`dataset` with its images left undecoded, its distinct images and each row's index among them;
    keyed once per run for every model (`run_memo`)."""

    def keyed() -> tuple[Dataset, list[ImageSource], np.ndarray]:
        undecoded = _undecoded(dataset, image_column)
        sources, image_slot = distinct_images(undecoded, image_column)
        return undecoded, sources, image_slot

    return remembered("images", (id(dataset), image_column), keyed, keep=dataset)


def _none_or(key: tuple) -> tuple | None:
    """None when a part of `key` is unknown (nothing is then remembered), else `key`."""
    return None if any(part is None for part in key) else key


def _undecoded(dataset: Dataset, image_column: str) -> Dataset:
    """The dataset with its image column left as bytes/paths: keys are hashed without decoding."""
    if isinstance(dataset.features.get(image_column), ImageFeature) and dataset.features[image_column].decode:
        return dataset.cast_column(image_column, ImageFeature(decode=False))
    return dataset
