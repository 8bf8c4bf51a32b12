"""keras_bert/keras_internals.py against the installed Keras.

Each private name the adapter reads or overrides must exist and mean what the adapter says; if a
Keras upgrade moves one, these tests fail naming it (instead of BERT's optimizers silently
skipping the replica sum, the fused Adam kernel or LAMB's in-step decay).
"""

import keras
import numpy as np
import pytest

from keras_bert import keras_internals
from keras_bert.optimization.optimizers import BertAdamW, BertLamb


@pytest.mark.parametrize("name", keras_internals.HOOKS + keras_internals.READS[2:])
def test_every_private_method_exists_on_keras_base_optimizer(name):
    assert callable(getattr(keras.optimizers.Optimizer, name, None)), (
        f"keras.optimizers.Optimizer.{name} is gone (Keras {keras.__version__}); "
        f"update keras_bert/keras_internals.py")


def _variable(values, name="kernel"):
    return keras.Variable(np.asarray(values, "float32"), name=name)


def test_adam_slots_are_the_moments_keras_adam_computes():
    variable = _variable([[1.0, -2.0], [0.5, 3.0]])
    optimizer = keras.optimizers.Adam(learning_rate=0.1, beta_1=0.9, beta_2=0.99)
    gradients = [np.array([[0.1, 0.2], [-0.3, 0.4]], "float32"),
                 np.array([[1.0, -1.0], [0.0, 2.0]], "float32")]
    m = np.zeros((2, 2), "float32")
    v = np.zeros((2, 2), "float32")
    for gradient in gradients:
        optimizer.apply([gradient], [variable])
        m = 0.9 * m + 0.1 * gradient
        v = 0.99 * v + 0.01 * gradient ** 2
    momentum, velocity = keras_internals.adam_slots(optimizer, variable)
    np.testing.assert_allclose(momentum.numpy(), m, rtol=1e-6)
    np.testing.assert_allclose(velocity.numpy(), v, rtol=1e-6)


def test_variable_key_tells_variables_apart_and_is_stable():
    first, second = _variable([1.0], "a"), _variable([1.0], "a")
    optimizer = keras.optimizers.Adam()
    assert keras_internals.variable_key(optimizer, first) == keras_internals.variable_key(
        optimizer, first)
    assert keras_internals.variable_key(optimizer, first) != keras_internals.variable_key(
        optimizer, second)


def test_is_decayed_follows_kerass_exclusions():
    kernel, bias = _variable([1.0], "kernel"), _variable([1.0], "bias")
    optimizer = keras.optimizers.AdamW(weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    optimizer.build([kernel, bias])
    assert keras_internals.is_decayed(optimizer, kernel)
    assert not keras_internals.is_decayed(optimizer, bias)


class _Spy(keras_internals.OptimizerHooks, keras.optimizers.SGD):
    """Counts the public-named steps Keras reaches through the hooks during one apply."""

    def __init__(self, decay_outside_step, **kwargs):
        super().__init__(**kwargs)
        self.decay_outside_step = decay_outside_step
        self.seen = []

    def reduce_gradients_before_clipping(self, grads):
        self.seen.append("before_clipping")
        return [g * 2.0 for g in grads]  # visible in the update

    def reduce_gradients(self, grads_and_vars):
        self.seen.append("reduce")
        return super().reduce_gradients(grads_and_vars)


@pytest.mark.parametrize("decay_outside_step", [True, False])
def test_apply_reaches_every_hook(decay_outside_step):
    variable = _variable([1.0, 2.0])
    optimizer = _Spy(decay_outside_step, learning_rate=0.5, weight_decay=0.1)
    optimizer.apply_gradients([(np.array([1.0, 1.0], "float32"), variable)])
    assert optimizer.seen == ["before_clipping", "reduce"]  # Keras clips, then all-reduces
    # SGD step with the doubled gradient (w -= 0.5 * 2g) and, when Keras decays outside the
    # step, decoupled decay first (w -= 0.5 * 0.1 * w).
    start = np.array([1.0, 2.0])
    decayed = start - 0.5 * 0.1 * start if decay_outside_step else start
    np.testing.assert_allclose(variable.numpy(), decayed - 0.5 * 2.0, rtol=1e-6)


def test_bert_optimizers_use_no_private_keras_name_outside_the_adapter():
    import inspect

    from keras_bert.optimization import optimizers
    source = inspect.getsource(optimizers)
    used = [name for name in keras_internals.HOOKS + keras_internals.READS if name in source]
    assert not used, f"optimizers.py uses {used}; go through keras_internals"
    assert issubclass(BertAdamW, keras_internals.OptimizerHooks)
    assert issubclass(BertLamb, keras_internals.OptimizerHooks)


def _int8_dense(units=6, inputs=10, **kwargs):
    rng = np.random.default_rng(11)
    dense = keras.layers.Dense(units, **kwargs)
    dense.build((None, inputs))
    dense.kernel.assign(rng.standard_normal((inputs, units)).astype("float32"))
    dense.bias.assign(rng.standard_normal(units).astype("float32"))
    return dense


def test_int8_dense_weights_are_what_keras_int8_dense_computes_with():
    dense = _int8_dense()
    float_kernel = dense.kernel.numpy()
    assert keras_internals.int8_dense_weights(dense) is None  # float32: nothing to read
    dense.quantize("int8")
    kernel, kernel_scale = keras_internals.int8_dense_weights(dense)
    assert kernel.dtype == "int8" and kernel_scale.shape == (6,)
    # kernel = round(W * kernel_scale), kernel_scale = 127 / max |W[:, j]|
    np.testing.assert_allclose(kernel_scale.numpy(), 127 / np.abs(float_kernel).max(0),
                               rtol=1e-5)
    np.testing.assert_array_equal(kernel.numpy(), np.rint(float_kernel * kernel_scale.numpy()))
    # Keras' own int8 call is y = (round(x * s_x) @ kernel) / (s_x * kernel_scale) + bias.
    x = np.random.default_rng(12).standard_normal((4, 10)).astype("float32")
    row_scale = 127 / np.abs(x).max(1, keepdims=True)
    expected = (np.rint(x * row_scale) @ kernel.numpy().astype(np.float64)
                / (row_scale * kernel_scale.numpy()) + dense.bias.numpy())
    np.testing.assert_allclose(np.asarray(dense(x)), expected, rtol=1e-5, atol=1e-5)
    for name in keras_internals.INT8_READS[:2]:
        assert hasattr(dense, name), f"Keras' int8 Dense has no {name} (Keras {keras.__version__})"


def test_int8_dense_weights_refuse_what_the_int8_path_does_not_compute():
    from keras.quantizers import AbsMaxQuantizer, Int8QuantizationConfig
    weight_only = _int8_dense()
    weight_only.quantize("int8", config=Int8QuantizationConfig(
        weight_quantizer=AbsMaxQuantizer(axis=0), activation_quantizer=None))
    narrow = _int8_dense()
    narrow.quantize("int8", config=Int8QuantizationConfig(
        weight_quantizer=AbsMaxQuantizer(axis=0),
        activation_quantizer=AbsMaxQuantizer(value_range=(-63, 63))))
    lora = _int8_dense()
    lora.quantize("int8")
    lora.enable_lora(2)
    assert [keras_internals.int8_dense_weights(d) for d in (weight_only, narrow, lora)] == [
        None] * 3
    embedding = keras.layers.Embedding(5, 3)
    embedding.build()
    embedding.quantize("int8")
    assert keras_internals.int8_dense_weights(embedding) is None


def test_sublayers_are_the_layers_model_quantize_visits():
    inner = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(2)], name="inner")
    model = keras.Sequential([keras.Input((4,)), inner, keras.layers.Dense(1)])
    found = keras_internals.sublayers(model)
    assert inner in found and set(inner.layers) <= set(found) and model not in found
    denses = [layer for layer in found if isinstance(layer, keras.layers.Dense)]
    assert sorted(layer.units for layer in denses) == [1, 2, 3]


