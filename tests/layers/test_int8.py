"""keras_bert/layers/int8.py: Keras' int8 Dense maths on oneDNN's int8 matmul, against integer
arithmetic, Keras' own int8 call and float32."""

import keras
import pytest
import numpy as np
import tensorflow as tf

from keras_bert.layers import activations, int8


def test_quantize_rows_gives_each_row_its_own_scale():
    x = np.random.default_rng(1).standard_normal((5, 40)).astype(np.float32)
    x[1] *= 1000.0
    x[3] = 0.0
    quantized, scales = int8.quantize_rows(tf.constant(x))
    values = tf.bitcast(quantized, tf.int8).numpy()
    np.testing.assert_allclose(scales.numpy()[:, 0][[0, 1]], np.abs(x[[0, 1]]).max(1) / 127)
    assert np.abs(values).max(1).tolist() == [127, 127, 127, 0, 127]
    assert (np.abs(values * scales.numpy() - x) <= scales.numpy() / 2 * 1.0001).all()


def quantized_dense(units, inputs, seed, activation=None):
    rng = np.random.default_rng(seed)
    dense = keras.layers.Dense(units, activation=activation)
    dense.build((None, inputs))
    dense.kernel.assign(rng.standard_normal((inputs, units)).astype(np.float32) * 0.05)
    dense.bias.assign(rng.standard_normal(units).astype(np.float32))
    float_dense = keras.layers.Dense(units, activation=activation)
    float_dense.build((None, inputs))
    float_dense.set_weights(dense.get_weights())
    dense.quantize("int8", config=int8.int8_dense_config())  # 7-bit weights, as our models
    return dense, float_dense


def test_apply_dense_is_kerass_int8_maths_on_the_int8_matmul():
    dense, float_dense = quantized_dense(48, 64, seed=2)
    x = np.random.default_rng(3).standard_normal((2, 7, 64)).astype(np.float32)
    got = np.asarray(int8.apply_dense(dense, x))  # eagerly: [2, 7, 64] -> [2, 7, 48]
    traced = tf.function(lambda x: int8.apply_dense(dense, x), autograph=False)
    np.testing.assert_allclose(np.asarray(traced(x)), got, rtol=0, atol=1e-6)
    graph = traced.get_concrete_function(tf.TensorSpec([None, None, 64])).graph
    assert "_QuantizedMatMul" in {op.type for op in graph.get_operations()}
    # What the layer means: integer products of the rounded values, then the two scales.
    rows = x.reshape(-1, 64)
    row_scales = np.abs(rows).max(1, keepdims=True) / 127
    exact = (np.rint(rows / row_scales) @ dense.kernel.numpy().astype(np.float64)
             * row_scales / dense.kernel_scale.numpy() + dense.bias.numpy())
    np.testing.assert_allclose(got.reshape(-1, 48), exact, rtol=1e-5, atol=1e-5)
    # Keras' own int8 call computes the same numbers (its row scale has an epsilon).
    np.testing.assert_allclose(got, np.asarray(dense(x)), rtol=1e-4, atol=1e-4)
    reference = np.asarray(float_dense(x))
    assert 0 < np.abs(got - reference).max() < 0.02 * np.abs(reference).max()


def test_apply_dense_keeps_kerass_call_for_training_and_float_layers():
    dense, float_dense = quantized_dense(8, 16, seed=4, activation="tanh")
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(int8.apply_dense(float_dense, x)),
                                  np.asarray(float_dense(x)))
    with tf.GradientTape() as tape:  # training: Keras' call, which has the gradient
        inputs = tf.constant(x)
        tape.watch(inputs)
        outputs = int8.apply_dense(dense, inputs, training=True)
    assert tape.gradient(outputs, inputs) is not None
    # The activation applies after the int8 matmul, as in Keras' call.
    np.testing.assert_allclose(np.asarray(int8.apply_dense(dense, x)), np.asarray(outputs),
                               atol=1e-4)
    assert np.abs(np.asarray(outputs)).max() <= 1.0


