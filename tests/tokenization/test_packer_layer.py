"""BertPackerLayer on its own: Python's pack_ids on every pair of lengths, ragged and dense ids,
and its errors."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.tokenization import BertPackerLayer
from keras_bert.tokenization.packer_layer import pack_segments
from keras_bert.tokenization.packing import pack_ids

IDS = dict(cls_id=2, sep_id=3, pad_id=0)


def _expected(rows_a, rows_b, seq_length):
    rows_b = [None] * len(rows_a) if rows_b is None else rows_b
    rows = [pack_ids(a, b, seq_length, **IDS) for a, b in zip(rows_a, rows_b)]
    return {name: [row[name] for row in rows] for name in rows[0]}


def test_pack_ids_on_every_pair_of_lengths():
    seq_length = 7
    packer = BertPackerLayer(seq_length, **IDS)
    lengths = list(itertools.product(range(8), range(8)))
    rows_a = [[10 + i for i in range(a)] for a, _ in lengths]
    rows_b = [[50 + i for i in range(b)] for _, b in lengths]
    ragged = (tf.ragged.constant(rows_a, dtype=tf.int32), tf.ragged.constant(rows_b, tf.int32))
    for args, b in (((ragged[0],), None), ((ragged,), rows_b)):
        out = packer(*args)
        expected = _expected(rows_a, b, seq_length)
        for name in expected:
            assert out[name].dtype == tf.int32
            assert out[name].numpy().tolist() == expected[name], name


def test_dense_and_int64_ids():
    packer = BertPackerLayer(6, **IDS)
    dense = np.array([[7, 8, 9], [4, 0, 0]], np.int64)  # dense: every position is a token
    out = packer((dense, tf.ragged.constant([[5], []], tf.int64)))
    assert out["input_word_ids"].numpy().tolist() == [[2, 7, 8, 3, 5, 3], [2, 4, 0, 0, 3, 0]]
    assert out["input_type_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1], [0] * 6]
    assert out["input_mask"].numpy().tolist() == [[1] * 6, [1, 1, 1, 1, 1, 0]]


def test_works_in_tf_data_and_symbolically():
    packer = BertPackerLayer(5, **IDS)
    ids = tf.ragged.constant([[7, 8, 9, 10], [4]], tf.int32)
    dataset = tf.data.Dataset.from_tensors(ids).map(packer)
    assert next(iter(dataset))["input_word_ids"].numpy().tolist() == [[2, 7, 8, 9, 3],
                                                                      [2, 4, 3, 0, 0]]
    spec = packer(keras.Input(shape=(None,), dtype="int32", ragged=True))
    assert {name: tuple(s.shape) for name, s in spec.items()} == {
        name: (None, 5) for name in ("input_word_ids", "input_mask", "input_type_ids")}


def test_errors():
    with pytest.raises(ValueError, match="seq_length=1 leaves no room for"):
        BertPackerLayer(1, **IDS)
    ids = tf.ragged.constant([[5]], tf.int32)
    with pytest.raises(ValueError, match="packs one or two segments, got 3"):
        BertPackerLayer(8, **IDS)((ids, ids, ids))
    with pytest.raises(ValueError, match="no room for a pair's"):
        BertPackerLayer(2, **IDS)((ids, ids))
    with pytest.raises(ValueError, match=r"segment 1 must be token ids of rank 2 \(\[batch, "
                                         r"\(tokens\)\]\), got rank 1"):
        BertPackerLayer(8, **IDS)((ids, tf.constant([5, 6])))
    with pytest.raises(TypeError, match="cls_id"):
        BertPackerLayer(8)


def test_pack_segments_takes_its_length_at_run_time():
    lengths = list(itertools.product(range(6), range(6)))
    rows_a = [[10 + i for i in range(a)] for a, _ in lengths]
    rows_b = [[50 + i for i in range(b)] for _, b in lengths]
    ragged = [tf.ragged.constant(rows, dtype=tf.int32) for rows in (rows_a, rows_b)]
    spec = tf.RaggedTensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec([], tf.int32)])
    def pack_pair(ids_a, ids_b, seq_length):
        return pack_segments(ids_a, ids_b, seq_length, **IDS)

    @tf.function(input_signature=[spec, tf.TensorSpec([], tf.int32)])
    def pack_single(ids_a, seq_length):
        return pack_segments(ids_a, None, seq_length, **IDS)

    for seq_length in (3, 6, 13):  # one traced function, three lengths
        for out, rows in ((pack_pair(*ragged, seq_length), rows_b),
                          (pack_single(ragged[0], seq_length), None)):
            expected = _expected(rows_a, rows, seq_length)
            for name in expected:
                assert out[name].numpy().tolist() == expected[name], (seq_length, name)
    assert pack_pair.experimental_get_tracing_count() == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="seq_length leaves no room"):
        pack_pair(*ragged, 2)
    pack_single(ragged[0], 2)
