"""A task model does what Keras' guides say a Model does: every ``fit`` trains (a second one
goes on with the optimizer's state on a schedule of its own), ids of any integer dtype work in
``predict``, ``evaluate`` and ``fit``, and the everyday idioms (tf.data, callbacks, weights, a
frozen encoder, the encoder inside a user's model, ``.keras`` and training on) behave as on a
plain ``keras.Model``, under a global mixed_bfloat16 policy too, and ``model.export`` serves
through TensorFlow's graph-mode loader. Tiny models throughout."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier
from tests.recipe.test_batches import classifier as tiny_classifier
from tests.tasks.tiny_checkpoint import WORDS


def texts_and_labels(count=24, seed=0):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(2, 12))) for _ in range(count)]
    return texts, rng.integers(0, 2, size=count)


def classifier(dropout=0.0):
    return tiny_classifier(dropout=dropout)


class LearningRates(keras.callbacks.Callback):
    """The learning rate of every step, as the optimizer applies it."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(self.model.optimizer.learning_rate))


def weights_of(model):
    return [v.numpy().copy() for v in model.trainable_variables]


def changed(before, model):
    return sum(not np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables))


def test_a_second_fit_trains_on_a_schedule_of_its_own_with_the_optimizers_state():
    texts, labels = texts_and_labels()
    model = classifier()
    traces = []
    train_step = model.train_step
    model.train_step = lambda data: traces.append(1) or train_step(data)
    model.compile(learning_rate=1e-3)
    first, second = LearningRates(), LearningRates()
    model.fit(texts, labels, batch_size=8, epochs=2, verbose=0, seed=0, callbacks=[first])
    optimizer = model.optimizer
    assert int(optimizer.iterations) == 6
    assert float(optimizer.learning_rate) == pytest.approx(0.0, abs=1e-12)
    momenta = [v.numpy().copy() for v in optimizer.variables[1:]]
    before = weights_of(model)
    model.fit(texts, labels, batch_size=8, epochs=2, verbose=0, seed=0, callbacks=[second])
    assert changed(before, model) == len(before)  # every weight trained again
    # The same optimizer goes on (its step count and Adam's moments), on the same schedule
    # as the first fit's: warmup, the peak rate, decay to 0 at this fit's last step.
    assert model.optimizer is optimizer and int(optimizer.iterations) == 12
    assert any(np.any(m != 0) for m in momenta)
    np.testing.assert_allclose(second.rates, first.rates, rtol=1e-6)
    assert max(second.rates) > 5e-4
    # A third fit of another length spans its own steps.
    third = LearningRates()
    model.fit(texts, labels, batch_size=8, epochs=1, verbose=0, seed=0, callbacks=[third])
    assert len(third.rates) == 3 and max(third.rates) > 0
    assert len(traces) == 1  # the schedule restarts in the traced step, as Keras' fit reuses it


def test_an_optimizer_the_user_compiled_with_is_left_as_made():
    texts, labels = texts_and_labels()
    model = classifier()
    adam = keras.optimizers.Adam(1e-3)
    model.compile(optimizer=adam)
    rates = LearningRates()
    model.fit(texts, labels, batch_size=8, epochs=1, verbose=0, callbacks=[rates])
    before = weights_of(model)
    model.fit(texts, labels, batch_size=8, epochs=1, verbose=0, callbacks=[rates])
    assert model.optimizer is adam and int(adam.iterations) == 6
    assert rates.rates == pytest.approx([1e-3] * 6)
    assert changed(before, model) == len(before)
    # Callbacks that set the rate need a rate that can be set: the user's own optimizer.
    model.fit(texts, labels, batch_size=8, epochs=2, verbose=0,
              callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr / 2),
                         keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=0)])
    assert float(model.optimizer.learning_rate) <= 2.5e-4 + 1e-9


