"""A classifier's texts longer than seq_length (issue 52): read as overlapping windows of
WordPieces, the text's output the activation of the mean of its windows' logits; ``fit`` trains
on every window, ``predict`` and ``evaluate`` give one row per text; short texts go through as
without windows. A long text pair keeps its first text in every window of its second."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertPreprocessor
from keras_bert.export.signatures import logits_model
from keras_bert.tasks.classification.windows import pack_windows
from tests.tasks.tiny_checkpoint import VOCAB, WORDS, tiny_encoder

SEQ_LENGTH = 8  # windows of 6 WordPieces
STRIDE = 3
# Every word of WORDS is one WordPiece: a text of 12 words is 3 windows (0-5, 3-8, 6-11).
LONG = " ".join(WORDS[:12])
SHORT = ["the cat sat", "a good movie", ""]


def classifier(**kwargs):
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)
    return BertClassifier(tiny_encoder(), 3, preprocessor=preprocessor,
                          **{"window_stride": STRIDE, **kwargs})


# The tests that only predict share these (built as ``classifier()`` builds them, so each is the
# model the test would build); the fit tests build their own.
@pytest.fixture(scope="module")
def model():
    return classifier()


@pytest.fixture(scope="module")
def cut(model):
    """``model``'s weights, reading a long text as its first window (cut at seq_length)."""
    first = classifier(window_combination="first")
    first.set_weights(model.get_weights())
    return first


def packed(words):
    """One window packed by hand: [CLS] words [SEP], padded to SEQ_LENGTH."""
    ids = [VOCAB.index("[CLS]"), *(VOCAB.index(w) for w in words), VOCAB.index("[SEP]")]
    mask = [1] * len(ids) + [0] * (SEQ_LENGTH - len(ids))
    ids += [0] * (SEQ_LENGTH - len(ids))
    return {"input_word_ids": np.array([ids], np.int32), "input_mask": np.array([mask], np.int32),
            "input_type_ids": np.zeros((1, SEQ_LENGTH), np.int32)}


def test_a_long_text_is_the_softmax_of_its_windows_mean_logits(model):
    logits = logits_model(model)
    words = WORDS[:12]
    windows = [words[0:6], words[3:9], words[6:12]]
    by_hand = np.mean([logits(packed(w), training=False).numpy()[0] for w in windows], axis=0)
    expected = np.exp(by_hand) / np.exp(by_hand).sum()
    got = model.predict([SHORT[0], LONG, SHORT[1]], verbose=0)
    assert got.shape == (3, 3)
    np.testing.assert_allclose(got[1], expected, atol=1e-6)
    # Regression: the mean of the windows' scores.
    regressor = BertClassifier(tiny_encoder(), 1, preprocessor=model.preprocessor,
                               window_stride=STRIDE)
    scores = [regressor(packed(w), training=False).numpy()[0, 0] for w in windows]
    np.testing.assert_allclose(regressor.predict([LONG], verbose=0)[0, 0], np.mean(scores),
                               atol=1e-6)


def test_short_texts_go_through_as_without_windows_and_first_is_the_cut(model, cut):
    np.testing.assert_array_equal(model.predict(SHORT, verbose=0), cut.predict(SHORT, verbose=0))
    np.testing.assert_allclose(cut.predict([LONG], verbose=0)[0],
                               cut(packed(WORDS[:6]), training=False).numpy()[0], atol=1e-6)


def test_empty_and_whitespace_texts_are_cls_sep(model):
    outputs = model.predict(["", "  \t\n ", "\u200b\x00"], verbose=0)
    expected = model(packed([]), training=False).numpy()[0]
    for row in outputs:
        np.testing.assert_allclose(row, expected, atol=1e-6)


def test_fit_trains_on_every_window_and_evaluate_scores_texts():
    model = classifier()
    model.compile(learning_rate=1e-3)
    batches = []
    callback = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(b))
    texts, labels = [LONG, *SHORT], [2, 0, 1, 0]
    model.fit(texts, labels, batch_size=1, epochs=1, verbose=0, callbacks=[callback], seed=0)
    assert len(batches) == 3 + 3  # the long text's 3 windows and 3 short texts
    probabilities = model.predict(texts, verbose=0)
    accuracy = float(np.mean(np.argmax(probabilities, -1) == labels))
    loss = float(np.mean(-np.log(probabilities[np.arange(4), labels])))
    scores = model.evaluate(texts, labels, verbose=0, return_dict=True)
    assert scores["accuracy"] == pytest.approx(accuracy)
    assert scores["loss"] == pytest.approx(loss, rel=1e-5)
    assert model.predict_labels(texts) == [int(i) for i in np.argmax(probabilities, -1)]


def test_a_dataset_of_long_texts_gives_each_window_its_label(model):
    dataset = tf.data.Dataset.from_tensor_slices(([LONG, "the cat"], [2, 1])).batch(2)
    x, y = next(iter(model.make_dataset(dataset)))
    assert x["input_word_ids"].shape[0] == 4 and y.numpy().tolist() == [2, 2, 2, 1]
    assert "example_index" not in x


def test_settings_are_in_the_config_and_the_keras_file(cut, tmp_path):
    config = cut.get_config()
    assert (config["window_combination"], config["window_stride"]) == ("first", STRIDE)
    path = str(tmp_path / "model.keras")
    cut.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.window_combination, loaded.window_stride) == ("first", STRIDE)
    np.testing.assert_allclose(loaded.predict([LONG], verbose=0), cut.predict([LONG], verbose=0),
                               atol=1e-6)


