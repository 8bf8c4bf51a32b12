"""Which ops a SavedModel uses, and the check that TF Serving can run them all: core TensorFlow ops
and tensorflow-text's (linked into tensorflow_model_server), and no Python callbacks."""

from __future__ import annotations

import functools
import sys

import tensorflow as tf

from keras_bert.export import tf_internals

# Core ops that call back into Python: they cannot run outside the exporting process.
PYTHON_CALLBACK_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


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


def disallowed_ops(op_types: set[str]) -> list[str]:
    """The op types TF Serving with tensorflow-text cannot run, sorted."""
    text_ops = tensorflow_text_ops()
    return sorted(op for op in op_types if op in PYTHON_CALLBACK_OPS
                  or not (is_core_op(op) or op in text_ops))


def check_ops(export_dir: str) -> set[str]:
    """Returns the SavedModel's op types; raises ValueError naming any TF Serving cannot run."""
    op_types = saved_model_op_types(export_dir)
    bad = disallowed_ops(op_types)
    if bad:
        raise ValueError(
            f"SavedModel {export_dir!r} uses ops that are neither core TensorFlow nor "
            f"tensorflow-text, so TF Serving cannot run it: {', '.join(bad)}. Keep py_function "
            "and custom-op libraries out of the exported functions.")
    return op_types
