"""keras_bert/tf_internals.py against the installed TensorFlow.

Each private name the adapter reads must exist and mean what the adapter says; if a TensorFlow
upgrade moves one, these tests fail naming it (instead of the op check of exports silently letting
through, or refusing, ops that TF Serving can run). The adapter must also stay the only module
that reads them.
"""

import ast
import importlib
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import tf_internals
from keras_bert.export.ops import check_ops, is_core_op, saved_model_op_types, tensorflow_text_ops

PACKAGE = pathlib.Path(tf_internals.__file__).resolve().parent
ADAPTER = pathlib.Path(tf_internals.__file__).resolve()
# The tensorflow-text ops in the graph of a raw-text export (the preprocessor's).
EXPORTED_TEXT_OPS = {"FastWordpieceTokenizeWithOffsets", "FastBertNormalize", "CaseFoldUTF8",
                     "NormalizeUTF8", "RegexSplitWithOffsets"}


@pytest.mark.parametrize("name", [n for n in tf_internals.PRIVATE_NAMES if ":" in n])
def test_every_private_function_exists_in_installed_tensorflow(name):
    module, attribute = name.split(":")
    assert callable(getattr(importlib.import_module(module), attribute, None)), (
        f"{name} is gone (TensorFlow {tf.__version__}); update keras_bert/tf_internals.py")


def test_load_op_library_marks_its_modules():
    import tensorflow_text  # noqa: F401  (loads its op libraries)
    library = next(path for path in
                   (pathlib.Path(tensorflow_text.__file__).parent / "python" / "ops").glob("*.so")
                   if "fast_wordpiece" in path.name)
    module = tf.load_op_library(str(library))  # the public loader; already loaded, so cached
    assert tf_internals.is_op_library(module), (
        f"tf.load_op_library no longer sets {tf_internals.OP_LIBRARY_MARK} "
        f"(TensorFlow {tf.__version__}); update keras_bert/tf_internals.py")
    assert not tf_internals.is_op_library(tf) and not tf_internals.is_op_library(tf.raw_ops)
    assert not tf_internals.is_op_library(tensorflow_text)


def test_op_def_finds_core_and_library_ops_only():
    import tensorflow_text  # noqa: F401  (registers its ops)
    matmul = tf_internals.op_def("MatMul")
    assert matmul.name == "MatMul" and [a.name for a in matmul.input_arg] == ["a", "b"]
    assert tf_internals.op_def("FastWordpieceTokenizeWithOffsets").name == (
        "FastWordpieceTokenizeWithOffsets")
    # An op TensorFlow registers without a tf.raw_ops wrapper (oneDNN's int8 matmul) is found too.
    assert tf_internals.op_def("_QuantizedMatMul") is not None
    assert not hasattr(tf.raw_ops, "_QuantizedMatMul")
    assert tf_internals.op_def("NoSuchOpAnywhere") is None


def test_parse_saved_model_reads_graphs_and_signatures(tmp_path):
    module = tf.Module()
    module.f = tf.function(lambda x: tf.nn.softmax(tf.matmul(x, x)),
                           input_signature=[tf.TensorSpec([2, 2], tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures=module.f)
    saved_model = tf_internals.parse_saved_model(tmp_path / "m")  # os.PathLike works too
    (meta_graph,) = saved_model.meta_graphs
    assert set(meta_graph.meta_info_def.tags) == {"serve"}
    assert list(meta_graph.signature_def["serving_default"].inputs) == ["x"]
    function_ops = {node.op for f in meta_graph.graph_def.library.function for node in f.node_def}
    assert {"MatMul", "Softmax"} <= function_ops
    assert {"MatMul", "Softmax"} <= saved_model_op_types(str(tmp_path / "m"))
    with pytest.raises(OSError, match="SavedModel file does not exist"):
        tf_internals.parse_saved_model(tmp_path / "missing")


def _traced_module():
    module = tf.Module()
    module.f = tf.function(lambda x: {"y": tf.nn.softmax(x)},
                           input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    return module


def test_functions_traced_as_saved_are_not_traced_again_by_save(tmp_path):
    before = _traced_module()
    before.f.get_concrete_function()
    tf.saved_model.save(before, str(tmp_path / "before"), signatures=before.f)
    assert before.f.experimental_get_tracing_count() == 2  # save's context missed the cache

    module = _traced_module()
    with tf_internals.tracing_as_saved():
        module.f.get_concrete_function()
        with tf_internals.tracing_as_saved():  # nested: does nothing
            module.f.get_concrete_function()
    tf.saved_model.save(module, str(tmp_path / "once"), signatures=module.f)
    assert module.f.experimental_get_tracing_count() == 1
    loaded = tf.saved_model.load(str(tmp_path / "once"))
    np.testing.assert_allclose(loaded.signatures["serving_default"](x=tf.zeros([1, 2]))["y"],
                               [[0.5, 0.5]])


def test_an_export_traces_each_signature_once(tmp_path, monkeypatch):
    from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
    from keras_bert.export import saved_model

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]) + "\n")
    preprocessor = BertPreprocessor(str(vocab), seq_length=8)
    encoder = BertEncoder(vocab_size=7, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=8)
    traced = {}
    real_save = saved_model._save

    def save(module, functions, path, quantized=False):
        real_save(module, functions, path, quantized)
        traced.update({name: f.experimental_get_tracing_count() for name, f in functions.items()})
    monkeypatch.setattr(saved_model, "_save", save)
    for model in (BertClassifier(encoder, num_classes=2, preprocessor=preprocessor), encoder):
        traced.clear()
        saved_model.write_saved_model(model, str(tmp_path / type(model).__name__),
                                      preprocessor=preprocessor)
        assert traced and set(traced.values()) == {1}, traced