@pytest.mark.parametrize("stride, message", [(0, "at least 1"), (6, "not less than the window"),
                                             (7, "not less than the window")])
def test_a_bad_stride_is_refused_naming_it(stride, message):
    with pytest.raises(ValueError, match=f"window_stride.*{message}"):
        classifier(window_stride=stride)


def test_unknown_combination_is_refused():
    with pytest.raises(ValueError, match="window_combination 'max'"):
        classifier(window_combination="max")


def test_a_text_past_the_window_limit_fails_naming_it():
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=2"):
        pack_windows(preprocessor, tf.constant([LONG]), STRIDE, max_windows=2)
    ids, text_index = pack_windows(preprocessor, tf.constant([LONG, "the"]), STRIDE, 3)
    assert text_index.numpy().tolist() == [0, 0, 0, 1]
    assert ids["input_word_ids"].shape == (4, SEQ_LENGTH)


# ---------------------------------------------------------------------------------- text pairs
# A pair's budget is SEQ_LENGTH - 3 = 5 pieces: its first text keeps up to 3 (Google's cut),
# its second is windowed in the rest, at stride min(STRIDE, window - 1).
SHORT_PAIRS = [("the cat", "a dog sat"), ("a good movie", ""), ("", "the cat"), ("the", "a")]


def packed_pair(first, second):
    """One pair window packed by hand: [CLS] first [SEP] second [SEP], padded."""
    cls, sep = VOCAB.index("[CLS]"), VOCAB.index("[SEP]")
    ids = [cls, *(VOCAB.index(w) for w in first), sep, *(VOCAB.index(w) for w in second), sep]
    types = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    padding = SEQ_LENGTH - len(ids)
    return {"input_word_ids": np.array([ids + [0] * padding], np.int32),
            "input_mask": np.array([[1] * len(ids) + [0] * padding], np.int32),
            "input_type_ids": np.array([types + [0] * padding], np.int32)}


def test_pairs_that_fit_are_packed_as_before_and_first_is_googles_cut(model, cut):
    texts, pairs = (np.array(column, object) for column in zip(*SHORT_PAIRS))
    as_before = model.predict(dict(model.preprocessor((texts, pairs))), verbose=0)
    np.testing.assert_array_equal(model.predict(SHORT_PAIRS, verbose=0), as_before)
    np.testing.assert_array_equal(cut.predict(SHORT_PAIRS, verbose=0), as_before)
    # A long pair, cut: Google's truncation (the longer text loses its last pieces).
    long_pair = (" ".join(WORDS[:5]), " ".join(WORDS[20:27]))
    np.testing.assert_allclose(cut.predict([long_pair], verbose=0)[0], cut(
        packed_pair(WORDS[:3], WORDS[20:22]), training=False).numpy()[0], atol=1e-6)


def test_a_long_pair_keeps_its_first_text_in_every_window_of_its_second(model):
    logits = logits_model(model)
    second = WORDS[20:27]  # windows of 5 - 2 = 3 pieces at stride 2: 0-2, 2-4, 4-6
    windows = [second[0:3], second[2:5], second[4:7]]
    by_hand = np.mean([logits(packed_pair(["the", "cat"], w), training=False).numpy()[0]
                       for w in windows], axis=0)
    got = model.predict([SHORT_PAIRS[0], ("the cat", " ".join(second))], verbose=0)
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got[1], np.exp(by_hand) / np.exp(by_hand).sum(), atol=1e-6)
    # A long first text is cut to 3 pieces; the second read 2 at a time, at stride 1.
    ids, text_index = pack_windows(model.preprocessor, tf.constant([" ".join(WORDS[:5])]),
                                   STRIDE, text_pairs=tf.constant([" ".join(WORDS[20:26])]))
    assert text_index.numpy().tolist() == [0] * 5
    for start, row in enumerate(ids["input_word_ids"].numpy()):
        np.testing.assert_array_equal(
            row, packed_pair(WORDS[:3], WORDS[20 + start:22 + start])["input_word_ids"][0])


def test_fit_trains_on_every_window_of_a_pair_and_evaluate_scores_pairs():
    model = classifier()
    model.compile(learning_rate=1e-3)
    batches = []
    callback = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(b))
    pairs = [("the cat", " ".join(WORDS[20:27])), *SHORT_PAIRS[:2]]
    labels = [2, 0, 1]
    model.fit(pairs, labels, batch_size=1, epochs=1, verbose=0, callbacks=[callback], seed=0)
    assert len(batches) == 3 + 2  # the long pair's 3 windows and 2 short pairs
    probabilities = model.predict(pairs, verbose=0)
    assert probabilities.shape == (3, 3)
    loss = float(np.mean(-np.log(probabilities[np.arange(3), labels])))
    scores = model.evaluate(pairs, labels, verbose=0, return_dict=True)
    assert scores["loss"] == pytest.approx(loss, rel=1e-5)
    assert model.predict_labels(pairs) == [int(i) for i in np.argmax(probabilities, -1)]
    # A dataset of pair columns: each window a row with its pair's label.
    dataset = tf.data.Dataset.from_tensor_slices(
        ({"text": [p[0] for p in pairs], "text_pair": [p[1] for p in pairs]}, labels)).batch(3)
    x, y = next(iter(model.make_dataset(dataset)))
    assert x["input_word_ids"].shape[0] == 5 and y.numpy().tolist() == [2, 2, 2, 0, 1]


def test_a_pair_past_the_window_limit_fails_naming_it():
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=2"):
        pack_windows(preprocessor, tf.constant(["the cat"]), STRIDE, max_windows=2,
                     text_pairs=tf.constant([" ".join(WORDS[20:27])]))
