"""BertDropout: the drop rate, the scaling, the gradient and determinism given the seed."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.dropout import BertDropout, dropout_keep_mask


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_keep_mask_drops_at_the_rate(rate):
    size = 2 ** 22
    keep = dropout_keep_mask(tf.constant([size]), rate, tf.constant([3, 4])).numpy()
    dropped = 1.0 - keep.mean()
    # Binomial standard deviation sqrt(rate(1 - rate) / size) <= 2.5e-4; the threshold's
    # rounding adds at most 7.6e-6.
    assert abs(dropped - rate) < 1e-3


def test_keep_mask_threshold_is_within_7_6e_6_of_the_rate():
    # Every 16-bit value once: the mask keeps exactly those >= round(rate * 2^16).
    for rate in (0.1, 0.15, 1 / 3, 0.5):
        threshold = round(rate * 65536)
        assert abs(threshold / 65536 - rate) <= 2 ** -17


def test_keep_mask_is_deterministic_given_the_seed_and_has_odd_sizes():
    shape = tf.constant([7, 3, 5])  # 105 elements: an odd count of 16-bit pieces
    first = dropout_keep_mask(shape, 0.3, tf.constant([1, 2])).numpy()
    again = dropout_keep_mask(shape, 0.3, tf.constant([1, 2])).numpy()
    other = dropout_keep_mask(shape, 0.3, tf.constant([1, 3])).numpy()
    assert first.shape == (7, 3, 5)
    np.testing.assert_array_equal(first, again)
    assert (first != other).any()


def test_layer_scales_kept_elements_and_passes_the_gradient_through_the_mask():
    keras.utils.set_random_seed(0)
    layer = BertDropout(0.25)
    x = tf.constant(np.random.default_rng(0).uniform(1, 2, (64, 48)), tf.float32)
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())  # inference: identity
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    grad = tape.gradient(y, x, output_gradients=tf.fill(x.shape, 3.0)).numpy()
    kept = y.numpy() != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_allclose(y.numpy()[kept], x.numpy()[kept] / 0.75, rtol=1e-6)
    np.testing.assert_allclose(grad, np.where(kept, 3.0 / 0.75, 0.0), rtol=1e-6)


def test_layer_masks_repeat_given_the_global_seed_and_change_per_call():
    def masks():
        keras.utils.set_random_seed(11)
        layer = BertDropout(0.5)
        x = tf.ones((32, 32))
        return [layer(x, training=True).numpy() != 0 for _ in range(2)]

    first, second = masks()
    first_again, second_again = masks()
    np.testing.assert_array_equal(first, first_again)
    np.testing.assert_array_equal(second, second_again)
    assert (first != second).any()


def test_layer_round_trips_its_config():
    layer = BertDropout(0.2, seed=5, name="drop")
    clone = BertDropout.from_config(layer.get_config())
    assert (clone.rate, clone.seed, clone.name) == (0.2, 5, "drop")
