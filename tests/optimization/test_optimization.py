"""BERT's schedule and optimizers: Google's formulas, weight-decay exclusions, serialization."""

import doctest

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, BertPretrainer
from keras_bert.optimization import optimizers as optimization
from keras_bert.pretraining import settings as pretraining_config
from keras_bert import keras_internals
from keras_bert.optimization import schedules
from keras_bert import distribute
from keras_bert.optimization.optimizers import BertAdamW, BertLamb, create_optimizer
from keras_bert.optimization.schedules import WarmupPolynomialDecay


def _pretrainer():
    keras.utils.set_random_seed(0)
    return BertPretrainer(BertEncoder(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=32,
                                      max_position_embeddings=16))


def test_schedule_is_googles_warmup_then_linear_decay_over_all_steps():
    schedule = WarmupPolynomialDecay(1e-4, decay_steps=1000, warmup_steps=100)
    got = [float(schedule(step)) for step in (0, 1, 50, 99, 100, 500, 999, 1000, 5000)]
    # Warmup: peak * step / warmup; after: peak * (1 - step / total), as optimization.py.
    want = [0.0, 1e-6, 5e-5, 9.9e-5, 9e-5, 5e-5, 1e-7, 0.0, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)


def test_schedule_round_trips_through_keras_serialization():
    schedule = WarmupPolynomialDecay(3e-5, decay_steps=10, warmup_steps=2, end_learning_rate=1e-6,
                                     power=2.0)
    clone = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule))
    assert isinstance(clone, WarmupPolynomialDecay)
    assert [float(clone(s)) for s in range(12)] == [float(schedule(s)) for s in range(12)]


def test_schedule_rejects_bad_steps():
    with pytest.raises(ValueError, match="decay_steps must be positive"):
        WarmupPolynomialDecay(1e-4, decay_steps=0)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_layer_norm_and_biases_are_not_decayed(name):
    model = _pretrainer()
    optimizer = create_optimizer(1e-3, 10, 0, weight_decay=0.01, optimizer=name)
    optimizer.build(model.trainable_variables)
    kept = sorted(v.path for v in model.trainable_variables if not keras_internals.is_decayed(optimizer, v))
    decayed = sorted(v.path for v in model.trainable_variables if keras_internals.is_decayed(optimizer, v))
    assert all("layer_norm" in p or "bias" in p for p in kept)
    assert len(kept) == 18  # 3 LayerNorms x 2 + 10 biases + MLM/NSP output biases
    assert decayed == sorted([
        "embeddings/position_embeddings", "embeddings/word_embeddings/embeddings",
        "embeddings/token_type_embeddings/embeddings", "masked_lm/transform/kernel",
        "next_sentence/output_weights", "pooler/kernel",
        *(f"transformer_layer_0/{n}/kernel" for n in (
            "attention/query", "attention/key", "attention/value", "attention_output",
            "intermediate", "output"))])


def _numpy_adamw(w, grads, lr, wd, decay, clip, b1=0.9, b2=0.999, eps=1e-6):
    """AdamW on one variable (with the global-norm clipping factor given per step)."""
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, (g, factor) in enumerate(zip(grads, clip), start=1):
        g = g * factor
        if decay:
            w = w - lr * wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        # Adam's Algorithm 1 (torch.optim.AdamW): epsilon on the bias-corrected sqrt(v).
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w


