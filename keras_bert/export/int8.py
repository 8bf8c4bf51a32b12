"""int8 exports: a model quantized with Keras' ``quantize("int8")``, traced on oneDNN's int8 matmul.

An int8 export is the model after ``model.quantize("int8")``: ``BertEncoder.int8_layers()`` (in
every transformer block the query, key, value, attention-output, intermediate and output Dense
layers, and the word embeddings) hold Keras' int8 weights with a scale per output column (per
row for the embeddings), and the Dense layers run as ``keras_bert.layers.int8`` computes them:
each call quantizes each input row with its own scale, oneDNN's ``_QuantizedMatMul`` sums the
int8 products exactly in int32 and scales the columns, then the rows are scaled back.
Everything else (position and segment embeddings, attention scores, softmax, LayerNorm, GELU,
the pooler and the task heads) stays float32. ``export_model(quantize="int8")`` quantizes a
copy (``quantized_copy``); a model the caller quantized exports as int8 as it is. The matmul
is TensorFlow's x86-64 CPU builds'; ``check_int8_kernel`` says whether this one runs it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_bert import tf_internals
from keras_bert.layers import int8 as int8_layers


def quantized_copy(model):
    """A copy of ``model`` (a float32 BertEncoder or task model, same weights) after
    ``quantize("int8")``; ``model`` itself is unchanged."""
    if getattr(model, "dtype_policy", None) is not None and model.dtype_policy.name != "float32":
        raise ValueError(f"int8 exports start from a float32 model; this one computes in "
                         f"{model.dtype_policy.name}")
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    copy.quantize("int8")
    return copy


class Int8KernelMissing(RuntimeError):
    """This TensorFlow cannot run oneDNN's int8 matmul, so it cannot run int8 exports."""


def check_int8_kernel() -> None:
    """Raises Int8KernelMissing unless this TensorFlow runs ``_QuantizedMatMul`` correctly.

    Runs one small int8 matmul and compares it with the exact integer product, so it catches
    a build without the kernel (one built without oneDNN) as well as one whose kernel
    computes something else.
    """
    rng = np.random.default_rng(0)
    a = rng.integers(-127, 128, (3, 64)).astype(np.int8)
    a[:, 0] = 127  # every row's scale is 1: its values are quantized as they are
    b = rng.integers(-127, 128, (64, 5)).astype(np.int8)
    try:
        got = int8_layers.int8_matmul_rows(a.astype(np.float32), b,
                                           np.ones([5], np.float32)).numpy()
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
            tf.errors.UnimplementedError, ValueError, TypeError) as e:
        raise Int8KernelMissing(
            f"this TensorFlow ({tf.__version__}) cannot run oneDNN's int8 matmul "
            f"({tf_internals.INT8_MATMUL_OP}), which int8 exports use: "
            f"{type(e).__name__}: {str(e).splitlines()[0]}. Export with an x86-64 Linux "
            "TensorFlow CPU build (the PyPI wheel has it), or export without int8.") from e
    expected = a.astype(np.int32) @ b.astype(np.int32)
    if not np.array_equal(got, expected.astype(np.float32)):
        raise Int8KernelMissing(
            f"this TensorFlow's {tf_internals.INT8_MATMUL_OP} gave wrong results on a test "
            f"matmul (largest error {np.abs(got - expected).max()}); int8 exports are "
            "unsafe with it. Export without int8.")
