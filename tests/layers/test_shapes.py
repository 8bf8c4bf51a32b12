"""Rank checks at every boundary where a layer or model takes tensors from its caller
(keras_bert/layers/shapes.py): a wrong rank raises a ValueError that names the layer, the input,
the expected axes and the rank and shape it got, eagerly and on symbolic (keras.Input) tensors.
The checks are static: unknown sizes pass, traced graphs gain no op, and Keras' squeeze of a
last axis of size 1 still works where it did."""

import doctest
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, BertPretrainer
from keras_bert import layers as bert_layers
from keras_bert.layers import shapes

VOCAB, HIDDEN, BATCH, SEQ = 30, 8, 2, 4
ENCODER_KWARGS = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=16, max_position_embeddings=16)


def ids():
    return np.ones((BATCH, SEQ), np.int32)


def hidden(*shape):
    return np.zeros(shape or (BATCH, SEQ, HIDDEN), np.float32)


def mask_bias():
    return np.zeros((BATCH, 1, 1, SEQ), np.float32)


def encoder_inputs():
    return {"input_word_ids": ids(), "input_mask": ids(), "input_type_ids": ids() * 0}


def masked_lm_head():
    table = keras.layers.Embedding(VOCAB, HIDDEN)
    table.build((None,))
    return bert_layers.MaskedLMHead(table)


def tabular_features():
    return bert_layers.TabularFeatures(
        {"age": {"mean": 40.0, "variance": 100.0}},
        {"country": {"vocabulary": ["fr", "us"], "embedding_dim": 2}})


def tabular_inputs():
    return {"age": np.array([31.0, 50.0], np.float32), "country": np.array(["fr", "zz"])}