def test_adamw_matches_the_formula_with_decay_exclusion_and_global_norm_clipping():
    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(3, 4)).astype("float32"), name="kernel")
    bias = keras.Variable(rng.normal(size=(4,)).astype("float32"), name="bias")
    optimizer = BertAdamW(learning_rate=0.1, weight_decay=0.05, epsilon=1e-6,
                          global_clipnorm=1.0)
    steps = [(rng.normal(size=(3, 4)) * 2, rng.normal(size=(4,)) * 2) for _ in range(3)]
    steps = [(gk.astype("float32"), gb.astype("float32")) for gk, gb in steps]
    start_k, start_b = kernel.numpy(), bias.numpy()
    for gk, gb in steps:
        optimizer.apply([gk, gb], [kernel, bias])
    factors = [min(1.0, 1.0 / np.sqrt((gk ** 2).sum() + (gb ** 2).sum())) for gk, gb in steps]
    assert max(factors) < 0.5  # clipping really happened
    want_k = _numpy_adamw(start_k, [gk for gk, _ in steps], 0.1, 0.05, True, factors)
    want_b = _numpy_adamw(start_b, [gb for _, gb in steps], 0.1, 0.05, False, factors)
    np.testing.assert_allclose(kernel.numpy(), want_k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias.numpy(), want_b, rtol=1e-5, atol=1e-6)


def test_adamw_epsilon_does_not_damp_small_gradients_in_the_first_steps():
    # A fine-tuned BERT's median gradient is about 1e-5. With epsilon on the bias-corrected
    # sqrt(v) the first steps move such a weight by lr / 1.1 (torch.optim.AdamW does the same);
    # Keras' epsilon hat (32x larger at step 1) moved it by a quarter of lr.
    weight = keras.Variable(np.zeros((4,), "float32"), name="kernel")
    optimizer = BertAdamW(learning_rate=1.0, weight_decay=0.0, epsilon=1e-6)
    moves = []
    for _ in range(3):
        before = weight.numpy().copy()
        optimizer.apply([np.full((4,), 1e-5, "float32")], [weight])
        moves.append(float(before[0] - weight.numpy()[0]))
    np.testing.assert_allclose(moves, [1e-5 / (1e-5 + 1e-6)] * 3, rtol=1e-4)


def test_adamw_compiled_follows_the_schedule_and_rate_multipliers():
    # In a tf.function, as model.fit runs it: each step decays at the schedule's rate (Keras'
    # decay, not multiplied) and steps at that rate times the variable's multiplier.
    rng = np.random.default_rng(2)
    kernel = keras.Variable(rng.normal(size=(3, 4)).astype("float32"), name="kernel")
    head = keras.Variable(rng.normal(size=(4, 2)).astype("float32"), name="head_kernel")
    bias = keras.Variable(rng.normal(size=(4,)).astype("float32"), name="bias")
    schedule = WarmupPolynomialDecay(0.1, decay_steps=8, warmup_steps=2)
    optimizer = BertAdamW(learning_rate=schedule, weight_decay=0.05,
                          learning_rate_multipliers={"head": 3.0})
    variables = [kernel, head, bias]
    optimizer.build(variables)
    step = tf.function(lambda grads: optimizer.apply(grads, variables))
    grads = [[rng.normal(size=v.shape).astype("float32") for v in variables] for _ in range(4)]
    start = [v.numpy() for v in variables]
    for g in grads:
        step(g)
    rates = [float(schedule(t)) for t in range(4)]
    assert rates[0] == 0 and rates[2] > rates[3] > 0  # warmup, then decay
    for i, (multiplier, decayed) in enumerate([(1.0, True), (3.0, True), (1.0, False)]):
        w, m, v = start[i], 0.0, 0.0
        for t, (g, rate) in enumerate(zip([g[i] for g in grads], rates), start=1):
            w = w - rate * 0.05 * w if decayed else w
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            w = w - rate * multiplier * (m / (1 - 0.9 ** t)) / (
                np.sqrt(v / (1 - 0.999 ** t)) + 1e-7)
        np.testing.assert_allclose(variables[i].numpy(), w, rtol=1e-5, atol=1e-6)


