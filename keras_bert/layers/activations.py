"""Activation functions by BertConfig name ("gelu" is Google's tanh approximation)."""

from typing import Callable

import keras
import tensorflow as tf
from keras import ops

# Constants of the tanh approximation: sqrt(2 / pi) and the cubic coefficient.
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_CUBIC = 0.044715


def gelu_tanh(x):
    """GELU, tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), as Google's BERT."""
    return keras.activations.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU, exact erf form: 0.5x(1 + erf(x / sqrt(2))), as Hugging Face's "gelu"."""
    return keras.activations.gelu(x, approximate=False)


# Both compute in float32 (XLA's CPU code for bfloat16 arithmetic is slow) and round once.
def _gelu_tanh_forward(x):
    value = tf.cast(x, tf.float32)
    value_squared = value * value
    tanh = tf.tanh(value * (_SQRT_2_OVER_PI + _SQRT_2_OVER_PI * _GELU_CUBIC * value_squared))
    return tf.cast(0.5 * value * (1.0 + tanh), x.dtype)


def _gelu_tanh_backward(x, upstream):
    # d/dx 0.5x(1 + t) = 0.5(1 + t) + 0.5x(1 - t^2) sqrt(2/pi)(1 + 3 * 0.044715x^2).
    value = tf.cast(x, tf.float32)
    value_squared = value * value
    tanh = tf.tanh(value * (_SQRT_2_OVER_PI + _SQRT_2_OVER_PI * _GELU_CUBIC * value_squared))
    slope = (0.5 * (1.0 + tanh) + 0.5 * value * (1.0 - tanh * tanh)
             * (_SQRT_2_OVER_PI + 3.0 * _SQRT_2_OVER_PI * _GELU_CUBIC * value_squared))
    return tf.cast(tf.cast(upstream, tf.float32) * slope, x.dtype)


# One pass over memory each way instead of TensorFlow's 8 forward and 8 backward element-wise
# kernels (the backward recomputes tanh rather than keeping it), in float32 and bfloat16
# (benchmarks/README.md, "Figures from the code's comments").
_gelu_tanh_forward_xla = tf.function(_gelu_tanh_forward, jit_compile=True)
_gelu_tanh_backward_xla = tf.function(_gelu_tanh_backward, jit_compile=True)


@tf.autograph.experimental.do_not_convert
@tf.custom_gradient
def gelu_tanh_fused(x):
    """``gelu_tanh`` with its forward and its gradient each one XLA computation, for training.

    Same formula as ``gelu_tanh``, computed in float32 (float32 results equal to ~1 ulp;
    bfloat16 results rounded once instead of after every op). At inference keep ``gelu_tanh``:
    oneDNN fuses it into the preceding MatMul + BiasAdd, which it cannot do while training
    (the backward pass needs the pre-activation).
    """
    return _gelu_tanh_forward_xla(x), lambda upstream: _gelu_tanh_backward_xla(x, upstream)


_ACTIVATIONS: dict[str, Callable] = {
    "gelu": gelu_tanh,
    "gelu_exact": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": lambda x: x,
    "silu": ops.silu,
}

# Faster forms for training, where they exist; same numbers.
_TRAINING_ACTIVATIONS: dict[str, Callable] = {"gelu": gelu_tanh_fused}


def get_activation(name: str) -> Callable:
    """The activation for a BertConfig.hidden_act name."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


def get_training_activation(name: str) -> Callable:
    """``get_activation(name)``, or an equal form that trains faster (see ``gelu_tanh_fused``)."""
    return _TRAINING_ACTIVATIONS.get(name) or get_activation(name)