def test_initial_epoch_starts_where_an_uninterrupted_fit_was():
    texts, labels = texts_and_labels()
    whole, resumed = LearningRates(), LearningRates()
    model = classifier()
    model.compile(learning_rate=1e-3)
    model.fit(texts, labels, batch_size=8, epochs=3, verbose=0, seed=0, callbacks=[whole])
    model = classifier()
    model.compile(learning_rate=1e-3)
    history = model.fit(texts, labels, batch_size=8, epochs=3, initial_epoch=2, verbose=0,
                        seed=0, callbacks=[resumed])
    assert len(history.history["loss"]) == 1
    np.testing.assert_allclose(resumed.rates, whole.rates[6:], rtol=1e-6)


def test_a_loaded_model_trains_on_with_its_optimizer(tmp_path):
    texts, labels = texts_and_labels()
    model = classifier()
    model.compile(learning_rate=1e-3)
    first = LearningRates()
    model.fit(texts, labels, batch_size=8, epochs=1, verbose=0, seed=0, callbacks=[first])
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert int(loaded.optimizer.iterations) == 3
    before, rates = weights_of(loaded), LearningRates()
    loaded.fit(texts, labels, batch_size=8, epochs=1, verbose=0, seed=0, callbacks=[rates])
    assert changed(before, loaded) == len(before)
    assert int(loaded.optimizer.iterations) == 6
    np.testing.assert_allclose(rates.rates, first.rates, rtol=1e-6)


@pytest.fixture(scope="module")
def int32_model():
    """(a compiled classifier, the int32 ids its preprocessor packs 40 texts into, their 0/1
    labels), shared by the dtype tests below: each trains it on, and compares what it gives for
    its own dtype's ids with what it gives for the int32 ids, at the same weights."""
    texts, labels = texts_and_labels(40)
    model = classifier()
    model.compile(learning_rate=1e-3)
    packed = {name: value.numpy() for name, value in model.preprocessor(tf.constant(texts))
              .items()}
    return model, packed, labels


@pytest.mark.parametrize("dtype", [np.int64, np.int16, np.uint16])
def test_ids_of_any_integer_dtype_predict_evaluate_and_fit(int32_model, dtype):
    model, packed, labels = int32_model
    ids = {name: value.astype(dtype) for name, value in packed.items()}
    for rows in (1, 3, 40):  # one traced call (at most a batch) and batches
        expected = model.predict({k: v[:rows] for k, v in packed.items()}, verbose=0)
        got = model.predict({k: v[:rows] for k, v in ids.items()}, verbose=0)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    expected = model.evaluate(packed, labels, verbose=0, return_dict=True)
    assert model.evaluate(ids, labels, verbose=0, return_dict=True) == pytest.approx(expected)
    dataset = tf.data.Dataset.from_tensor_slices((ids, labels)).batch(8)
    assert model.evaluate(dataset, verbose=0, return_dict=True) == pytest.approx(expected)
    before = weights_of(model)
    model.fit(ids, labels, batch_size=8, epochs=1, verbose=0)
    model.fit(dataset, epochs=1, verbose=0)
    assert changed(before, model) == len(before)


def test_ids_that_are_not_integers_are_refused_by_name():
    model = classifier()
    ids = {"input_word_ids": np.array([[2.0, 6.0, 3.0]]), "input_mask": np.ones((1, 3)),
           "input_type_ids": np.zeros((1, 3), np.int32)}
    with pytest.raises(ValueError, match="input_word_ids must hold integer ids"):
        model.predict(ids, verbose=0)
    too_large = {**ids, "input_word_ids": np.array([[2, 2**40, 3]])}
    with pytest.raises(ValueError, match="input_word_ids holds values outside int32"):
        model.predict(too_large, verbose=0)


def test_tf_data_steps_per_epoch_and_callbacks_as_in_keras(tmp_path):
    texts, labels = texts_and_labels(32)
    model = classifier()
    model.compile(learning_rate=1e-3)
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8)
    checkpoint_path = os.path.join(tmp_path, "best.keras")
    history = model.fit(dataset.repeat(), steps_per_epoch=2, epochs=3, verbose=0,
                        validation_data=dataset,
                        callbacks=[keras.callbacks.EarlyStopping(patience=5),
                                   keras.callbacks.ModelCheckpoint(checkpoint_path,
                                                                   save_best_only=True)])
    assert len(history.history["val_loss"]) == 3 and int(model.optimizer.iterations) == 6
    best = keras.saving.load_model(checkpoint_path)
    assert isinstance(best, BertClassifier)
    predictions = model.predict(dataset, verbose=0)
    assert predictions.shape == (32, 2)
    np.testing.assert_allclose(predictions, model.predict(texts, verbose=0), rtol=1e-4,
                               atol=1e-6)
    # (Callbacks that set the rate: test_an_optimizer_the_user_compiled_with_is_left_as_made.)


