"""`ITMScorer.score` keys a dataset's images in a thread while the calling one tokenises (issue 52), forks its
image-decoding workers from the calling thread once that thread is gone (a fork beside a running thread can
copy a held lock into the worker), and its scores are those of each step run one after the other."""

import os
import threading

import numpy as np
import torch

from hf_hardpos import scoring
from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set


def test_images_are_keyed_beside_tokenising_and_workers_fork_with_no_other_thread_running(
    model_and_processor, monkeypatch
):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=5, rows_per_image=2, seed=3)
    scorer = ITMScorer(model, processor, batch_size=4, num_workers=1, progress=False)
    seen = {}
    keys, tokenize, fork = scoring.distinct_images, scorer.tokenize, os.fork

    def keyed(*args, **kwargs):
        seen["keys"] = threading.current_thread().name
        return keys(*args, **kwargs)

    def tokenized(texts):
        seen["tokens"] = threading.current_thread().name
        return tokenize(texts)

    def forked():
        seen["fork"] = (threading.current_thread().name, sorted(t.name for t in threading.enumerate()))
        return fork()

    monkeypatch.setattr(scoring, "distinct_images", keyed)
    monkeypatch.setattr(os, "fork", forked)
    scorer.tokenize = tokenized
    scores = scorer.score(dataset)
    monkeypatch.undo()
    assert seen["tokens"] == threading.current_thread().name
    assert seen["keys"].startswith("hardpos-image-keys")
    # The DataLoader's worker was forked here, with none of the scorer's threads alive.
    assert seen["fork"][0] == threading.current_thread().name
    assert not [name for name in seen["fork"][1] if name.startswith("hardpos-")]

    # One step after the other, in this thread: the same scores, bit for bit.
    alone = ITMScorer(model, processor, batch_size=4, progress=False)
    image_emb, image_slot = alone.embed_images(dataset)
    columns = ("caption", "hard_negative", "hard_positive")
    texts = list(dict.fromkeys(text for column in columns for text in dataset[column][:]))  # distinct, as met
    text_emb, index = alone.encode_texts(texts), {text: i for i, text in enumerate(texts)}
    for column in columns:
        chosen = text_emb[torch.as_tensor([index[text] for text in dataset[column][:]])]
        expected = (image_emb[torch.from_numpy(image_slot)] * chosen).sum(-1).double().numpy()
        np.testing.assert_array_equal(scores[column], expected)
