"""The one place keras_bert touches private TensorFlow names.

TensorFlow has no public API for what the op check of exports and the int8 path need:
- the graphs of a SavedModel without loading it (variables, assets, kernels): ``parse_saved_model``
  (TensorFlow's ``loader_impl.parse_saved_model``, exported only under ``tf.__internal__``);
- whether an op type is registered in this process, by TensorFlow or by a loaded op library:
  ``op_def`` (``op_def_registry.get``; ``tf.raw_ops`` lists only TensorFlow's own public ops);
- which Python modules are op libraries that ``tf.load_op_library`` returned (tensorflow-text
  loads its ops so): ``is_op_library`` (the ``_IS_TENSORFLOW_PLUGIN`` mark it sets on them);
- tracing a SavedModel's functions once: ``tracing_as_saved`` (TensorFlow's ``save_context``,
  which ``tf.saved_model.save`` enters, and which keys ``tf.function``'s trace cache);
- oneDNN's int8 matmul, which int8-quantized models run (``layers/int8.py``, in ``predict`` and
  in int8 exports): ``int8_matmul`` builds a ``_QuantizedMatMul``
  node (registered with a CPU kernel in x86-64 builds, but with no ``tf.raw_ops`` entry or
  generated wrapper, so only ``op_def_library._apply_op_helper`` can add it to a graph).

Everything private is read here and nowhere else: tests/test_tf_internals.py checks each name in
``PRIVATE_NAMES`` against the installed TensorFlow, and that no other keras_bert module imports
``tensorflow.python`` or names one of them, so a TensorFlow upgrade that moves one fails there, by
name, instead of changing which exports pass the op check. A new private name (an op without a
public Python wrapper, say) goes here, into ``PRIVATE_NAMES``, with a test. Written against
TensorFlow 2.21.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import tensorflow as tf
from tensorflow.python.framework import op_def_library, op_def_registry
from tensorflow.python.saved_model import loader_impl, save_context

if TYPE_CHECKING:
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.core.protobuf import saved_model_pb2

# The attribute ``tf.load_op_library`` sets (to True) on every module it returns.
OP_LIBRARY_MARK = "_IS_TENSORFLOW_PLUGIN"
# Every private TensorFlow name read here: "module:attribute", or the op-library mark.
PRIVATE_NAMES = (
    "tensorflow.python.framework.op_def_registry:get",
    "tensorflow.python.saved_model.loader_impl:parse_saved_model",
    "tensorflow.python.framework.op_def_library:_apply_op_helper",
    "tensorflow.python.saved_model.save_context:save_context",
    "tensorflow.python.saved_model.save_context:in_save_context",
    OP_LIBRARY_MARK,
)
# oneDNN's int8 matmul (tensorflow/core/kernels/mkl/mkl_matmul_op_fused.cc), the one op of an
# int8 export that is not in tf.raw_ops.
INT8_MATMUL_OP = "_QuantizedMatMul"


def parse_saved_model(export_dir: str | os.PathLike) -> saved_model_pb2.SavedModel:
    """The ``SavedModel`` proto of ``export_dir`` (its meta graphs, functions and signatures).

    Raises:
        OSError: ``export_dir`` holds no ``saved_model.pb`` (or ``.pbtxt``), or it cannot be parsed.
    """
    return loader_impl.parse_saved_model(export_dir)


@contextlib.contextmanager
def tracing_as_saved():
    """Traces ``tf.function`` s as ``tf.saved_model.save`` (default ``SaveOptions``) traces them.

    ``tf.saved_model.save`` traces under TensorFlow's save context, which is part of a
    ``tf.function``'s trace-cache key: a function traced before it (for its variables, say) is
    traced again inside it. Traced under this context, ``save`` finds the traces in the cache.
    Inside a save already, it does nothing.
    """
    if save_context.in_save_context():
        yield
        return
    with save_context.save_context(tf.saved_model.SaveOptions()):
        yield


def op_def(op_type: str) -> op_def_pb2.OpDef | None:
    """The registered ``OpDef`` of ``op_type`` in this process, or None when no op has that name."""
    return op_def_registry.get(op_type)


def is_op_library(value: object) -> bool:
    """True for a Python module of op wrappers returned by ``tf.load_op_library``."""
    return bool(getattr(value, OP_LIBRARY_MARK, False))


# The activations oneDNN's int8 matmul can apply in its epilogue, by ``int8_matmul``'s name.
INT8_FUSED_ACTIVATIONS = {"gelu_tanh": "GeluApproximate", "gelu_exact": "GeluExact"}


def int8_matmul(inputs: tf.Tensor, kernel: tf.Tensor, kernel_range: tf.Tensor,
                constant_kernel: bool = True, bias: tf.Tensor | None = None,
                activation: str | None = None) -> tf.Tensor:
    """float32 [m, n] = activation((inputs @ kernel) * kernel_range / 127 + bias), on oneDNN's
    int8 matmul.

    Each output is an exact int32 sum of int8 products, scaled by its column's factor in the
    kernel's epilogue (``fused_ops`` BiasAdd + Dequantize, with GeluApproximate or GeluExact
    between them when asked; ``input_quant_mode`` SCALED with the input's range fixed at 127,
    so the input is taken as plain integers), then the bias is added (zeros when None) and the
    activation applied, all in float32.

    Args:
        inputs: qint8 [m, k].
        kernel: qint8 [k, n].
        kernel_range: float32 [n], each column's float range (its max |w|); it is passed as
            both the op's min and max (the op uses max(|min|, |max|)). It may be computed in
            the graph (layers/int8.py derives it from Keras' kernel_scale on every call): with
            six same-shaped layers and varying row counts the results stayed exact, and a
            MiniLM-shaped stack ran about as fast as with ranges held in variables.
        constant_kernel: the node always gets the same kernel (a variable's value, in a
            graph): the op then keeps its reordered copy from the first call
            (``is_weight_const``). False where one node sees different kernels.
        bias: float32 [n] or None.
        activation: None, or a key of ``INT8_FUSED_ACTIVATIONS`` ("gelu_tanh": Google's tanh
            form; "gelu_exact": the erf form), applied to the biased float32 result.

    Only in a graph (a tf.function, a SavedModel); eagerly, wrap the call in a tf.function.
    """
    columns = tf.shape(kernel)[1:]
    fused = ["BiasAdd"]
    if activation is not None:
        if activation not in INT8_FUSED_ACTIVATIONS:
            raise ValueError(f"oneDNN's int8 matmul cannot fuse activation {activation!r}; "
                             f"expected one of {sorted(INT8_FUSED_ACTIVATIONS)}")
        fused.append(INT8_FUSED_ACTIVATIONS[activation])
    fused.append("Dequantize")
    bias = tf.zeros(columns, tf.float32) if bias is None else tf.cast(bias, tf.float32)
    _, _, op, _ = op_def_library._apply_op_helper(
        INT8_MATMUL_OP, name="Int8MatMul",
        device_inputs=[inputs, kernel, bias,
                       tf.constant(-127.0), tf.constant(127.0), kernel_range, kernel_range],
        host_inputs=[], Tdevice_outputs=[tf.float32], Thost_outputs=[],
        T1=tf.qint8, T2=tf.qint8, Tbias=tf.float32, Tout=tf.float32, U=tf.float32,
        fused_ops=fused, input_quant_mode="SCALED",
        output_quant_mode="SCALED", transpose_a=False, transpose_b=False,
        is_weight_const=constant_kernel, is_bias_const=True, leakyrelu_alpha=0.2)
    return op.outputs[0]
