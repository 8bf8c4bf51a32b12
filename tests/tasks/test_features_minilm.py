"""Proof that the features reach the decision: MiniLM fine-tuned on a synthetic review task whose
label needs both the text and the features beats the text alone and the features alone by a
wide margin on held-out reviews."""

import itertools
import logging

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier
from keras_bert.layers import TabularFeatures

pytestmark = pytest.mark.slow  # minutes of real training, notebooks or subprocess workers

POSITIVE = ["great", "wonderful", "excellent", "delicious", "friendly", "amazing", "lovely",
            "fantastic"]
NEGATIVE = ["terrible", "awful", "horrible", "disgusting", "rude", "bad", "dreadful", "poor"]
SUBJECTS = ["the food", "the service", "the room", "the staff", "the movie", "the book",
            "the coffee", "the hotel", "the concert", "the game"]
TEMPLATES = ["{s} was {a}.", "honestly, {s} was {a}.", "i thought {s} was {a}.",
             "{s} is {a}, i would say so again."]
CHANNELS = ["web", "app", "store", "phone", "mail", "satire"]
LABELS = ["negative", "positive"]
FLIP_AGE = 70.0
# Each text once, with its features. Each text twice with other features each time took twice
# as long for no better result: text+features 0.919, text 0.684, features 0.478 (twice); 0.938,
# 0.706, 0.531 (once; with another seed and split 0.856, 0.675, 0.519).
COPIES = 1
EPOCHS = 4


def reviews(seed: int = 0):
    """(train x, y, test x, y): a review's label is its sentiment, flipped when the reviewer is
    over 70 or the review comes from the "satire" channel (about 30% of reviews). The test
    reviews are texts the training set does not have."""
    rng = np.random.default_rng(seed)
    rows = [(t.format(s=s, a=a), int(a in POSITIVE))
            for t, s, a in itertools.product(TEMPLATES, SUBJECTS, POSITIVE + NEGATIVE)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    split = len(rows) * 3 // 4

    def columns(part):
        part = part * COPIES
        x = {"text": np.array([text for text, _ in part], object),
             "age": rng.uniform(18, 80, len(part)).round().astype("float32"),
             "channel": rng.choice(CHANNELS, len(part)).astype(object)}
        sentiment = np.array([positive for _, positive in part])
        flip = (x["age"] > FLIP_AGE) | (x["channel"] == "satire")
        return x, np.where(flip, 1 - sentiment, sentiment)

    return (*columns(rows[:split]), *columns(rows[split:]))


def accuracy(model, x, y) -> float:
    return float(np.mean(np.argmax(model.predict(x, verbose=0), axis=-1) == y))


@pytest.mark.slow
def test_text_and_features_beat_text_alone_and_features_alone(minilm_dir):
    train_x, train_y, test_x, test_y = reviews()
    settings = dict(seq_length=32, label_names=LABELS, pooling="mean")
    keras.utils.set_random_seed(0)
    both = BertClassifier.from_pretrained(minilm_dir, 2, numeric_features=["age"],
                                          categorical_features=["channel"], **settings)
    both.compile(learning_rate=2e-4)
    both.fit(train_x, train_y, epochs=EPOCHS, batch_size=32, verbose=0, seed=0)
    with_features = accuracy(both, test_x, test_y)

    keras.utils.set_random_seed(0)
    text_only = BertClassifier.from_pretrained(minilm_dir, 2, **settings)
    text_only.compile(learning_rate=2e-4)
    text_only.fit(list(train_x["text"]), train_y, epochs=EPOCHS, batch_size=32, verbose=0,
                  seed=0)
    text_alone = accuracy(text_only, list(test_x["text"]), test_y)

    # The features alone: the same feature layer and hidden layer, without the text.
    keras.utils.set_random_seed(0)
    tabular = TabularFeatures(["age"], ["channel"])
    tabular.adapt(train_x)
    inputs = {"age": keras.Input((), dtype="float32", name="age"),
              "channel": keras.Input((), dtype="string", name="channel")}
    hidden = keras.layers.Dense(128, activation="gelu")(tabular(inputs))
    features_only = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden))
    features_only.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy")
    features_only.fit({k: train_x[k] for k in inputs}, train_y, epochs=40, batch_size=32,
                      verbose=0)
    features_alone = accuracy(features_only, {k: test_x[k] for k in inputs}, test_y)

    logging.getLogger(__name__).info(
        "held-out accuracy: text+features %.3f, text %.3f, features %.3f", with_features,
        text_alone, features_alone)
    # Measured (CPU, 2 cores, 76 s alone): text+features 0.938, text 0.706, features 0.531.
    # The text alone cannot see the flips, the features alone cannot see the sentiment.
    assert with_features >= 0.85
    assert with_features - text_alone >= 0.15
    assert with_features - features_alone >= 0.15
