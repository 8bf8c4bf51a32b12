"""The pure-Python Example encoder and the record parser, against TensorFlow's own protos."""

import doctest

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.pretraining import dynamic_masking
from keras_bert.pretraining_data import example_encoder
from keras_bert.pretraining_data import masking
from keras_bert.pretraining import schema as pretraining_schema
from keras_bert.pretraining_data.example_encoder import PretrainingExampleEncoder
from tests.pretraining_data.google_spec import google_feature_spec
from keras_bert.pretraining.schema import (parse_pretraining_example,
                                                pretraining_feature_spec, restore_masked_tokens)

INSTANCE = dict(input_ids=[2, 300, 4, 3, 70000, 5, 3], num_segment_a_tokens=4,
                masked_lm_positions=[2, 5], masked_lm_ids=[17, 129], is_random_next=True)


def _expected_features(max_seq_length=10, max_predictions_per_seq=3):
    return {
        "input_ids": [2, 300, 4, 3, 70000, 5, 3, 0, 0, 0],
        "input_mask": [1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
        "segment_ids": [0, 0, 0, 0, 1, 1, 1, 0, 0, 0],
        "masked_lm_positions": [2, 5, 0],
        "masked_lm_ids": [17, 129, 0],
        "masked_lm_weights": [1.0, 1.0, 0.0],
        "next_sentence_labels": [1],
    }


@pytest.mark.parametrize("v2", [False, True])
def test_encoded_record_equals_the_proto_tensorflow_builds(v2):
    record = PretrainingExampleEncoder(80000, 10, 3, v2_feature_names=v2).encode(**INSTANCE)
    names = pretraining_schema.feature_names(v2)
    expected = tf.train.Example(features=tf.train.Features(feature={
        names[name]: (tf.train.Feature(float_list=tf.train.FloatList(value=values))
                      if name == "masked_lm_weights"
                      else tf.train.Feature(int64_list=tf.train.Int64List(value=values)))
        for name, values in _expected_features().items()}))
    assert tf.train.Example.FromString(record) == expected
    # Same size as protobuf's own serialization: packed values, no extra fields.
    assert len(record) == expected.ByteSize()


def test_google_fixed_length_spec_parses_the_record():
    # run_pretraining.py's _decode_record spec, written out here as Google declares it.
    max_seq_length, max_predictions_per_seq = 10, 3
    google_spec = google_feature_spec(max_seq_length, max_predictions_per_seq)
    assert pretraining_feature_spec(max_seq_length, max_predictions_per_seq) == google_spec
    record = PretrainingExampleEncoder(80000, max_seq_length, max_predictions_per_seq).encode(
        **INSTANCE)
    parsed = tf.io.parse_single_example(record, google_spec)
    for name, values in _expected_features().items():
        np.testing.assert_array_equal(parsed[name].numpy(), values, err_msg=name)


def test_parser_reads_both_name_sets_single_and_batched():
    original = PretrainingExampleEncoder(80000, 10, 3).encode(**INSTANCE)
    v2 = PretrainingExampleEncoder(80000, 10, 3, v2_feature_names=True).encode(**INSTANCE)
    batch = parse_pretraining_example(tf.constant([original, v2]), 10, 3)
    single = parse_pretraining_example(tf.constant(v2), 10, 3, v2_feature_names=True)
    for name, values in _expected_features().items():
        np.testing.assert_array_equal(batch[name].numpy(), [values, values], err_msg=name)
        v2_name = pretraining_schema.V2_RENAMES.get(name, name)
        np.testing.assert_array_equal(single[v2_name].numpy(), values, err_msg=name)
    assert batch["input_ids"].dtype == tf.int32
    assert batch["masked_lm_weights"].dtype == tf.float32


def test_parser_rejects_wrong_lengths_and_missing_ids():
    record = PretrainingExampleEncoder(80000, 10, 3).encode(**INSTANCE)
    with pytest.raises(tf.errors.InvalidArgumentError):
        parse_pretraining_example(tf.constant(record), 12, 3)
    no_ids = tf.train.Example.FromString(record)
    del no_ids.features.feature["input_ids"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="neither input_ids nor"):
        parse_pretraining_example(tf.constant(no_ids.SerializeToString()), 10, 3)


def test_restore_masked_tokens_puts_the_labels_back():
    record = PretrainingExampleEncoder(80000, 10, 3).encode(**INSTANCE)
    features = parse_pretraining_example(tf.constant([record, record]), 10, 3)
    np.testing.assert_array_equal(restore_masked_tokens(features).numpy(),
                                  [[2, 300, 17, 3, 70000, 129, 3, 0, 0, 0]] * 2)


def test_encoder_rejects_oversized_instances():
    encoder = PretrainingExampleEncoder(80000, 6, 3)
    with pytest.raises(ValueError, match="7 tokens and 2 predictions; max_seq_length=6"):
        encoder.encode(**INSTANCE)
    with pytest.raises(ValueError, match="outside"):
        PretrainingExampleEncoder(100, 10, 3).encode(**INSTANCE)


@pytest.mark.parametrize("module", [example_encoder, pretraining_schema, masking,
                                    dynamic_masking])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
