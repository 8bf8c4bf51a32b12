"""Pretraining heads: the MLM head is tied to the word embeddings and gathers positions; NSP."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert import BertEncoder, BertPretrainer
from keras_bert.layers import gather_positions
from tests.helpers import random_inputs


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_gather_positions_picks_rows():
    sequence = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    positions = np.array([[3, 0], [1, 1]], dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(gather_positions(sequence, positions)),
                                  np.stack([sequence[0, [3, 0]], sequence[1, [1, 1]]]))


def test_mlm_and_nsp_heads_compute_googles_formulas(tiny_config):
    keras.utils.set_random_seed(7)
    pretrainer = BertPretrainer(BertEncoder.from_bert_config(tiny_config))
    mlm = pretrainer.masked_lm
    mlm.output_bias.assign(np.linspace(-1, 1, tiny_config.vocab_size).astype(np.float32))
    inputs = random_inputs(batch=2, seq=8, pad_rows=False)
    positions = np.array([[1, 5, 0], [2, 3, 7]], dtype=np.int32)
    out = pretrainer(dict(inputs, masked_lm_positions=positions))
    encoded = pretrainer.encoder(inputs)
    seq = np.asarray(encoded["sequence_output"])

    gathered = np.stack([seq[b, positions[b]] for b in range(2)])
    hidden = np.asarray(keras.activations.gelu(
        gathered @ mlm.dense.kernel.numpy() + mlm.dense.bias.numpy(), approximate=True))
    hidden = _layer_norm(hidden, mlm.layer_norm.gamma.numpy(), mlm.layer_norm.beta.numpy())
    table = pretrainer.encoder.word_embeddings.embeddings.numpy()
    expected = hidden @ table.T + mlm.output_bias.numpy()
    np.testing.assert_allclose(np.asarray(out["mlm_logits"]), expected, atol=2e-5)
    assert out["mlm_logits"].shape == (2, 3, tiny_config.vocab_size)

    nsp = pretrainer.next_sentence
    pooled = np.asarray(encoded["pooled_output"])
    np.testing.assert_allclose(np.asarray(out["nsp_logits"]),
                               pooled @ nsp.output_weights.numpy().T + nsp.output_bias.numpy(),
                               atol=1e-5)


def test_mlm_output_weights_are_tied_to_word_embeddings(tiny_config):
    pretrainer = BertPretrainer(BertEncoder.from_bert_config(tiny_config))
    own = {w.path for w in pretrainer.masked_lm.weights}
    assert not any("word_embeddings" in path for path in own)
    inputs = dict(random_inputs(batch=1, seq=6, pad_rows=False),
                  masked_lm_positions=np.array([[2]], np.int32))
    before = np.asarray(pretrainer(inputs)["mlm_logits"])
    table = pretrainer.encoder.word_embeddings.embeddings
    table.assign(table.numpy() * 2.0)
    after = np.asarray(pretrainer(inputs)["mlm_logits"])
    assert np.abs(after - before).max() > 1e-3
    # One [vocab, hidden] table among the weights: the head adds none of its own.
    vocab_tables = [w for w in pretrainer.weights if tuple(w.shape) == tuple(table.shape)]
    assert len(vocab_tables) == 1


def test_pretrainer_mixed_precision_logits_are_float32(tiny_config):
    pretrainer = BertPretrainer(BertEncoder.from_bert_config(tiny_config, dtype="mixed_bfloat16"))
    out = pretrainer(dict(random_inputs(), masked_lm_positions=np.zeros((3, 2), np.int32)))
    assert out["mlm_logits"].dtype == "float32" and out["nsp_logits"].dtype == "float32"


def test_mlm_head_gradients_for_bias_and_tied_table_follow_the_formula(tiny_config):
    keras.utils.set_random_seed(3)
    pretrainer = BertPretrainer(BertEncoder.from_bert_config(tiny_config))
    mlm = pretrainer.masked_lm
    rng = np.random.default_rng(3)
    sequence = tf.constant(rng.normal(size=(2, 8, tiny_config.hidden_size)), tf.float32)
    positions = np.array([[1, 5, 0], [2, 3, 7]], dtype=np.int32)
    upstream = tf.constant(rng.normal(size=(2, 3, tiny_config.vocab_size)), tf.float32)
    table = pretrainer.encoder.word_embeddings.embeddings
    with tf.GradientTape() as tape:
        logits = mlm(sequence, positions)
    table_grad, bias_grad = tape.gradient(logits, [table, mlm.output_bias],
                                          output_gradients=upstream)
    hidden = mlm.layer_norm(mlm.dense(gather_positions(sequence, positions))).numpy()
    hidden, upstream = hidden.reshape(6, -1), upstream.numpy().reshape(6, -1)
    np.testing.assert_allclose(bias_grad.numpy(), upstream.sum(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tf.convert_to_tensor(table_grad).numpy(), upstream.T @ hidden,
                               rtol=1e-5, atol=1e-5)


def test_masked_lm_head_config_round_trips_with_its_embedding_table():
    from keras_bert.layers.pretraining_heads import MaskedLMHead
    table = keras.layers.Embedding(50, 16, name="word_embeddings")
    table.build(None)
    head = MaskedLMHead(table, hidden_act="relu", initializer_range=0.05, layer_norm_eps=1e-6)
    hidden = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    positions = np.array([[0, 4], [2, 3]])
    expected = head(hidden, positions)
    config = head.get_config()
    assert config["embedding_layer"]["config"]["input_dim"] == 50
    copy = MaskedLMHead.from_config(config)
    copy(hidden, positions)
    copy.set_weights(head.get_weights())
    copy.embedding_layer.set_weights(table.get_weights())
    assert (copy.hidden_act, copy.initializer_range, copy.layer_norm_eps) == ("relu", 0.05, 1e-6)
    np.testing.assert_allclose(copy(hidden, positions), expected, atol=1e-6)
