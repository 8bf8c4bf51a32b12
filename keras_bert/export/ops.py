"""Which ops a SavedModel uses, and the check that TF Serving can run them all: core TensorFlow ops
and tensorflow-text's (linked into tensorflow_model_server), and no Python callbacks."""

from __future__ import annotations

import functools
import sys

import tensorflow as tf

from keras_bert import tf_internals

# Core ops that call back into Python: they cannot run outside the exporting process.
PYTHON_CALLBACK_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
# The one exception, for int8 exports only (export/int8.py): oneDNN's int8 matmul. TensorFlow's
# x86-64 CPU builds, TF Serving's among them, register its kernel, but it has no tf.raw_ops
# entry; export_model checks that the exporting TensorFlow runs it before writing anything.
ONEDNN_INT8_OPS = frozenset({tf_internals.INT8_MATMUL_OP})


def saved_model_op_types(export_dir: str) -> set[str]:
    """The op types in every graph and function of the SavedModel at ``export_dir``."""
    saved_model = tf_internals.parse_saved_model(export_dir)
    ops = set()
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        ops.update(node.op for node in graph.node)
        for function in graph.library.function:
            ops.update(node.op for node in function.node_def)
    return ops


@functools.lru_cache(maxsize=1)
def tensorflow_text_ops() -> frozenset[str]:
    """The op names tensorflow-text registers (read from its loaded op libraries)."""
    import tensorflow_text  # noqa: F401  (registers the ops)
    libraries = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("tensorflow_text") and module is not None:
            for value in vars(module).values():
                if tf_internals.is_op_library(value):
                    libraries[id(value)] = value
    return frozenset(attr for library in libraries.values() for attr in dir(library)
                     if attr[:1].isupper() and not is_core_op(attr)
                     and tf_internals.op_def(attr) is not None)


def is_core_op(op_type: str) -> bool:
    """True for an op built into TensorFlow itself (``tf.raw_ops``)."""
    return hasattr(tf.raw_ops, op_type)


def disallowed_ops(op_types: set[str], int8: bool = False) -> list[str]:
    """The op types TF Serving with tensorflow-text cannot run, sorted (``int8``: besides
    ``ONEDNN_INT8_OPS``)."""
    text_ops = tensorflow_text_ops()
    allowed = ONEDNN_INT8_OPS if int8 else frozenset()
    return sorted(op for op in op_types if op in PYTHON_CALLBACK_OPS
                  or not (is_core_op(op) or op in text_ops or op in allowed))


def check_ops(export_dir: str, int8: bool = False) -> set[str]:
    """Returns the SavedModel's op types; raises ValueError naming any TF Serving cannot run.
    ``int8``: the SavedModel is an int8 export, which may use ``ONEDNN_INT8_OPS`` too."""
    op_types = saved_model_op_types(export_dir)
    bad = disallowed_ops(op_types, int8)
    if bad:
        raise ValueError(
            f"SavedModel {export_dir!r} uses ops that are neither core TensorFlow nor "
            f"tensorflow-text, so TF Serving cannot run it: {', '.join(bad)}. Keep py_function "
            "and custom-op libraries out of the exported functions.")
    return op_types