def test_the_op_check_sorts_ops_as_before():
    text_ops = tensorflow_text_ops()
    assert EXPORTED_TEXT_OPS <= text_ops
    assert all(tf_internals.op_def(op) is not None and not is_core_op(op) for op in text_ops)
    # Wrapper-module names that are no ops (typing helpers, type variables) stay out.
    assert not {name for name in text_ops if name.startswith("TV_") or name in {"Annotated", "Any"}}
    assert is_core_op("BatchMatMulV2") and not is_core_op("FastWordpieceTokenizeWithOffsets")
    # A registered TensorFlow op without a tf.raw_ops wrapper is still refused by the check.
    assert not is_core_op("_QuantizedMatMul") and "_QuantizedMatMul" not in text_ops


def test_int8_matmul_is_the_exact_integer_product_scaled_per_column():
    rng = np.random.default_rng(0)
    a = rng.integers(-127, 128, (37, 96)).astype(np.int8)
    # 7-bit weights, as quantize("int8") makes them: exact on CPUs without VNNI too, where
    # oneDNN adds pairs of 8-bit products in saturating int16 (layers/int8.INT8_WEIGHT_RANGE)
    b = rng.integers(-63, 64, (96, 20)).astype(np.int8)
    column_range = rng.uniform(0.01, 3.0, 20).astype(np.float32)

    @tf.function(autograph=False)
    def matmul(a, b, column_range):
        return tf_internals.int8_matmul(tf.bitcast(a, tf.qint8), tf.bitcast(b, tf.qint8),
                                        column_range)

    got = matmul(a, b, column_range).numpy()
    exact = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float64)
    np.testing.assert_allclose(got, exact * column_range / 127, rtol=1e-6)
    (node,) = [op for op in matmul.get_concrete_function(a, b, column_range).graph
               .get_operations() if op.type == tf_internals.INT8_MATMUL_OP]
    assert [s.decode() for s in node.get_attr("fused_ops")] == ["BiasAdd", "Dequantize"]
    assert node.get_attr("is_weight_const") and node.get_attr("T1") == tf.qint8


def test_the_op_check_accepts_the_int8_matmul_only_in_int8_exports(tmp_path):
    from keras_bert.export.ops import ONEDNN_INT8_OPS
    module = tf.Module()
    kernel = tf.Variable(np.ones([4, 3], np.int8))
    module.f = tf.function(
        lambda x: tf_internals.int8_matmul(tf.bitcast(x, tf.qint8), tf.bitcast(kernel, tf.qint8),
                                           tf.ones([3])),
        input_signature=[tf.TensorSpec([None, 4], tf.int8)], autograph=False)
    module.kernel = kernel
    tf.saved_model.save(module, str(tmp_path / "m"))
    assert ONEDNN_INT8_OPS == {"_QuantizedMatMul"}
    with pytest.raises(ValueError, match="_QuantizedMatMul"):
        check_ops(str(tmp_path / "m"))
    assert "_QuantizedMatMul" in check_ops(str(tmp_path / "m"), int8=True)
    module.g = tf.function(lambda x: tf.py_function(lambda v: v, [x], tf.float32),
                           input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "both"))
    with pytest.raises(ValueError, match="EagerPyFunc") as error:  # the exception is that op only
        check_ops(str(tmp_path / "both"), int8=True)
    assert "_QuantizedMatMul" not in str(error.value)


def test_check_ops_accepts_a_tensorflow_text_graph(tmp_path):
    import tensorflow_text as tf_text
    module = tf.Module()
    module.f = tf.function(lambda text: tf_text.normalize_utf8(text, "NFD"),
                           input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "m"))
    assert "NormalizeUTF8" in check_ops(str(tmp_path / "m"))


def _private_reads(path: pathlib.Path) -> list[str]:
    """'line: what' for each private TensorFlow name the file reads."""
    source = path.read_text()
    names = [name.split(":")[0].rpartition(".")[2] for name in tf_internals.PRIVATE_NAMES]
    found = []
    for node in ast.walk(ast.parse(source)):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            modules = [node.module or ""]
        found += [f"{node.lineno}: imports {m}" for m in modules
                  if m == "tensorflow.python" or m.startswith("tensorflow.python.")]
    for number, line in enumerate(source.splitlines(), 1):
        found += [f"{number}: names {name}" for name in names + ["__internal__", "tf.python"]
                  if name in line]
    return found


def test_no_other_module_reads_a_private_tensorflow_name():
    reads = {str(path.relative_to(PACKAGE.parent)): _private_reads(path)
             for path in sorted(PACKAGE.rglob("*.py")) if path.resolve() != ADAPTER}
    reads = {path: found for path, found in reads.items() if found}
    assert not reads, f"private TensorFlow names outside tf_internals.py: {reads}"
    assert _private_reads(ADAPTER), "the scan finds nothing even in the adapter"
