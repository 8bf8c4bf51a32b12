"""Equal learning: on MiniLM's real weights and real sentences, fit with rows grouped by length
reaches the held-out accuracy of fit with every batch padded to seq_length, within one point."""

import os
import random

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier

pytestmark = pytest.mark.slow  # two fine-tuning runs of MiniLM, a few minutes on 2 cores

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "tests", "fixtures", "docstring_sentences.txt")


def word_order_task(sentences, seed):
    """(texts, labels): each sentence as written (1) or with its words in reverse order (0).

    Both classes have the same words and the same length, so a model can only tell them apart
    by reading the order of the words (and grouping by length cannot leak the label).
    """
    rng = random.Random(seed)
    labels = [rng.randint(0, 1) for _ in sentences]
    texts = [" ".join(s.rstrip(".!?").split()[::1 if label else -1])
             for s, label in zip(sentences, labels)]
    return texts, np.array(labels)


def held_out_accuracy(minilm_dir, train, test, bucket_lengths):
    keras.utils.set_random_seed(0)
    model = BertClassifier.from_pretrained(minilm_dir, num_classes=2, seq_length=48)
    model.compile(learning_rate=1e-4)
    model.fit(*train, batch_size=16, epochs=2, verbose=0, seed=0, bucket_lengths=bucket_lengths)
    return float(np.mean(np.argmax(model.predict(test[0], verbose=0), axis=-1) == test[1]))


def test_grouped_fit_learns_as_well_as_fixed_padding(minilm_dir):
    with open(CORPUS, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert len(sentences) == 1536
    train = word_order_task(sentences[:512], seed=1)
    test = word_order_task(sentences[512:], seed=2)
    grouped = held_out_accuracy(minilm_dir, train, test, "auto")
    fixed = held_out_accuracy(minilm_dir, train, test, None)
    # Measured: grouped 0.959, fixed padding 0.961 (2 epochs at 1e-4; 3 at 8e-5 took a third
    # longer for no more certainty).
    assert fixed >= 0.95, f"fixed padding: {fixed:.4f}"  # the task is learnable in 2 epochs
    assert abs(grouped - fixed) <= 0.01, f"grouped {grouped:.4f}, fixed padding {fixed:.4f}"
