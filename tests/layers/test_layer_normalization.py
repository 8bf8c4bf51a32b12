"""BertLayerNormalization trains with the same values and gradients as Keras' LayerNormalization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.layer_normalization import BertLayerNormalization


def _layers(dtype=None):
    rng = np.random.default_rng(0)
    ours = BertLayerNormalization(epsilon=1e-12, dtype=dtype)
    reference = keras.layers.LayerNormalization(epsilon=1e-12, dtype=dtype)
    for layer in (ours, reference):
        layer.build((None, 32))
    gamma, beta = rng.normal(1, 0.5, 32), rng.normal(0, 0.5, 32)
    for layer in (ours, reference):
        layer.gamma.assign(gamma.astype(np.float32))
        layer.beta.assign(beta.astype(np.float32))
    return ours, reference


def _value_and_gradients(layer, x, upstream, training):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=training) if training else layer(x)
    return [y] + tape.gradient(y, [x, layer.gamma, layer.beta], output_gradients=upstream)


@pytest.mark.parametrize("in_graph", [False, True])
def test_training_values_and_gradients_equal_keras_layer_normalization(in_graph):
    ours, reference = _layers()
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(3, 4, (2, 50, 32)), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 50, 32)), tf.float32)
    run = tf.function(_value_and_gradients) if in_graph else _value_and_gradients
    got = run(ours, x, upstream, True)
    expected = _value_and_gradients(reference, x, upstream, False)
    for name, a, b in zip(("y", "x grad", "gamma grad", "beta grad"), got, expected):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), b.numpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=name)


def test_inference_runs_keras_layer_normalization_exactly():
    ours, reference = _layers()
    x = tf.constant(np.random.default_rng(2).normal(size=(6, 32)), tf.float32)
    np.testing.assert_array_equal(ours(x).numpy(), reference(x).numpy())


def test_mixed_bfloat16_computes_in_float32_and_returns_bfloat16():
    ours, reference = _layers("mixed_bfloat16")
    x = tf.constant(np.random.default_rng(3).normal(size=(4, 32)), tf.float32)
    got = _value_and_gradients(ours, x, tf.ones((4, 32)), True)
    expected = _value_and_gradients(reference, x, tf.ones((4, 32)), False)
    assert got[0].dtype == tf.bfloat16
    np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
    for a, b in zip(got[1:], expected[1:]):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), b.numpy(), atol=1e-2)


def test_only_the_default_layer_normalization_is_accepted():
    with pytest.raises(ValueError, match="last axis"):
        BertLayerNormalization(axis=1)
    config = BertLayerNormalization(epsilon=1e-12, name="ln").get_config()
    assert BertLayerNormalization.from_config(config).epsilon == 1e-12
