"""BertLayerNormalization trains with the same values and gradients as Keras' LayerNormalization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.layers.layer_normalization import BertLayerNormalization
from keras_bert.layers.openvino_form import openvino_form


def _layers(dtype=None):
    rng = np.random.default_rng(0)
    ours = BertLayerNormalization(epsilon=1e-12, dtype=dtype)
    reference = keras.layers.LayerNormalization(epsilon=1e-12, dtype=dtype)
    for layer in (ours, reference):
        layer.build((None, 32))
    gamma, beta = rng.normal(1, 0.5, 32), rng.normal(0, 0.5, 32)
    for layer in (ours, reference):
        layer.gamma.assign(gamma.astype(np.float32))
        layer.beta.assign(beta.astype(np.float32))
    return ours, reference


def _value_and_gradients(layer, x, upstream, training):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=training) if training else layer(x)
    return [y] + tape.gradient(y, [x, layer.gamma, layer.beta], output_gradients=upstream)


@pytest.mark.parametrize("in_graph", [False, True])
def test_training_values_and_gradients_equal_keras_layer_normalization(in_graph):
    ours, reference = _layers()
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(3, 4, (2, 50, 32)), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 50, 32)), tf.float32)
    run = tf.function(_value_and_gradients) if in_graph else _value_and_gradients
    got = run(ours, x, upstream, True)
    expected = _value_and_gradients(reference, x, upstream, False)
    for name, a, b in zip(("y", "x grad", "gamma grad", "beta grad"), got, expected):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), b.numpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=name)


@pytest.mark.parametrize("shape", [(6, 32), (2, 7, 32), (0, 32), (0, 3, 32)])
def test_inference_equals_keras_layer_normalization(shape):
    ours, reference = _layers()
    x = tf.constant(np.random.default_rng(2).normal(3, 4, size=shape), tf.float32)
    for got in (ours(x), tf.function(lambda x: ours(x, training=False))(x)):
        assert got.shape == shape
        np.testing.assert_allclose(got.numpy(), reference(x).numpy(), rtol=1e-6, atol=2e-6)
    with openvino_form():  # OpenVINO's MVN pattern (tests/export/test_openvino checks the IR)
        traced = tf.function(lambda x: ours(x, training=False))
        ops = {op.type for op in traced.get_concrete_function(x).graph.get_operations()}
        assert "Sqrt" in ops and "FusedBatchNormV3" not in ops
        np.testing.assert_allclose(traced(x).numpy(), reference(x).numpy(), rtol=1e-6,
                                   atol=2e-6)


def _session_op_types(output, feed, session) -> set[str]:
    metadata = tf.compat.v1.RunMetadata()
    session.run(output, feed, options=tf.compat.v1.RunOptions(trace_level=3),
                run_metadata=metadata)
    return {node.timeline_label.split("(")[0].split("=")[-1].strip()
            for device in metadata.step_stats.dev_stats for node in device.node_stats
            if node.timeline_label}


def test_a_saved_model_in_a_session_runs_one_onednn_kernel_per_layer_norm(tmp_path):
    # As TF Serving runs an export: the SavedModel's graph in a Session, optimized by grappler.
    from keras_bert import tf_internals
    if tf_internals.op_def("_MklLayerNorm") is None:
        pytest.skip("this TensorFlow has no oneDNN LayerNorm kernel")
    ours, reference = _layers()
    module = tf.Module()
    module.f = tf.function(lambda x: {"y": ours(x, training=False)},
                           input_signature=[tf.TensorSpec([None, None, 32], tf.float32, "x")])
    module.saved_variables = list(module.f.get_concrete_function().variables)
    tf.saved_model.save(module, str(tmp_path / "ln"), signatures=module.f)
    x = np.random.default_rng(4).normal(size=(3, 5, 32)).astype(np.float32)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(tmp_path / "ln"))
        signature = meta.signature_def["serving_default"]
        output = signature.outputs["y"].name
        feed = {signature.inputs["x"].name: x}
        ops = _session_op_types(output, feed, session)
        got = session.run(output, feed)
    assert "_MklLayerNorm" in ops and "SquaredDifference" not in ops, ops
    np.testing.assert_allclose(got, reference(x).numpy(), rtol=1e-6, atol=2e-6)


def test_mixed_bfloat16_inference_runs_keras_layer_normalization():
    ours, reference = _layers("mixed_bfloat16")
    x = tf.constant(np.random.default_rng(5).normal(size=(4, 32)), tf.float32)
    np.testing.assert_array_equal(ours(x).numpy(), reference(x).numpy())


def test_mixed_bfloat16_computes_in_float32_and_returns_bfloat16():
    ours, reference = _layers("mixed_bfloat16")
    x = tf.constant(np.random.default_rng(3).normal(size=(4, 32)), tf.float32)
    got = _value_and_gradients(ours, x, tf.ones((4, 32)), True)
    expected = _value_and_gradients(reference, x, tf.ones((4, 32)), False)
    assert got[0].dtype == tf.bfloat16
    np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
    for a, b in zip(got[1:], expected[1:]):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), b.numpy(), atol=1e-2)


def test_only_the_default_layer_normalization_is_accepted():
    with pytest.raises(ValueError, match="last axis"):
        BertLayerNormalization(axis=1)
    config = BertLayerNormalization(epsilon=1e-12, name="ln").get_config()
    assert BertLayerNormalization.from_config(config).epsilon == 1e-12
