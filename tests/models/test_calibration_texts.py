"""A task model keeps a sample of the texts it was trained on (``calibration_texts``), saves it
with a "keras" checkpoint, and int8 (``quantize`` and ``export_model(quantize="int8")``)
calibrates on it when no texts are given: a user who trained or distilled a model gets the
calibrated export without a calibration file. Tiny models."""

import os

import numpy as np
import pytest

from keras_bert import BertClassifier, export_model, save_checkpoint
from keras_bert.checkpoints.names import encoder_of
from keras_bert.config import CALIBRATION_SAMPLE_TEXTS
from keras_bert.export.int8 import export_variant
from tests.models.test_task_keras_idioms import classifier, texts_and_labels
from tests.serving.graph_mode import GraphModeModel


def trained(count=24):
    texts, labels = texts_and_labels(count)
    model = classifier()
    model.compile(learning_rate=1e-3)
    model.fit(texts, labels, batch_size=8, epochs=1, verbose=0, seed=0)
    return model, texts


@pytest.fixture(scope="module")
def trained_model():
    return trained()


def test_fit_keeps_a_sample_of_its_training_texts_and_a_checkpoint_keeps_them(tmp_path,
                                                                               trained_model):
    model, texts = trained_model
    assert model.calibration_texts is not None
    assert sorted(model.calibration_texts) == sorted(texts)  # fewer than the sample's size
    path = save_checkpoint(model, tmp_path / "ckpt")
    with open(os.path.join(path, "calibration_texts.txt"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) == len(texts)
    loaded = BertClassifier.from_pretrained(path)
    assert loaded.calibration_texts == model.calibration_texts


def test_the_sample_is_at_most_its_size_and_reads_packed_ids_back_as_text():
    model = classifier()
    texts = [f"text {i}" for i in range(CALIBRATION_SAMPLE_TEXTS + 50)]
    sample = model.sample_texts(np.array(texts, dtype=object), CALIBRATION_SAMPLE_TEXTS, seed=0)
    assert len(sample) == CALIBRATION_SAMPLE_TEXTS and set(sample) <= set(texts)
    pairs = model.sample_texts((np.array(["a b"], dtype=object), np.array(["c"], dtype=object)),
                               10)
    assert pairs == ["a b c"]
    ids = model.preprocessor(["the cat sat", "a dog"])
    decoded = model.sample_texts({name: value.numpy() for name, value in ids.items()}, 10)
    assert sorted(decoded) == sorted(model.tokenizer.decode(row)
                                     for row in ids["input_word_ids"].numpy())
    assert all(decoded) and "[CLS]" not in " ".join(decoded)


@pytest.fixture(scope="module")
def int8_variant(trained_model):
    """(the trained model's int8 export variant, given no texts, whether it is int8)."""
    model, _ = trained_model
    return export_variant(model, "int8", None, model.preprocessor)


def test_int8_of_a_trained_model_is_calibrated_without_asking_for_texts(trained_model,
                                                                        int8_variant):
    model, _ = trained_model
    copy, is_int8 = int8_variant
    assert is_int8 and encoder_of(copy).static_int8_ranges
    untrained = classifier()
    copy, _ = export_variant(untrained, "int8", None, untrained.preprocessor)
    assert not encoder_of(copy).static_int8_ranges  # no texts: ranges found per row
    in_place = classifier()
    in_place.calibration_texts = model.calibration_texts
    in_place.quantize("int8")
    assert encoder_of(in_place).static_int8_ranges


def test_a_calibrated_int8_export_of_a_trained_model_answers_as_its_calibrated_copy(
        tmp_path, trained_model, int8_variant):
    model, texts = trained_model
    path = export_model(model, tmp_path, "m", quantize="int8")
    served = GraphModeModel(path).run("serving_default", text=np.array(texts[:4], dtype=object))
    copy, _ = int8_variant
    np.testing.assert_allclose(served["probabilities"], copy.predict(texts[:4], verbose=0),
                               atol=1e-4)


def test_too_few_kept_texts_leave_int8_on_per_row_ranges(trained_model):
    model, _ = trained_model
    few = classifier()
    few.calibration_texts = model.calibration_texts[:3]  # fit on three texts keeps three
    copy, is_int8 = export_variant(few, "int8", None, few.preprocessor)
    assert is_int8 and not encoder_of(copy).static_int8_ranges