# (id, make, good call arguments, which argument to replace (index, or index and dict key),
#  the wrong-rank value, the message's owner, input name, expected rank and axes)
BOUNDARIES = [
    ("BertEmbeddings-word_ids", lambda: bert_layers.BertEmbeddings(VOCAB, HIDDEN),
     lambda: (ids(), ids()), 0, np.ones((BATCH, SEQ, 3), np.int32),
     "BertEmbeddings", "input_word_ids", "2 [batch, seq_length]"),
    ("BertEmbeddings-type_ids", lambda: bert_layers.BertEmbeddings(VOCAB, HIDDEN),
     lambda: (ids(), ids()), 1, np.ones((SEQ,), np.int32),
     "BertEmbeddings", "input_type_ids", "2 [batch, seq_length]"),
    ("BertSelfAttention-hidden_states", lambda: bert_layers.BertSelfAttention(HIDDEN, 2),
     lambda: (hidden(), mask_bias()), 0, hidden(BATCH * SEQ, HIDDEN),
     "BertSelfAttention", "hidden_states", "3 [batch, seq_length, hidden_size]"),
    ("BertSelfAttention-mask_bias", lambda: bert_layers.BertSelfAttention(HIDDEN, 2),
     lambda: (hidden(), mask_bias()), 1, ids().astype(np.float32),
     "BertSelfAttention", "mask_bias", "4 [batch, 1, 1, seq_length]"),
    ("TransformerBlock-hidden_states", lambda: bert_layers.TransformerBlock(HIDDEN, 2, 16),
     lambda: (hidden(), mask_bias()), 0, hidden(BATCH, 1, SEQ, HIDDEN),
     "TransformerBlock", "hidden_states", "3 [batch, seq_length, hidden_size]"),
    ("TransformerBlock-mask_bias", lambda: bert_layers.TransformerBlock(HIDDEN, 2, 16),
     lambda: (hidden(), mask_bias()), 1, ids().astype(np.float32),
     "TransformerBlock", "mask_bias", "4 [batch, 1, 1, seq_length]"),
    ("MaskedLMHead-sequence_output", masked_lm_head,
     lambda: (hidden(), ids()), 0, hidden(BATCH, HIDDEN),
     "MaskedLMHead", "sequence_output", "3 [batch, seq_length, hidden_size]"),
    ("MaskedLMHead-masked_positions", masked_lm_head,
     lambda: (hidden(), ids()), 1, np.ones((BATCH,), np.int32),
     "MaskedLMHead", "masked_positions", "2 [batch, num_predictions]"),
    ("NextSentenceHead", lambda: bert_layers.NextSentenceHead(HIDDEN),
     lambda: (hidden(BATCH, HIDDEN),), 0, hidden(),
     "NextSentenceHead", "pooled_output", "2 [batch, hidden_size]"),
    ("ClassificationHead", lambda: bert_layers.ClassificationHead(3),
     lambda: (hidden(BATCH, HIDDEN),), 0, hidden(),
     "ClassificationHead", "pooled_output", "2 [batch, hidden_size]"),
    ("TokenClassificationHead", lambda: bert_layers.TokenClassificationHead(3),
     lambda: (hidden(),), 0, hidden(BATCH, HIDDEN),
     "TokenClassificationHead", "sequence_output", "3 [batch, seq_length, hidden_size]"),
    ("SpanHead", bert_layers.SpanHead,
     lambda: (hidden(),), 0, hidden(BATCH, 1, SEQ, HIDDEN),
     "SpanHead", "sequence_output", "3 [batch, seq_length, hidden_size]"),
    ("SentencePooling-sequence", bert_layers.SentencePooling,
     lambda: (hidden(), ids()), 0, hidden(BATCH, HIDDEN),
     "SentencePooling", "sequence", "3 [batch, seq_length, hidden_size]"),
    ("SentencePooling-mask", bert_layers.SentencePooling,
     lambda: (hidden(), ids()), 1, np.ones((BATCH, SEQ, 2), np.int32),
     "SentencePooling", "mask", "2 [batch, seq_length]"),
    ("TabularFeatures-numeric", tabular_features,
     lambda: (tabular_inputs(),), (0, "age"), np.zeros((BATCH, 3), np.float32),
     "TabularFeatures", "age", "1 [batch]"),
    ("TabularFeatures-categorical", tabular_features,
     lambda: (tabular_inputs(),), (0, "country"), np.array([["fr", "us"], ["us", "fr"]]),
     "TabularFeatures", "country", "1 [batch]"),
    ("BertEncoder-input_word_ids", lambda: BertEncoder(**ENCODER_KWARGS),
     lambda: (encoder_inputs(),), (0, "input_word_ids"), np.ones((BATCH, SEQ, 8), np.int32),
     "BertEncoder", "input_word_ids", "2 [batch, seq_length]"),
    ("BertEncoder-input_mask", lambda: BertEncoder(**ENCODER_KWARGS),
     lambda: (encoder_inputs(),), (0, "input_mask"), np.ones((SEQ,), np.int32),
     "BertEncoder", "input_mask", "2 [batch, seq_length]"),
    ("BertEncoder-input_type_ids", lambda: BertEncoder(**ENCODER_KWARGS),
     lambda: (encoder_inputs(),), (0, "input_type_ids"), np.ones((BATCH, SEQ, 2), np.int32),
     "BertEncoder", "input_type_ids", "2 [batch, seq_length]"),
    ("BertPretrainer-masked_lm_positions", lambda: BertPretrainer(BertEncoder(**ENCODER_KWARGS)),
     lambda: ({**encoder_inputs(), "masked_lm_positions": ids()},), (0, "masked_lm_positions"),
     np.ones((BATCH * SEQ,), np.int32),
     "BertPretrainer", "masked_lm_positions", "2 [batch, max_predictions_per_seq]"),
    ("BertPretrainer-input_word_ids", lambda: BertPretrainer(BertEncoder(**ENCODER_KWARGS)),
     lambda: ({**encoder_inputs(), "masked_lm_positions": ids()},), (0, "input_word_ids"),
     np.ones((BATCH, SEQ, 8), np.int32),
     "BertPretrainer", "input_word_ids", "2 [batch, seq_length]"),
]
PARAMS = [pytest.param(*row[1:], id=row[0]) for row in BOUNDARIES]
# On keras.Input, Keras calls compute_output_shape instead of call, and gives it no shape for an
# argument named `mask`: SentencePooling's mask is checked when the model first runs or traces.
SYMBOLIC_PARAMS = [param for param in PARAMS if param.id != "SentencePooling-mask"]


