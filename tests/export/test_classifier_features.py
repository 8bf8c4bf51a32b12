"""Exports of a classifier with numeric and categorical features, run as TF Serving runs them
(graph-mode loader + Session.run, and the local server's REST row and columnar formats):
serving_default takes the raw text and the named features, serve_ids the packed ids and the
features, classify/regress read the features from tf.Examples; every output equals Keras'."""

import json

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2
from tensorflow_serving.apis import classification_pb2, regression_pb2

from keras_bert import BertClassifier, BertPreprocessor
from keras_bert.export import export_model
from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder
from tests.serving.graph_mode import GraphModeModel
from tests.serving.server_helpers import running_server, write_model_config

ATOL = 2e-5
# 11 rows of different lengths (served in sorted chunks of 8), with missing values.
TEXTS = ["the " + "very " * n + "good movie" for n in (9, 1, 12, 3, 0, 10, 5, 2, 11, 7, 4)]
AGES = [25.0, np.nan, 70.0, 40.0, 18.0, np.nan, 55.0, 33.0, 90.0, 61.0, 47.0]
COUNTRIES = ["fr", "us", "", "de", "us", "fr", "jp", "", "us", "fr", "de"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A 3-class classifier (numeric given, vocabulary learned) and a pair regressor with
    features, exported and served by the local server."""
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=24)
    classifier = BertClassifier(tiny_encoder(1), 3, preprocessor=preprocessor,
                                label_names=["low", "mid", "high"],
                                numeric_features={"age": {"mean": 45.0, "variance": 300.0}},
                                categorical_features=["country"])
    classifier.adapt({"text": TEXTS, "age": AGES, "country": COUNTRIES})
    regressor = BertClassifier(tiny_encoder(2), 1, preprocessor=preprocessor,
                               numeric_features=["age"], pooling="mean")
    regressor.adapt({"text": TEXTS, "text_pair": TEXTS[::-1], "age": AGES})
    base = tmp_path_factory.mktemp("exports")
    paths = {"cls": export_model(classifier, str(base), "cls"),
             "sts": export_model(regressor, str(base), "sts", text_pair=True)}
    config = write_model_config(base, paths)
    with running_server("--model_config_file", config) as (_, stubs):
        yield {"cls": classifier, "sts": regressor}, paths, stubs


def example(text, features, text_pair=None):
    """A tf.Example: bytes text (and text_pair), float numeric and bytes categorical features
    (None: left out, which the signature reads as missing)."""
    result = example_pb2.Example()
    result.features.feature["text"].bytes_list.value.append(text.encode())
    if text_pair is not None:
        result.features.feature["text_pair"].bytes_list.value.append(text_pair.encode())
    for name, value in features.items():
        if isinstance(value, str):
            result.features.feature[name].bytes_list.value.append(value.encode())
        elif value is not None:
            result.features.feature[name].float_list.value.append(value)
    return result


@pytest.mark.slow
def test_serving_default_serve_ids_and_classify_take_the_features(models):
    keras_models, paths, stubs = models
    model = keras_models["cls"]
    loaded = GraphModeModel(paths["cls"])
    assert set(loaded.signature_defs["serving_default"].inputs) == {"text", "age", "country"}
    assert set(loaded.signature_defs["serve_ids"].inputs) == {
        "input_word_ids", "input_mask", "input_type_ids", "age", "country"}
    expected = model.predict({"text": TEXTS, "age": AGES, "country": COUNTRIES}, verbose=0)
    assert len(set(expected.argmax(-1))) > 1 or np.ptp(expected) > 1e-3

    out = loaded.run("serving_default", text=np.array(TEXTS, object),
                     age=np.array(AGES, np.float32), country=np.array(COUNTRIES, object))
    np.testing.assert_allclose(out["probabilities"], expected, atol=ATOL)
    assert [n.decode() for n in out["class_names"]] == [
        model.label_names[i] for i in expected.argmax(-1)]

    packed = {k: v.numpy() for k, v in model.preprocessor(tf.constant(TEXTS)).items()}
    out = loaded.run("serve_ids", **packed, age=np.array(AGES, np.float32),
                     country=np.array(COUNTRIES, object))
    np.testing.assert_allclose(out["probabilities"], expected, atol=ATOL)

    # Classify: a feature left out of a tf.Example is missing (NaN, ""), as in Keras.
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "cls"
    request.model_spec.signature_name = "classify"
    request.input.example_list.examples.extend(
        example(t, {"age": None if np.isnan(a) else a, "country": c or None})
        for t, a, c in zip(TEXTS, AGES, COUNTRIES))
    result = stubs.prediction.Classify(request, timeout=60).result
    scores = [[c.score for c in row.classes] for row in result.classifications]
    np.testing.assert_allclose(scores, expected, atol=ATOL)
    assert [c.label for c in result.classifications[0].classes] == model.label_names


def test_rest_row_and_columnar_formats(models):
    keras_models, _, stubs = models
    rows = [{"text": "the good movie", "age": 30.0, "country": "fr"},
            {"text": "the very very good movie", "age": 81.0, "country": "zz"}]
    expected = keras_models["cls"].predict(
        {name: [row[name] for row in rows] for name in rows[0]}, verbose=0)
    status, body = stubs.rest("/v1/models/cls:predict", {"instances": rows})
    assert status == 200, body
    np.testing.assert_allclose([p["probabilities"] for p in body["predictions"]], expected,
                               atol=ATOL)
    status, body = stubs.rest("/v1/models/cls:predict", {"inputs": {
        name: [row[name] for row in rows] for name in rows[0]}})
    assert status == 200, body
    np.testing.assert_allclose(body["outputs"]["probabilities"], expected, atol=ATOL)
    status, body = stubs.rest("/v1/models/cls:predict", {"instances": [
        {"text": "the good movie", "age": 30.0}]})
    assert status == 400 and "country" in json.dumps(body)


def test_pair_regressor_with_features_serves_and_regresses(models):
    keras_models, paths, stubs = models
    model = keras_models["sts"]
    pairs = TEXTS[::-1]
    expected = model.predict({"text": TEXTS, "text_pair": pairs, "age": AGES}, verbose=0)[:, 0]
    out = GraphModeModel(paths["sts"]).run(
        "serving_default", text=np.array(TEXTS, object), text_pair=np.array(pairs, object),
        age=np.array(AGES, np.float32))
    assert set(out) == {"score"}
    np.testing.assert_allclose(out["score"], expected, atol=ATOL)
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "sts"
    request.model_spec.signature_name = "regress"
    request.input.example_list.examples.extend(
        example(t, {"age": None if np.isnan(a) else a}, p)
        for t, p, a in zip(TEXTS, pairs, AGES))
    values = [r.value for r in stubs.prediction.Regress(request, timeout=60).result.regressions]
    np.testing.assert_allclose(values, expected, atol=ATOL)


def test_export_needs_the_feature_statistics(tmp_path):
    model = BertClassifier(tiny_encoder(), 2, preprocessor=BertPreprocessor(vocabulary=VOCAB),
                           categorical_features=["country"])
    with pytest.raises(ValueError, match="'country' are not known"):
        export_model(model, str(tmp_path), "cls")