def test_resolve_policy_maps_gives_each_layer_its_entry_and_int8_layers_save(tmp_path):
    policy_map = keras.dtype_policies.DTypePolicyMap()
    policy_map["quantized"] = keras.dtype_policies.get("int8_from_float32")
    inputs = keras.Input((4,))
    layers = [keras.layers.Dense(3, name=name, dtype=policy_map)
              for name in ("quantized", "float")]
    model = keras.Model(inputs, [layer(inputs) for layer in layers])
    assert all(hasattr(layer, keras_internals.POLICY_ATTRIBUTE) for layer in layers)
    assert [layer.quantization_mode for layer in layers] == ["int8", None]
    keras_internals.resolve_policy_maps(model)
    assert [layer.dtype_policy.name for layer in layers] == ["int8_from_float32", "float32"]
    assert [layer.quantization_mode for layer in layers] == ["int8", None]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype("float32")
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.get_layer("quantized").kernel.dtype == "int8"
    for got, expected in zip(loaded(x), model(x)):
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_adding_state_lets_a_built_layer_take_a_variable_and_locks_it_again():
    dense = keras.layers.Dense(2)
    dense.build((None, 3))
    with pytest.raises(ValueError, match="already built"):
        dense.add_weight(shape=(3,), name="scale")
    with keras_internals.adding_state(dense):
        scale = dense.add_weight(shape=(3,), initializer="ones", trainable=False, name="scale")
    assert scale in dense.non_trainable_weights and len(dense.weights) == 3
    with pytest.raises(ValueError, match="already built"):
        dense.add_weight(shape=(3,), name="another")


def test_quantize_collects_once_where_keras_collects_per_dropped_kernel(monkeypatch):
    import gc

    from keras_bert import BertEncoder
    calls = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: calls.append(generation) or 0)
    counting = gc.collect
    # Keras' own Model.quantize: one full collection per Dense kernel it replaces.
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(2)])
    model.quantize("int8")
    assert len(calls) == 2
    calls.clear()
    encoder = BertEncoder(vocab_size=30, hidden_size=8, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=16,
                          max_position_embeddings=16)
    encoder.quantize("int8")
    assert len(encoder.int8_layers()) == 13 and calls == [2]
    with keras_internals.collecting_once():
        gc.collect()
    assert calls == [2, 2] and gc.collect is counting  # restored
    with pytest.raises(RuntimeError, match="inside"), keras_internals.collecting_once():
        raise RuntimeError("inside")
    assert calls == [2, 2, 2] and gc.collect is counting
