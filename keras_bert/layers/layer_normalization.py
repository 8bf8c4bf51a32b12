"""LayerNorm over the last axis: in training, forward and backward are each one XLA computation;
at inference, one oneDNN kernel where TensorFlow has it."""

import keras
import tensorflow as tf

from keras_bert.layers import openvino_form


def _normalize(x, epsilon):
    """float32 [..., H] -> (x - mean) / sqrt(variance + epsilon), and 1 / sqrt(variance + eps)."""
    mean = tf.reduce_mean(x, -1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), -1, keepdims=True)
    inverse = tf.math.rsqrt(variance + epsilon)
    return (x - mean) * inverse, inverse


@tf.function(jit_compile=True)
def _forward(x, gamma, beta, epsilon):
    normalized, _ = _normalize(tf.cast(x, tf.float32), epsilon)
    return tf.cast(normalized * gamma + beta, x.dtype)


@tf.function(jit_compile=True)
def _backward(x, gamma, upstream, epsilon):
    # Recomputes the statistics from x rather than keeping them from the forward pass.
    normalized, inverse = _normalize(tf.cast(x, tf.float32), epsilon)
    upstream = tf.cast(upstream, tf.float32)
    reduce_axes = tf.range(tf.rank(x) - 1)
    gamma_grad = tf.reduce_sum(upstream * normalized, reduce_axes)
    beta_grad = tf.reduce_sum(upstream, reduce_axes)
    scaled = upstream * gamma
    x_grad = inverse * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                        - normalized * tf.reduce_mean(scaled * normalized, -1, keepdims=True))
    return tf.cast(x_grad, x.dtype), gamma_grad, beta_grad


@tf.autograph.experimental.do_not_convert
def layer_norm_fused(x, gamma, beta, epsilon: float):
    """LayerNorm of float [..., H] with float32 gamma, beta [H], computed in float32.

    Keras' ``ops.layer_normalization`` formula (the same numbers to float32 rounding) in two
    XLA computations, forward and backward, instead of about 6 and 14 TensorFlow kernels.
    """
    epsilon = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def normalize(x, gamma, beta):
        def gradient(upstream):
            return _backward(x, gamma, upstream, epsilon)
        return _forward(x, gamma, beta, epsilon), gradient

    # Tensors, not variables: the gradient flows on through the variables' reads.
    return normalize(x, tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta))


def layer_norm_inference(x, gamma, beta, epsilon: float):
    """LayerNorm of float32 [..., H] at inference, in the graph pattern that TensorFlow's graph
    optimizer (grappler's remapper, in x86-64 builds with oneDNN: TF Serving's, and
    ``tf.function``'s) replaces with one ``_MklLayerNorm`` kernel.

    The pattern is tf.keras' fused LayerNorm: the rows as the channels of a [1, rows, H, 1]
    NCHW batch normalized over H by ``FusedBatchNormV3`` (unit scale, no offset), then gamma and
    beta. Every op is a core op, so a graph without the rewrite (another build, a GPU) computes
    the same normalization with them; Keras' formula (mean, squared difference, rsqrt, five
    elementwise passes) gives the same numbers to float32 rounding.
    """
    shape = tf.shape(x)
    rows = tf.reduce_prod(shape[:-1])
    hidden = x.shape[-1] if x.shape[-1] is not None else shape[-1]
    unit, none = tf.ones([rows], tf.float32), tf.zeros([rows], tf.float32)
    normalized, _, _ = tf.compat.v1.nn.fused_batch_norm(
        tf.reshape(x, [1, rows, hidden, 1]), scale=unit, offset=none, epsilon=epsilon,
        data_format="NCHW")
    return tf.reshape(normalized, shape) * gamma + beta


def layer_norm_mvn(x, gamma, beta, epsilon: float):
    """LayerNorm of float32 [..., H] in the pattern OpenVINO's converter fuses into one MVN (its
    LayerNorm kernel) and a scale-shift: ``(x - mean) / sqrt(mean((x - mean) * (x - mean)) +
    epsilon) * gamma + beta``, the axes a 1-D list. Keras' formula (a squared difference, rsqrt
    with the scale folded in) and a scalar axis are left as reductions and elementwise kernels
    (benchmarks/README.md). Traced within ``openvino_form.openvino_form()``."""
    mean = tf.reduce_mean(x, [-1], keepdims=True)
    centered = x - mean
    variance = tf.reduce_mean(centered * centered, [-1], keepdims=True)
    return centered / tf.sqrt(variance + epsilon) * gamma + beta


@keras.saving.register_keras_serializable(package="keras_bert")
class BertLayerNormalization(keras.layers.LayerNormalization):
    """``keras.layers.LayerNormalization`` over the last axis, using ``layer_norm_fused`` in
    training and, for float32, ``layer_norm_inference`` at inference.

    Same weights (gamma, beta) and config as Keras' layer; other dtypes run Keras' own ops at
    inference.
    """

    def __init__(self, epsilon=1e-3, **kwargs):
        super().__init__(epsilon=epsilon, **kwargs)
        if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
            raise ValueError("BertLayerNormalization normalizes the last axis with gamma and "
                             "beta; use keras.layers.LayerNormalization for other settings")

    def call(self, inputs, training=None):
        if not training:
            if inputs.dtype != tf.float32 or self.compute_dtype != "float32":
                return super().call(inputs)
            if openvino_form.active():
                return layer_norm_mvn(inputs, tf.cast(self.gamma, tf.float32),
                                      tf.cast(self.beta, tf.float32), self.epsilon)
            return layer_norm_inference(inputs, tf.cast(self.gamma, tf.float32),
                                        tf.cast(self.beta, tf.float32), self.epsilon)
        outputs = layer_norm_fused(inputs, self.gamma, self.beta, self.epsilon)
        return tf.cast(outputs, self.compute_dtype)