def test_adamw_computes_its_step_scalars_once_per_step_not_per_variable():
    # The rate schedule, beta powers and epsilon scale are a few dozen ops; computed per
    # variable they made a step of BERT L-4 (71 variables) 2,542 ops, now 778: 51 ops for each
    # further variable before, 12 now.
    def ops_in_a_step(count: int) -> int:
        variables = [keras.Variable(np.ones((2, 2), "float32"), name=f"kernel_{i}")
                     for i in range(count)]
        optimizer = create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=2)
        optimizer.build(variables)
        step = tf.function(lambda grads: optimizer.apply(grads, variables))
        grads = [tf.ones((2, 2)) for _ in variables]
        return len(step.get_concrete_function(grads).graph.get_operations())

    per_variable = (ops_in_a_step(12) - ops_in_a_step(2)) / 10
    # Each variable: the handles of it and its moments, its gradient's part of the global
    # norm and its clipping, the decay, the fused Adam step.
    assert per_variable <= 15, per_variable


def test_lamb_matches_model_gardens_formula():
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(5, 3)).astype("float32")
    b0 = rng.normal(size=(3,)).astype("float32")
    kernel, bias = keras.Variable(w0, name="kernel"), keras.Variable(b0, name="bias")
    optimizer = BertLamb(learning_rate=0.01, weight_decay=0.1)
    gk = rng.normal(size=(5, 3)).astype("float32")
    gb = rng.normal(size=(3,)).astype("float32")
    optimizer.apply([gk, gb], [kernel, bias])
    # Step 1: m_hat = g, v_hat = g^2; u = g / (|g| + eps) + wd * w; w -= lr * ||w||/||u|| * u.
    update = gk / (np.abs(gk) + 1e-6) + 0.1 * w0
    want_k = w0 - 0.01 * np.linalg.norm(w0) / np.linalg.norm(update) * update
    want_b = b0 - 0.01 * gb / (np.abs(gb) + 1e-6)  # no decay, no trust ratio for biases
    np.testing.assert_allclose(kernel.numpy(), want_k, rtol=1e-5)
    np.testing.assert_allclose(bias.numpy(), want_b, rtol=1e-5)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_optimizer_compiles_fits_and_reloads_from_a_keras_save(tmp_path, name):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.LayerNormalization(), keras.layers.Dense(1)])
    learning_rate = {"adamw": 1e-2, "lamb": 5e-2}[name]  # LAMB steps are relative to ||w||
    model.compile(optimizer=create_optimizer(learning_rate, num_train_steps=20,
                                             num_warmup_steps=2, optimizer=name), loss="mse")
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    history = model.fit(x, y, batch_size=16, epochs=5, verbose=0)
    assert history.history["loss"][-1] < 0.7 * history.history["loss"][0]
    model.save(tmp_path / "m.keras")
    reloaded = keras.saving.load_model(tmp_path / "m.keras")
    config = reloaded.optimizer.get_config()
    assert type(reloaded.optimizer).__name__ == {"adamw": "BertAdamW", "lamb": "BertLamb"}[name]
    assert config["exclude_from_weight_decay"] == ["layer_norm", "LayerNorm", "bias"]
    assert config["global_clipnorm"] == 1.0
    assert float(reloaded.optimizer.learning_rate) == pytest.approx(
        float(model.optimizer.learning_rate))
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), model.predict(x, verbose=0),
                               rtol=1e-6)


def test_create_optimizer_errors_say_what_to_change():
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'; expected one of adamw, lamb"):
        create_optimizer(1e-4, 10, 1, optimizer="sgd")
    with pytest.raises(ValueError, match="num_warmup_steps=20 exceeds num_train_steps=10"):
        create_optimizer(1e-4, 10, 20)


def test_loss_scaling_wraps_the_optimizer():
    optimizer = create_optimizer(1e-4, 10, 1, loss_scale=True)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(optimizer.inner_optimizer, BertAdamW)
    assert float(optimizer.scale_loss(tf.constant(1.0))) == 2.0 ** 15


@pytest.mark.parametrize("module", [schedules, optimization, distribute, pretraining_config])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