def test_eager_calls_keep_each_layers_own_kernel():
    """Eager calls share one graph node; it must not reuse the first kernel it reordered."""
    first, second = (quantized_dense(16, 32, seed)[0] for seed in (4, 5))
    x = np.random.default_rng(6).standard_normal((3, 32)).astype(np.float32)
    eager = [np.asarray(int8.apply_dense(layer, x)) for layer in (first, second)]
    graph = [np.asarray(tf.function(lambda x, layer=layer: int8.apply_dense(layer, x))(x))
             for layer in (first, second)]
    np.testing.assert_allclose(eager, graph, atol=1e-6)
    assert np.abs(eager[0] - eager[1]).max() > 0.1


def test_apply_dense_together_gives_each_layers_own_numbers_in_one_matmul():
    # Query, key and value run as one int8 matmul on their kernels side by side: one
    # _QuantizedMatMul in the graph, and each output is what apply_dense gives its layer alone.
    denses = [quantized_dense(24, 32, seed=seed)[0] for seed in (10, 11, 12)]
    x = np.random.default_rng(13).standard_normal((3, 5, 32)).astype(np.float32)
    alone = [np.asarray(int8.apply_dense(dense, x)) for dense in denses]
    together = tf.function(lambda x: int8.apply_dense_together(denses, x), autograph=False)
    for got, want in zip(together(x), alone):
        assert got.shape == (3, 5, 24)
        np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-5)
    graph = together.get_concrete_function(tf.TensorSpec([None, None, 32])).graph
    assert [op.type for op in graph.get_operations()].count(int8.tf_internals.INT8_MATMUL_OP) == 1


