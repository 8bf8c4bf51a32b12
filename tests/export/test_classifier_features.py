"""Exports of a classifier with numeric and categorical features, run as TF Serving runs them
(graph-mode loader + Session.run, and the local server's REST row and columnar formats):
serving_default takes the raw text and the named features, serve_ids the packed ids and the
features, classify/regress read the features from tf.Examples; every output equals Keras'.
The quick tests run the exports in graph mode, with the server's own request conversions; the
slow ones send the requests to the local server."""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import classification_pb2, predict_pb2, regression_pb2

from keras_bert import BertClassifier, BertPreprocessor
from keras_bert.export import export_model
from keras_bert.serving import json_api, tensors
from keras_bert.serving.errors import ServingError
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
    features, and their exports."""
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
    return {"cls": classifier, "sts": regressor}, paths


@pytest.fixture(scope="module")
def loaded(models):
    """Each export, loaded once as TF Serving loads it."""
    _, paths = models
    return {name: GraphModeModel(path) for name, path in paths.items()}


@pytest.fixture(scope="module")
def stubs(models):
    """The exports served by the local server, for the slow tests."""
    _, paths = models
    base = pathlib.Path(paths["cls"]).parent.parent
    with running_server("--model_config_file", write_model_config(base, paths)) as (_, stubs):
        yield stubs


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


def rest_predict(graph: GraphModeModel, body: dict) -> tuple[int, dict]:
    """(HTTP status, JSON body) of the local server's REST predict on serving_default, through
    its own steps (json_api's row/columnar conversion, the input checks, the response's JSON)
    on the graph-mode load of the model, without the server."""
    signature = graph.signature_defs["serving_default"]
    request, response = predict_pb2.PredictRequest(), predict_pb2.PredictResponse()
    try:
        format_ = json_api.fill_predict_request(body, signature.inputs, request)
        tensors.check_inputs(signature, request.inputs)
        outputs = graph.run("serving_default", **{
            name: tensors.to_numpy(name, proto) for name, proto in request.inputs.items()})
    except ServingError as e:
        return e.http_status, {"error": e.message}
    for name, value in outputs.items():
        response.outputs[name].CopyFrom(tensors.to_proto(value))
    return 200, json.loads(json.dumps(json_api.predict_response(response, format_)))


def regress_request() -> regression_pb2.RegressionRequest:
    """A Regress request for the pairs (TEXTS, TEXTS reversed) on the sts model, ages left out
    where missing."""
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "sts"
    request.model_spec.signature_name = "regress"
    request.input.example_list.examples.extend(
        example(t, {"age": None if np.isnan(a) else a}, p)
        for t, p, a in zip(TEXTS, TEXTS[::-1], AGES))
    return request


def regressed(model: BertClassifier) -> np.ndarray:
    """Keras' scores for the pairs of ``regress_request``."""
    return model.predict({"text": TEXTS, "text_pair": TEXTS[::-1], "age": AGES}, verbose=0)[:, 0]


@pytest.mark.slow
def test_serving_default_serve_ids_and_classify_take_the_features(models, loaded, stubs):
    keras_models, _ = models
    model, graph = keras_models["cls"], loaded["cls"]
    assert set(graph.signature_defs["serving_default"].inputs) == {"text", "age", "country"}
    assert set(graph.signature_defs["serve_ids"].inputs) == {
        "input_word_ids", "input_mask", "input_type_ids", "age", "country"}
    expected = model.predict({"text": TEXTS, "age": AGES, "country": COUNTRIES}, verbose=0)
    assert len(set(expected.argmax(-1))) > 1 or np.ptp(expected) > 1e-3

    out = graph.run("serving_default", text=np.array(TEXTS, object),
                    age=np.array(AGES, np.float32), country=np.array(COUNTRIES, object))
    np.testing.assert_allclose(out["probabilities"], expected, atol=ATOL)
    assert [n.decode() for n in out["class_names"]] == [
        model.label_names[i] for i in expected.argmax(-1)]

    packed = {k: v.numpy() for k, v in model.preprocessor(tf.constant(TEXTS)).items()}
    out = graph.run("serve_ids", **packed, age=np.array(AGES, np.float32),
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


def check_rest_row_and_columnar_formats(model, rest):
    """``rest(body)`` -> (HTTP status, JSON body) answers rows and columns with Keras'
    probabilities, and refuses a row without a feature naming it."""
    rows = [{"text": "the good movie", "age": 30.0, "country": "fr"},
            {"text": "the very very good movie", "age": 81.0, "country": "zz"}]
    expected = model.predict({name: [row[name] for row in rows] for name in rows[0]}, verbose=0)
    status, body = rest({"instances": rows})
    assert status == 200, body
    np.testing.assert_allclose([p["probabilities"] for p in body["predictions"]], expected,
                               atol=ATOL)
    status, body = rest({"inputs": {name: [row[name] for row in rows] for name in rows[0]}})
    assert status == 200, body
    np.testing.assert_allclose(body["outputs"]["probabilities"], expected, atol=ATOL)
    status, body = rest({"instances": [{"text": "the good movie", "age": 30.0}]})
    assert status == 400 and "country" in json.dumps(body)


def test_rest_row_and_columnar_formats_in_graph_mode(models, loaded):
    """The REST formats' requests as the server converts them, run on the graph-mode load
    (test_rest_row_and_columnar_formats sends them to the server)."""
    keras_models, _ = models
    check_rest_row_and_columnar_formats(keras_models["cls"],
                                        lambda body: rest_predict(loaded["cls"], body))


@pytest.mark.slow
def test_rest_row_and_columnar_formats(models, stubs):
    keras_models, _ = models
    check_rest_row_and_columnar_formats(keras_models["cls"],
                                        lambda body: stubs.rest("/v1/models/cls:predict", body))


def test_pair_regressor_with_features_serves_and_regresses(models, loaded):
    """serving_default's score is Keras'; the regress signature answers a Regress request's
    tf.Examples (serialized as the server passes them; a left-out age is missing) with the
    same values, in the layout TF Serving's Regress API needs (test_tf_serving_regress sends
    the request to the server)."""
    keras_models, _ = models
    expected = regressed(keras_models["sts"])
    graph = loaded["sts"]
    out = graph.run("serving_default", text=np.array(TEXTS, object),
                    text_pair=np.array(TEXTS[::-1], object), age=np.array(AGES, np.float32))
    assert set(out) == {"score"}
    np.testing.assert_allclose(out["score"], expected, atol=ATOL)
    regress = graph.signature_defs["regress"]
    assert set(regress.inputs) == {"inputs"} and set(regress.outputs) == {"outputs"}
    assert regress.inputs["inputs"].dtype == types_pb2.DT_STRING
    examples = tensors.serialized_examples(regress_request().input)
    values = graph.run("regress", inputs=np.array(examples, object))["outputs"]
    assert values.dtype == np.float32 and values.shape == (len(TEXTS),)
    np.testing.assert_allclose(values, expected, atol=ATOL)


@pytest.mark.slow
def test_tf_serving_regress(models, stubs):
    keras_models, _ = models
    response = stubs.prediction.Regress(regress_request(), timeout=60)
    np.testing.assert_allclose([r.value for r in response.result.regressions],
                               regressed(keras_models["sts"]), atol=ATOL)


def test_export_needs_the_feature_statistics(tmp_path):
    model = BertClassifier(tiny_encoder(), 2, preprocessor=BertPreprocessor(vocabulary=VOCAB),
                           categorical_features=["country"])
    with pytest.raises(ValueError, match="'country' are not known"):
        export_model(model, str(tmp_path), "cls")
