"""A small generated sentiment data set (two classes), for fine-tuning tests on real weights.

Training and test sentences share no template, subject or adjective, so a model that scores well
on the test split has learned sentiment from the pretrained weights, not the sentences.
"""

import itertools
import random

TRAIN_POSITIVE = ["wonderful", "excellent", "delightful", "brilliant", "superb", "lovely",
                  "fantastic", "enjoyable"]
TRAIN_NEGATIVE = ["terrible", "awful", "horrible", "dreadful", "boring", "disappointing",
                  "miserable", "unpleasant"]
TEST_POSITIVE = ["great", "amazing", "charming", "pleasant"]
TEST_NEGATIVE = ["bad", "poor", "dull", "annoying"]
TRAIN_SUBJECTS = ["movie", "meal", "hotel", "concert", "book", "trip", "service", "game"]
TEST_SUBJECTS = ["show", "restaurant", "album", "flight"]
TRAIN_TEMPLATES = ["The {s} was {a}.", "What a {a} {s}!", "I found the {s} {a}.",
                   "Honestly, the {s} is {a}."]
TEST_TEMPLATES = ["Our {s} turned out {a}.", "This {s} felt {a} to me."]


def _make(templates, subjects, positive, negative, seed):
    rows = [(t.format(s=s, a=a), label)
            for label, adjectives in ((1, positive), (0, negative))
            for t, s, a in itertools.product(templates, subjects, adjectives)]
    random.Random(seed).shuffle(rows)
    return rows


def sentiment_splits(num_train=256, num_test=96, seed=0):
    """(train, test): lists of (sentence, label), label 1 = positive."""
    train = _make(TRAIN_TEMPLATES, TRAIN_SUBJECTS, TRAIN_POSITIVE, TRAIN_NEGATIVE, seed)
    test = _make(TEST_TEMPLATES, TEST_SUBJECTS, TEST_POSITIVE, TEST_NEGATIVE, seed + 1)
    return train[:num_train], test[:num_test]