def test_class_and_sample_weights_change_the_loss():
    texts, labels = texts_and_labels(16)
    model = classifier()
    model.compile(learning_rate=1e-3)
    plain = model.evaluate(texts, labels, verbose=0, return_dict=True)["loss"]
    weights = np.where(labels == 1, 2.0, 0.0)
    weighted = model.evaluate(texts, labels, sample_weight=weights, verbose=0,
                              return_dict=True)["loss"]
    assert weighted != pytest.approx(plain)
    history = model.fit(texts, labels, batch_size=8, epochs=1, verbose=0,
                        class_weight={0: 1.0, 1: 3.0})
    assert np.isfinite(history.history["loss"][0])


def test_a_frozen_encoder_stays_and_the_head_trains():
    texts, labels = texts_and_labels()
    model = classifier()
    model.encoder.trainable = False
    model.compile(learning_rate=1e-3)
    encoder_before = [v.numpy().copy() for v in model.encoder.weights]
    head_before = weights_of(model)
    assert len(head_before) < len(encoder_before)
    model.fit(texts, labels, batch_size=8, epochs=1, verbose=0)
    for a, v in zip(encoder_before, model.encoder.weights):
        np.testing.assert_array_equal(a, v.numpy())
    assert changed(head_before, model) == len(head_before)


def test_the_encoder_inside_a_users_functional_model_trains():
    model = classifier()
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in ("input_word_ids", "input_mask", "input_type_ids")}
    pooled = model.encoder(inputs)["pooled_output"]
    users = keras.Model(inputs, keras.layers.Dense(1)(pooled))
    users.compile(optimizer="adam", loss="mse")
    texts, _ = texts_and_labels(16)
    packed = {k: v.numpy() for k, v in model.preprocessor(tf.constant(texts)).items()}
    before = [v.numpy().copy() for v in model.encoder.trainable_variables]
    users.fit(packed, np.ones(16), batch_size=8, epochs=1, verbose=0)
    assert any(not np.array_equal(a, v.numpy())
               for a, v in zip(before, model.encoder.trainable_variables))


@pytest.fixture(scope="module")
def untrained():
    """(a classifier, 4 texts, its predictions for them), for the tests that only read it."""
    model = classifier()
    texts, _ = texts_and_labels(4)
    return model, texts, model.predict(texts, verbose=0)


def test_get_config_from_config_gives_the_same_model(untrained):
    model, texts, predictions = untrained
    copy = BertClassifier.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    np.testing.assert_allclose(copy.predict(texts, verbose=0), predictions, rtol=1e-6)


def test_a_second_fit_under_the_global_mixed_bfloat16_policy_trains():
    from tests.test_layer_harness import global_policy
    texts, labels = texts_and_labels(16)
    with global_policy("mixed_bfloat16"):
        model = classifier()
        model.compile(learning_rate=1e-3)
        model.fit(texts, labels, batch_size=8, epochs=1, verbose=0)
        before = weights_of(model)
        model.fit(texts, labels, batch_size=8, epochs=1, verbose=0)
        assert model.encoder.dtype_policy.name == "mixed_bfloat16"
        assert all(v.dtype == "float32" for v in model.trainable_variables)
        assert changed(before, model) == len(before)
        assert np.isfinite(model.predict(texts, verbose=0)).all()


def test_keras_export_serves_raw_text_through_the_graph_mode_loader(untrained, tmp_path):
    model, texts, expected = untrained
    path = str(tmp_path / "exported")
    model.export(path)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        signature = meta.signature_def["serving_default"]
        got = session.run(signature.outputs["probabilities"].name,
                          {signature.inputs["text"].name: texts})
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
