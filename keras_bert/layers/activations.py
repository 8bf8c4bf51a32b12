"""Activation functions by BertConfig name ("gelu" is Google's tanh approximation)."""

from typing import Callable

import keras
from keras import ops


def gelu_tanh(x):
    """GELU, tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), as Google's BERT."""
    return keras.activations.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU, exact erf form: 0.5x(1 + erf(x / sqrt(2))), as Hugging Face's "gelu"."""
    return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS: dict[str, Callable] = {
    "gelu": gelu_tanh,
    "gelu_exact": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": lambda x: x,
    "silu": ops.silu,
}


def get_activation(name: str) -> Callable:
    """The activation for a BertConfig.hidden_act name."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]
