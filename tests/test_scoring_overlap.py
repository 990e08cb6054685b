"""`ITMScorer.score` encodes a dataset's images in a thread while the calling one tokenises (issue 52), with
the caller's intra-op thread count, and its scores are those of each step run one after the other."""

import threading

import numpy as np
import torch

from hf_hardpos.scoring import ITMScorer
from tests.support.eval_data import make_eval_set


def test_images_encode_beside_tokenising_with_the_callers_threads(model_and_processor):
    model, processor = model_and_processor
    dataset = make_eval_set(num_images=5, rows_per_image=2, seed=3)
    scorer = ITMScorer(model, processor, batch_size=4, progress=False)
    seen = {}
    encode, tokenize = model.get_image_features, scorer.tokenize

    def image_features(*args, **kwargs):
        seen["images"] = (threading.current_thread().name, torch.get_num_threads())
        return encode(*args, **kwargs)

    def tokenized(texts):
        seen["tokens"] = threading.current_thread().name
        return tokenize(texts)

    model.get_image_features, scorer.tokenize = image_features, tokenized
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        scores = scorer.score(dataset)
    finally:
        torch.set_num_threads(previous)
        del model.get_image_features
    assert seen["tokens"] == threading.current_thread().name
    assert seen["images"][0].startswith("hardpos-images") and seen["images"][1] == 1

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
