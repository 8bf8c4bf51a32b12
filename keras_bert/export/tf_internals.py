"""The one place keras_bert touches private TensorFlow names.

TensorFlow has no public API for what the op check of exports needs:
- the graphs of a SavedModel without loading it (variables, assets, kernels): ``parse_saved_model``
  (TensorFlow's ``loader_impl.parse_saved_model``, exported only under ``tf.__internal__``);
- whether an op type is registered in this process, by TensorFlow or by a loaded op library:
  ``op_def`` (``op_def_registry.get``; ``tf.raw_ops`` lists only TensorFlow's own public ops);
- which Python modules are op libraries that ``tf.load_op_library`` returned (tensorflow-text
  loads its ops so): ``is_op_library`` (the ``_IS_TENSORFLOW_PLUGIN`` mark it sets on them).

Everything private is read here and nowhere else: tests/test_tf_internals.py checks each name in
``PRIVATE_NAMES`` against the installed TensorFlow, and that no other keras_bert module imports
``tensorflow.python`` or names one of them, so a TensorFlow upgrade that moves one fails there, by
name, instead of changing which exports pass the op check. A new private name (an op without a
public Python wrapper, say) goes here, into ``PRIVATE_NAMES``, with a test. Written against
TensorFlow 2.21.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tensorflow.python.framework import op_def_registry
from tensorflow.python.saved_model import loader_impl

if TYPE_CHECKING:
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.core.protobuf import saved_model_pb2

# The attribute ``tf.load_op_library`` sets (to True) on every module it returns.
OP_LIBRARY_MARK = "_IS_TENSORFLOW_PLUGIN"
# Every private TensorFlow name read here: "module:attribute", or the op-library mark.
PRIVATE_NAMES = (
    "tensorflow.python.framework.op_def_registry:get",
    "tensorflow.python.saved_model.loader_impl:parse_saved_model",
    OP_LIBRARY_MARK,
)


def parse_saved_model(export_dir: str | os.PathLike) -> saved_model_pb2.SavedModel:
    """The ``SavedModel`` proto of ``export_dir`` (its meta graphs, functions and signatures).

    Raises:
        OSError: ``export_dir`` holds no ``saved_model.pb`` (or ``.pbtxt``), or it cannot be parsed.
    """
    return loader_impl.parse_saved_model(export_dir)


def op_def(op_type: str) -> op_def_pb2.OpDef | None:
    """The registered ``OpDef`` of ``op_type`` in this process, or None when no op has that name."""
    return op_def_registry.get(op_type)


def is_op_library(value: object) -> bool:
    """True for a Python module of op wrappers returned by ``tf.load_op_library``."""
    return bool(getattr(value, OP_LIBRARY_MARK, False))
