"""keras_bert.distill from a classifier that reads long texts (and pairs) as windows (issue 52):
the teacher's output on each window is that window's target, the student trains on the same
windows, keeps the teacher's window settings and answers one row per text."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor, distill
from keras_bert.export.signatures import logits_model
from keras_bert.finetuning.distillation.targets import distillation_data
from keras_bert.tasks.classification.windows import pack_windows
from tests.tasks.tiny_checkpoint import VOCAB, WORDS

STRIDE = 5  # windows of 14 WordPieces in seq_length 16
TEXTS = [" ".join(WORDS[:30]), "the movie was good", " ".join(WORDS[38:73]), "a terrible film"]
LABELS = ["pos", None, "neg", "neg"]


@pytest.fixture(scope="module")
def teacher():
    """A random 2-layer classifier that reads texts as windows of 14 WordPieces, STRIDE apart."""
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocab_size=len(VOCAB), hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=128,
                          max_position_embeddings=64)
    return BertClassifier(encoder, 2, label_names=["neg", "pos"], window_stride=STRIDE,
                          preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=16))


def test_each_window_is_a_row_whose_target_is_the_teachers_output_on_it(teacher):
    model = teacher
    data = distillation_data(model, TEXTS, LABELS)
    packed, text_index = pack_windows(model.preprocessor, tf.constant(TEXTS), STRIDE)
    assert data.rows == len(text_index) == 5 + 1 + 6 + 1  # 30 and 35 pieces: 5 and 6 windows
    np.testing.assert_array_equal(data.x["input_word_ids"], packed["input_word_ids"])
    probabilities = tf.nn.softmax(logits_model(model)(packed, training=False)).numpy()
    np.testing.assert_allclose(data.targets[:, :2], probabilities, atol=1e-5)
    # Each window has its text's label (one-hot), and is labelled where its text is.
    labelled = np.array([LABELS[i] is not None for i in text_index.numpy()])
    np.testing.assert_array_equal(data.targets[:, 4], labelled)
    label_of = {"pos": [0, 1], "neg": [1, 0]}
    np.testing.assert_array_equal(data.targets[labelled, 2:4],
                                  [label_of[LABELS[i]] for i in text_index.numpy()[labelled]])
    # Pairs: the second text windowed, the first kept in each.
    pairs = distillation_data(model, ["the cat"] * 2, None, text_pairs=TEXTS[:2])
    assert pairs.rows == len(pack_windows(model.preprocessor, tf.constant(["the cat"] * 2),
                                          STRIDE, text_pairs=tf.constant(TEXTS[:2]))[1]) > 2


def test_a_student_of_a_windowing_teacher_keeps_its_windows_and_answers_per_text(teacher):
    model = teacher
    student = distill(model, TEXTS * 2, LABELS * 2, num_layers=1, epochs=1, batch_size=4,
                      seed=0, verbose=0, validation_data=(TEXTS, ["pos", "pos", "neg", "neg"]))
    assert (student.window_combination, student.window_stride) == ("mean", STRIDE)
    outputs = student.predict(TEXTS, verbose=0)
    assert outputs.shape == (len(TEXTS), 2)
    # One row per text, combined from its windows as the teacher combines them.
    packed, text_index = pack_windows(student.preprocessor, tf.constant(TEXTS[:1]), STRIDE)
    windows = logits_model(student)(packed, training=False).numpy()
    mean = windows.mean(axis=0)
    np.testing.assert_allclose(outputs[0], np.exp(mean) / np.exp(mean).sum(), atol=1e-5)
    assert set(student.dev_scores) == {"teacher", "student", "majority"}
