"""Google's fine-tuned checkpoints (run_classifier.py, run_squad.py): the fixtures that Google's own
graph wrote and ran (tests/fixtures/google_heads/make_google_fixtures.py) hold the heads under
Google's names, and our encoder with those head arrays gives Google's logits."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, BertTokenizer
from keras_bert.checkpoints.names import encoder_weight_names

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                        "google_heads")
TOLERANCE = 1e-5
HIDDEN = 32


def _fixture(task):
    directory = os.path.join(FIXTURES, task)
    with np.load(os.path.join(directory, "expected.npz")) as data:
        expected = {k: data[k] for k in data.files}
    return directory, expected


def _encoder_outputs(encoder, expected):
    outputs = encoder({"input_word_ids": expected["input_ids"],
                       "input_mask": expected["input_mask"],
                       "input_type_ids": expected["segment_ids"]})
    return np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])


def _encoder_and_google_names(directory):
    encoder = BertEncoder.from_pretrained(directory)
    return encoder, {w.google for w in encoder_weight_names(encoder)}


@pytest.mark.parametrize("task, head, head_shapes", [
    ("classifier", ("output_weights", "output_bias"), ([3, HIDDEN], [3])),
    ("squad", ("cls/squad/output_weights", "cls/squad/output_bias"), ([2, HIDDEN], [2])),
])
def test_checkpoint_holds_what_google_fine_tuning_saves(task, head, head_shapes):
    directory, _ = _fixture(task)
    reader = tf.train.load_checkpoint(directory)  # the `checkpoint` file names model.ckpt-7
    shapes = reader.get_variable_to_shape_map()
    assert [shapes[name] for name in head] == list(head_shapes)
    _, model = _encoder_and_google_names(directory)
    model |= set(head)
    # AdamWeightDecayOptimizer makes slots only for variables with a gradient: run_squad.py's loss
    # never reads the pooler, so a SQuAD checkpoint has no pooler slots.
    with_slots = {n for n in model if not (task == "squad" and n.startswith("bert/pooler/"))}
    slots = {f"{n}/adam_{m}" for n in with_slots for m in "mv"}
    assert set(shapes) == model | slots | {"global_step"}
    assert reader.get_tensor("global_step") == 7
    assert np.all(reader.get_tensor(f"{head[0]}/adam_v") >= 0)


def test_encoder_and_classifier_head_give_googles_logits():
    directory, expected = _fixture("classifier")
    reader = tf.train.load_checkpoint(directory)
    weights, bias = reader.get_tensor("output_weights"), reader.get_tensor("output_bias")
    _, pooled = _encoder_outputs(BertEncoder.from_pretrained(directory), expected)
    np.testing.assert_allclose(pooled, expected["pooled_output"], atol=TOLERANCE, rtol=0)
    logits = pooled @ weights.T + bias  # run_classifier.py: matmul(transpose_b=True), bias_add
    np.testing.assert_allclose(logits, expected["logits"], atol=TOLERANCE, rtol=0)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(probabilities, expected["probabilities"], atol=TOLERANCE, rtol=0)
    # The rows differ by far more than the tolerance, so a wrong row or head would show.
    assert np.ptp(expected["logits"], axis=0).min() > 100 * TOLERANCE


def test_encoder_and_squad_head_give_googles_start_and_end_logits():
    directory, expected = _fixture("squad")
    reader = tf.train.load_checkpoint(directory)
    weights = reader.get_tensor("cls/squad/output_weights")
    bias = reader.get_tensor("cls/squad/output_bias")
    sequence, _ = _encoder_outputs(BertEncoder.from_pretrained(directory), expected)
    np.testing.assert_allclose(sequence, expected["sequence_output"], atol=TOLERANCE, rtol=0)
    logits = sequence @ weights.T + bias  # [batch, seq, 2], as run_squad.py's create_model
    np.testing.assert_allclose(logits[..., 0], expected["start_logits"], atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(logits[..., 1], expected["end_logits"], atol=TOLERANCE, rtol=0)
    assert np.abs(expected["start_logits"] - expected["end_logits"]).max() > 100 * TOLERANCE


def test_our_tokenizer_packs_as_run_classifier():
    # expected.npz's ids come from Google's FullTokenizer and convert_single_example, including
    # the truncation of a pair that does not fit and an [UNK].
    directory, expected = _fixture("classifier")
    tokenizer = BertTokenizer.from_pretrained(directory)
    pairs = [b or None for b in expected["text_b"].tolist()]
    packed = tokenizer.encode_batch(expected["text_a"].tolist(), pairs,
                                    seq_length=expected["input_ids"].shape[1])
    np.testing.assert_array_equal(packed["input_word_ids"], expected["input_ids"])
    np.testing.assert_array_equal(packed["input_mask"], expected["input_mask"])
    np.testing.assert_array_equal(packed["input_type_ids"], expected["segment_ids"])
    assert expected["input_mask"].all(axis=1).any(), "a pair was truncated to fit"
    assert (expected["input_ids"] == tokenizer.unk_id).any()