def replaced(args, where, value):
    """``args`` with the argument at ``where`` (an index, or (index, key) in a dict) replaced."""
    args = list(args)
    if isinstance(where, tuple):
        index, key = where
        args[index] = {**args[index], key: value}
    else:
        args[where] = value
    return args


def message(owner, name, rank_and_axes, got):
    return re.escape(f"{owner} input '{name}' must have rank {rank_and_axes}, got rank {got}")


def symbolic(value, name=None):
    """A keras.Input shaped like ``value`` with a free batch axis."""
    value = np.asarray(value)
    dtype = "string" if value.dtype.kind in "OUS" else str(value.dtype)
    return keras.Input(shape=value.shape[1:], dtype=dtype, name=name)


@pytest.mark.parametrize("make, args, where, bad, owner, name, expected", PARAMS)
def test_wrong_rank_names_layer_input_and_ranks(make, args, where, bad, owner, name, expected):
    subject = make()
    good = args()
    subject(*good)  # the right ranks pass
    got = f"{bad.ndim} with shape {bad.shape}"
    with pytest.raises(ValueError, match=message(owner, name, expected, got)):
        subject(*replaced(good, where, bad))


@pytest.mark.parametrize("make, args, where, bad, owner, name, expected", SYMBOLIC_PARAMS)
def test_wrong_rank_fails_on_symbolic_inputs(make, args, where, bad, owner, name, expected):
    """Building a functional model on the subject fails at once, not when it first runs."""
    def placeholders(arg):
        if isinstance(arg, dict):
            return {key: symbolic(value, key) for key, value in arg.items()}
        return symbolic(arg)
    inputs = [placeholders(arg) for arg in replaced(args(), where, bad)]
    got = f"{bad.ndim} with shape {(None, *bad.shape[1:])}"
    with pytest.raises(ValueError, match=message(owner, name, expected, got)):
        make()(*inputs)


def test_unknown_sizes_pass_and_add_no_graph_op():
    """[None, None] inputs trace; the check is Python at trace time, so the traced graph of the
    encoder holds no assertion."""
    encoder = BertEncoder(**ENCODER_KWARGS)
    spec = tf.TensorSpec([None, None], tf.int32)
    function = tf.function(lambda inputs: encoder(inputs)["sequence_output"])
    graph = function.get_concrete_function(dict.fromkeys(encoder_inputs(), spec)).graph
    ops = {op.type for op in graph.get_operations()}
    assert not {"Assert", "AssertV2"} & ops, ops
    assert graph.outputs[0].shape.as_list() == [None, None, HIDDEN]


def test_unknown_rank_and_sizes_pass():
    shapes.check_rank("Layer", "x", tf.TensorShape(None), shapes.TOKEN_IDS)
    shapes.check_rank("Layer", "x", (None, None), shapes.TOKEN_IDS)
    shapes.check_rank("Layer", "x", None, shapes.TOKEN_IDS)
    shapes.check_rank("Layer", "x", [[1, 2], [3]], shapes.TOKEN_IDS)  # ragged: left to Keras
    shapes.check_rank("Layer", "x", [[1, 2], [3, 4]], shapes.TOKEN_IDS)
    with pytest.raises(ValueError, match=r"rank 2 \[batch, seq_length\], got rank 1 with shape"
                                         r" \(3,\)"):
        shapes.check_rank("Layer", "x", [1, 2, 3], shapes.TOKEN_IDS)


def test_keras_squeeze_of_a_last_axis_of_size_one_still_works():
    encoder = BertEncoder(**ENCODER_KWARGS)
    inputs = encoder_inputs()
    expected = np.asarray(encoder(inputs)["sequence_output"])
    columns = {name: value[:, :, None] for name, value in inputs.items()}  # [batch, seq, 1]
    np.testing.assert_allclose(np.asarray(encoder(columns)["sequence_output"]), expected,
                               atol=1e-6)
    features = tabular_features()
    flat = np.asarray(features(tabular_inputs()))
    as_columns = {name: value[:, None] for name, value in tabular_inputs().items()}
    np.testing.assert_array_equal(np.asarray(features(as_columns)), flat)


def test_check_rank_example_runs():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(shapes.check_rank, "check_rank",
                                             globs=vars(shapes).copy()):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted == 3 and result.failed == 0
