"""Rank checks where a layer or model receives tensors from its caller, as google-research/bert's
``get_shape_list(expected_rank=)``: a wrong rank fails at once, naming the input and the axes
expected, instead of deep inside a reshape or a matmul.

The checks read static shapes only (Python, no graph ops): under ``tf.function`` they run once,
when the function is traced, and cost nothing per step. Axes of unknown size (``None``) and
tensors of unknown rank pass. Layers check in ``call`` (and in ``compute_output_shape`` where
Keras uses it instead of ``call`` for symbolic inputs); functional models check in ``__call__``,
before Keras' own input handling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# The axes at BERT's tensor boundaries.
TOKEN_IDS = ("batch", "seq_length")
SEQUENCE = ("batch", "seq_length", "hidden_size")
POOLED = ("batch", "hidden_size")
MASK_BIAS = ("batch", "1", "1", "seq_length")


def check_rank(owner: str, input_name: str, value: Any, axes: Sequence[str], *,
               allow_last_axis_squeeze: bool = False) -> None:
    """Raises ValueError unless ``value`` has rank ``len(axes)``.

    Args:
        owner: the layer or model that receives the input, e.g. "BertEncoder".
        input_name: the input as its caller knows it, e.g. "input_word_ids".
        value: the input (a tensor, KerasTensor, NumPy array or nested list) or its static
            shape (a tuple or ``tf.TensorShape``, as ``build`` and ``compute_output_shape``
            receive it). An unknown rank passes.
        axes: the names of the expected axes, e.g. ``("batch", "seq_length")``.
        allow_last_axis_squeeze: also accept one extra last axis of size 1, which Keras
            squeezes from a functional model's inputs.

    Example:
    >>> import numpy as np
    >>> check_rank("BertEncoder", "input_word_ids", np.zeros((2, 4)), TOKEN_IDS)
    >>> check_rank("BertEncoder", "input_word_ids", np.zeros((2, 4, 8)), TOKEN_IDS)
    Traceback (most recent call last):
      ...
    ValueError: BertEncoder input 'input_word_ids' must have rank 2 [batch, seq_length], got...
    """
    if hasattr(value, "shape"):
        shape = value.shape
    elif isinstance(value, list):
        try:
            shape = np.shape(value)
        except ValueError:  # a ragged list: let the layer's own conversion report it
            return
    else:
        shape = value
    if shape is None or getattr(shape, "rank", 0) is None:
        return
    shape = tuple(shape)
    if len(shape) == len(axes) or (allow_last_axis_squeeze and len(shape) == len(axes) + 1
                                   and shape[-1] == 1):
        return
    raise ValueError(f"{owner} input {input_name!r} must have rank {len(axes)} "
                     f"[{', '.join(axes)}], got rank {len(shape)} with shape {shape}")


def check_input_ranks(owner: str, inputs: Any, axes: Mapping[str, Sequence[str]]) -> None:
    """``check_rank`` for each named input of a dict (a functional model's inputs) that is
    present; Keras' squeeze of a last axis of size 1 is allowed, as Keras does it."""
    if not isinstance(inputs, Mapping):
        return
    for name, expected in axes.items():
        if inputs.get(name) is not None:
            check_rank(owner, name, inputs[name], expected, allow_last_axis_squeeze=True)
