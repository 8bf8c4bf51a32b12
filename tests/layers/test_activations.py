"""The training form of Google's tanh GELU gives the same values and gradients as Keras' gelu."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.activations import (gelu_tanh, gelu_tanh_fused, get_activation,
                                           get_training_activation)


def _value_and_gradient(function, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = function(x)
    return y, tape.gradient(y, x, output_gradients=upstream)


@pytest.mark.parametrize("in_graph", [False, True])
def test_fused_gelu_equals_keras_gelu_values_and_gradients(in_graph):
    rng = np.random.default_rng(0)
    x = tf.constant(np.concatenate([rng.normal(0, 3, 10_000), [0, -12, 12, 1e-4]]), tf.float32)
    upstream = tf.constant(rng.normal(size=x.shape), tf.float32)
    fused = _value_and_gradient
    if in_graph:
        fused = tf.function(_value_and_gradient)
    y, grad = fused(gelu_tanh_fused, x, upstream)
    expected_y, expected_grad = _value_and_gradient(gelu_tanh, x, upstream)
    np.testing.assert_allclose(y.numpy(), expected_y.numpy(), rtol=1e-6, atol=1e-6)
    # Both forms cancel in 0.5(1 + tanh) for x << 0: float32 rounding, not a formula change.
    np.testing.assert_allclose(grad.numpy(), expected_grad.numpy(), rtol=1e-5, atol=1e-5)


def test_fused_gelu_keeps_bfloat16():
    x = tf.constant(np.linspace(-4, 4, 101), tf.bfloat16)
    y, grad = _value_and_gradient(gelu_tanh_fused, x, tf.ones_like(x))
    expected_y, expected_grad = _value_and_gradient(gelu_tanh, tf.cast(x, tf.float32),
                                                    tf.ones([101]))
    assert y.dtype == tf.bfloat16 and grad.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(y, tf.float32).numpy(), expected_y.numpy(), atol=0.03)
    np.testing.assert_allclose(tf.cast(grad, tf.float32).numpy(), expected_grad.numpy(),
                               atol=0.03)


def test_training_activation_is_the_fused_form_only_for_tanh_gelu():
    assert get_training_activation("gelu") is gelu_tanh_fused
    for name in ("gelu_exact", "relu", "tanh", "linear", "silu"):
        assert get_training_activation(name) is get_activation(name)
