"""BertEncoder: outputs, padding mask, initialisation, GELU forms, mixed precision, serialization."""

import keras
import numpy as np
import pytest

from keras_bert import BertEncoder
from keras_bert.layers.activations import gelu_exact, gelu_tanh
from tests.helpers import random_inputs


@pytest.fixture
def encoder(tiny_config):
    keras.utils.set_random_seed(1)
    return BertEncoder.from_bert_config(tiny_config)


def test_outputs_follow_tf_hub_names_and_shapes(encoder):
    out = encoder(random_inputs(batch=3, seq=12))
    assert set(out) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert tuple(out["sequence_output"].shape) == (3, 12, 64)
    assert tuple(out["pooled_output"].shape) == (3, 64)
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    assert sorted(i.name for i in encoder.inputs) == ["input_mask", "input_type_ids", "input_word_ids"]


def test_pooled_output_is_tanh_dense_of_cls(encoder):
    out = encoder(random_inputs())
    cls = np.asarray(out["sequence_output"])[:, 0]
    expected = np.tanh(cls @ encoder.pooler.kernel.numpy() + encoder.pooler.bias.numpy())
    np.testing.assert_allclose(np.asarray(out["pooled_output"]), expected, atol=1e-5)


def test_padding_is_masked_out(encoder):
    inputs = random_inputs(batch=2, seq=10, pad_rows=False)
    inputs["input_mask"][:, 6:] = 0
    base = np.asarray(encoder(inputs)["sequence_output"])
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["input_word_ids"][:, 6:] = 42  # different tokens at padded positions
    changed["input_type_ids"][:, 6:] = 1
    other = np.asarray(encoder(changed)["sequence_output"])
    np.testing.assert_allclose(base[:, :6], other[:, :6], atol=1e-6)
    # ... while an unmasked change at those positions does change the valid outputs.
    changed["input_mask"][:, 6:] = 1
    assert np.abs(np.asarray(encoder(changed)["sequence_output"])[:, :6] - base[:, :6]).max() > 1e-3


def test_weights_are_truncated_normal_with_initializer_range(tiny_config):
    encoder = BertEncoder(**dict(tiny_config.to_dict(), initializer_range=0.05))
    table = encoder.word_embeddings.embeddings.numpy()
    assert np.abs(table).max() <= 2 * 0.05 + 1e-6  # truncated at two standard deviations
    assert 0.035 < table.std() < 0.05  # truncated normal(0.05) has std ~0.044
    kernel = encoder.transformer_layers[0].intermediate.kernel.numpy()
    assert np.abs(kernel).max() <= 0.1 + 1e-6
    np.testing.assert_array_equal(encoder.transformer_layers[0].intermediate.bias.numpy(), 0)
    np.testing.assert_array_equal(encoder.embeddings.layer_norm.gamma.numpy(), 1)


def test_gelu_forms_match_their_formulas():
    x = np.linspace(-5, 5, 101).astype(np.float32)
    from math import erf, pi, sqrt
    exact = np.array([0.5 * v * (1 + erf(v / sqrt(2))) for v in x])
    tanh = 0.5 * x * (1 + np.tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(np.asarray(gelu_exact(x)), exact, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gelu_tanh(x)), tanh, atol=1e-6)
    assert np.abs(exact - tanh).max() > 1e-4


def test_encoder_uses_the_configured_gelu_form(tiny_config):
    keras.utils.set_random_seed(2)
    a = BertEncoder(**dict(tiny_config.to_dict(), hidden_act="gelu"))
    b = BertEncoder(**dict(tiny_config.to_dict(), hidden_act="gelu_exact"))
    b.set_weights(a.get_weights())
    inputs = random_inputs()
    diff = np.abs(np.asarray(a(inputs)["sequence_output"]) - np.asarray(b(inputs)["sequence_output"]))
    assert 1e-6 < diff.max() < 0.1


@pytest.mark.parametrize("policy, bound", [("mixed_bfloat16", 0.15), ("mixed_float16", 0.02)])
def test_mixed_precision_stays_close_to_float32(tiny_config, policy, bound):
    """Bound: max abs error of the LayerNorm-ed sequence_output (values of order 1) vs float32."""
    keras.utils.set_random_seed(3)
    reference = BertEncoder.from_bert_config(tiny_config)
    mixed = BertEncoder.from_bert_config(tiny_config, dtype=policy)
    mixed.set_weights(reference.get_weights())
    inputs = random_inputs(batch=4, seq=16)
    out = mixed(inputs)
    assert out["sequence_output"].dtype == policy.replace("mixed_", "")
    assert all(w.dtype == "float32" for w in mixed.weights)
    # LayerNorm computes in float32 under the mixed policy.
    assert mixed.transformer_layers[0].output_layer_norm.dtype_policy.variable_dtype == "float32"
    valid = inputs["input_mask"].astype(bool)
    error = np.abs(np.asarray(out["sequence_output"], np.float32)
                   - np.asarray(reference(inputs)["sequence_output"]))[valid].max()
    assert error < bound, f"{policy}: max error {error:.3g} exceeds {bound}"
    pooled_error = np.abs(np.asarray(out["pooled_output"], np.float32)
                          - np.asarray(reference(inputs)["pooled_output"])).max()
    assert pooled_error < bound


def test_softmax_is_float32_so_fp16_masking_does_not_overflow(tiny_config):
    keras.utils.set_random_seed(4)
    encoder = BertEncoder.from_bert_config(tiny_config, dtype="mixed_float16")
    inputs = random_inputs(batch=2, seq=12)
    out = np.asarray(encoder(inputs)["sequence_output"], np.float32)
    assert np.isfinite(out).all()


def test_get_config_round_trip(encoder, tiny_config):
    config = encoder.get_config()
    assert {k: config[k] for k in tiny_config.to_dict()} == tiny_config.to_dict()
    clone = BertEncoder.from_config(config)
    assert clone.get_config() == config
    clone.set_weights(encoder.get_weights())
    inputs = random_inputs()
    np.testing.assert_array_equal(np.asarray(encoder(inputs)["pooled_output"]),
                                  np.asarray(clone(inputs)["pooled_output"]))


@pytest.mark.parametrize("policy", [None, "mixed_bfloat16"])
def test_keras_save_and_reload_gives_identical_outputs(tiny_config, tmp_path, policy):
    keras.utils.set_random_seed(5)
    encoder = BertEncoder.from_bert_config(tiny_config, dtype=policy)
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    reloaded = keras.saving.load_model(path)
    assert isinstance(reloaded, BertEncoder)
    assert reloaded.dtype_policy.name == (policy or "float32")
    inputs = random_inputs()
    a, b = encoder(inputs), reloaded(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


def test_sequence_longer_than_position_table_fails_clearly(tiny_config):
    encoder = BertEncoder.from_bert_config(tiny_config)
    with pytest.raises(ValueError, match="65 tokens but max_position_embeddings is 64"):
        encoder(random_inputs(seq=tiny_config.max_position_embeddings + 1, pad_rows=False))


def test_training_mode_applies_dropout(encoder):
    inputs = random_inputs()
    a = np.asarray(encoder(inputs, training=True)["sequence_output"])
    b = np.asarray(encoder(inputs, training=False)["sequence_output"])
    c = np.asarray(encoder(inputs, training=False)["sequence_output"])
    np.testing.assert_array_equal(b, c)
    assert np.abs(a - b).max() > 1e-3