def test_apply_dense_together_runs_each_layer_alone_unless_all_are_int8():
    denses = [quantized_dense(8, 16, seed=seed)[0] for seed in (20, 21)]
    float_dense = keras.layers.Dense(8)
    float_dense.build((None, 16))
    x = np.random.default_rng(22).standard_normal((4, 16)).astype(np.float32)
    mixed = int8.apply_dense_together([*denses, float_dense], x)
    np.testing.assert_allclose(np.asarray(mixed[2]), np.asarray(float_dense(x)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(mixed[0]), np.asarray(int8.apply_dense(denses[0], x)),
                               atol=1e-6)
    trained = int8.apply_dense_together(denses, x, training=True)  # Keras' own int8 call
    np.testing.assert_allclose(np.asarray(trained[1]), np.asarray(denses[1](x)), atol=1e-6)


def gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def calibrated_dense(units, inputs, seed, ranges):
    """A float Dense whose kernel rows were scaled by ranges / 127 (as
    models/int8_calibration.calibrate does), quantized; with its float original and the input
    scale c = 127 / ranges."""
    dense, float_dense = quantized_dense(units, inputs, seed)
    scaled = keras.layers.Dense(units)
    scaled.build((None, inputs))
    scaled.set_weights([float_dense.kernel.numpy() * (ranges / 127)[:, None],
                        float_dense.bias.numpy()])
    scaled.quantize("int8", config=int8.int8_dense_config())
    return scaled, float_dense, (127 / ranges).astype(np.float32)


@pytest.mark.parametrize("activation, fused_op", [
    (activations.gelu_tanh, "GeluApproximate"), (activations.gelu_exact, "GeluExact"),
    (None, None)])
def test_a_static_input_scale_runs_bias_and_gelu_in_the_int8_matmul(activation, fused_op):
    rng = np.random.default_rng(6)
    ranges = rng.uniform(0.5, 4.0, 64).astype(np.float32)
    dense, float_dense, scale = calibrated_dense(48, 64, 7, ranges)
    x = (rng.uniform(-1, 1, (2, 9, 64)) * ranges).astype(np.float32)
    x[0, 0, 3] = 10 * ranges[3]  # beyond the calibrated range: clipped to it
    traced = tf.function(lambda x: int8.apply_dense(dense, x, input_scale=scale,
                                                    activation=activation), autograph=False)
    got = np.asarray(traced(x))
    np.testing.assert_allclose(np.asarray(int8.apply_dense(dense, x, input_scale=scale,
                                                           activation=activation)),
                               got, rtol=0, atol=1e-5)  # eagerly: the same numbers
    graph = traced.get_concrete_function(tf.TensorSpec([None, None, 64])).graph
    matmuls = [op for op in graph.get_operations() if op.type == "_QuantizedMatMul"]
    assert len(matmuls) == 1
    fused = [f.decode() for f in matmuls[0].get_attr("fused_ops")]
    assert fused == ["BiasAdd"] + ([fused_op] if fused_op else []) + ["Dequantize"]
    assert not {"Abs", "Max", "Erf", "Tanh"} & {op.type for op in graph.get_operations()}
    # What it means: the inputs rounded on their channels' fixed grids, integer products,
    # the column scale, the bias, then the activation.
    rows = x.reshape(-1, 64).astype(np.float64)
    quantized = np.clip(np.rint(rows * scale), -127, 127)
    pre = quantized @ dense.kernel.numpy().astype(np.float64) / dense.kernel_scale.numpy() \
        + dense.bias.numpy()
    exact = pre if activation is None else gelu(pre, activation is activations.gelu_tanh)
    np.testing.assert_allclose(got.reshape(-1, 48), exact, rtol=1e-4, atol=1e-4)
    # Within the ranges it computes the float layer: x @ W + b (then the activation).
    inside = np.clip(x, -ranges, ranges)
    reference = np.asarray(float_dense(inside))
    if activation is not None:
        reference = np.asarray(activation(reference))
    got_inside = np.asarray(traced(inside))
    assert 0 < np.abs(got_inside - reference).max() < 0.02 * np.abs(reference).max()
    # Training (and any float path) computes dense(x * c): the same function in float32.
    np.testing.assert_allclose(
        np.asarray(int8.apply_dense(dense, inside, training=True, input_scale=scale)),
        np.asarray(float_dense(inside)), atol=0.03 * np.abs(reference).max())


def test_recording_input_ranges_keeps_each_channels_largest_magnitude_in_eager_calls():
    dense, _ = quantized_dense(8, 16, seed=8)
    x = np.random.default_rng(9).standard_normal((4, 16)).astype(np.float32)
    y = np.random.default_rng(10).standard_normal((2, 3, 16)).astype(np.float32)
    with int8.recording_input_ranges() as ranges:
        int8.apply_dense(dense, x)
        int8.apply_dense(dense, y)
        tf.function(lambda t: int8.apply_dense(dense, t))(x * 100)  # traced: not recorded
    np.testing.assert_allclose(ranges[id(dense)],
                               np.maximum(np.abs(x).max(0), np.abs(y).reshape(-1, 16).max(0)))
    int8.apply_dense(dense, x * 100)  # outside the context: nothing recorded
    assert list(ranges) == [id(dense)] and np.abs(ranges[id(dense)]).max() < 10


def test_fused_weights_give_apply_dense_together_the_same_numbers_without_a_concat():
    denses = [quantized_dense(16, 32, seed=s)[0] for s in (11, 12, 13)]
    fused = int8.fused_int8_weights(denses)
    assert fused[0].dtype == tf.int8 and fused[0].shape == (32, 48)
    x = np.random.default_rng(14).standard_normal((5, 32)).astype(np.float32)
    scale = np.full(32, 40.0, np.float32)
    for input_scale in (None, scale):
        function = tf.function(lambda t, f: int8.apply_dense_together(
            denses, t, input_scale=input_scale, fused=f), autograph=False)
        separate, together = function(x, None), function(x, fused)
        for a, b in zip(separate, together):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        graph = function.get_concrete_function(tf.TensorSpec([None, 32]), fused).graph
        concatenated = {op.outputs[0].dtype for op in graph.get_operations()
                        if op.type == "ConcatV2"}
        assert concatenated == {tf.int32}  # output shapes only, no weights
    float_dense = quantized_dense(16, 32, seed=15)[1]
    assert int8.fused_int8_weights([float_dense, denses[0]]) is None
