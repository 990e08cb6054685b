"""Turn a row generator into an Arrow-backed ``datasets.Dataset`` without holding the rows in memory.

All builders share this: ``Dataset.from_generator`` writes rows to Arrow files in batches as they are
produced, so a 27k-row set of embedded JPEGs never sits in RAM. The Arrow files go to a work folder the
caller owns (deleted after export), and every build gets a fresh fingerprint: ``datasets``' generator
cache keys on the generator's arguments, not on the bytes of the files it reads, so reusing it could
silently return a stale build after an upstream file changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import datasets
from datasets.exceptions import DatasetGenerationError

from .validation import DataValidationError

# Rows per Arrow record batch when images are embedded: bounds memory to ~100 images at a time.
IMAGE_WRITER_BATCH_SIZE = 100


def dataset_from_generator(
    generator: Callable,
    gen_kwargs: dict,
    features: datasets.Features,
    *,
    split: str,
    work_dir: str | Path,
) -> datasets.Dataset:
    """Build a Dataset from ``generator(**gen_kwargs)`` with ``features``, cached under ``work_dir``."""
    has_image = any(isinstance(feature, datasets.Image) for feature in features.values())
    try:
        return datasets.Dataset.from_generator(
            generator,
            features=features,
            gen_kwargs=gen_kwargs,
            split=datasets.NamedSplit(split),
            cache_dir=str(work_dir),
            fingerprint=uuid.uuid4().hex,
            writer_batch_size=IMAGE_WRITER_BATCH_SIZE if has_image else None,
        )
    except DatasetGenerationError as error:
        # Surface our own input errors (they name file, row and field) instead of datasets' wrapper.
        if isinstance(error.__cause__, (DataValidationError, OSError)):
            raise error.__cause__ from error
        raise
