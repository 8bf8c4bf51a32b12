"""Real weights (all-MiniLM-L6-v2): the embedder reproduces sentence-transformers, and the
classifier fine-tunes to high accuracy on held-out sentences in well under a minute of training."""

import os

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier, BertEmbedder
from tests.tasks.sentiment_data import sentiment_splits

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                       "minilm_embeddings.npz")


@pytest.fixture(scope="module")
def reference():
    with np.load(FIXTURE) as data:
        return {k: data[k] for k in data.files}


def test_mean_pooling_matches_sentence_transformers(minilm_dir, reference):
    sentences = [str(s) for s in reference["sentences"]]
    embedder = BertEmbedder.from_pretrained(minilm_dir, seq_length=64, pooling="mean",
                                            normalize=True)
    np.testing.assert_allclose(embedder.embed(sentences), reference["embeddings"], atol=1e-5)
    unnormalized = BertEmbedder(embedder.encoder, embedder.preprocessor, pooling="mean")
    np.testing.assert_allclose(unnormalized.embed(sentences), reference["unnormalized"],
                               atol=1e-5)


@pytest.mark.slow
def test_classifier_fine_tunes_minilm(minilm_dir):
    train, test = sentiment_splits()
    keras.utils.set_random_seed(0)
    classifier = BertClassifier.from_pretrained(minilm_dir, num_classes=2, seq_length=32,
                                                label_names=["negative", "positive"])
    texts, labels = [s for s, _ in test], np.array([label for _, label in test])
    classifier.compile(learning_rate=5e-5)
    classifier.fit([s for s, _ in train], [["negative", "positive"][y] for _, y in train],
                   batch_size=16, epochs=2, verbose=0, bucket_lengths=[16, 32])
    predicted = classifier.predict_labels(texts)
    after = np.mean(np.array(predicted) == np.array(["negative", "positive"])[labels])
    # 256 training sentences; the 64 test sentences share no template, subject or adjective.
    assert after >= 0.9, f"accuracy {after:.3f} on held-out sentences"
    # BERT's optimizer, sized by fit: 256 / 16 = 16 steps per epoch, 32 in all, so the rate
    # has decayed to 0 after the last one.
    assert type(classifier.optimizer).__name__ == "BertAdamW"
    assert int(classifier.optimizer.iterations) == 32
    assert float(classifier.optimizer.learning_rate) == pytest.approx(0.0, abs=1e-12)
